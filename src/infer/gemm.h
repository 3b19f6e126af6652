// infer/gemm.h: the small dense matrix products of the inference engine (internal).
//
// Every Linear layer of the model is  C[m, n] (op)= epilogue(sum_k A[m, k] W[n, k] + bias[n])  with A the
// activations of a block of rows (row-major, leading dimension lda) and W a torch Linear weight
// [out, in]. W is packed once, at load time, into column panels of up to 64 output columns: panel p
// holds W[p*64 .. p*64+63, k] for k = 0..K-1 as K consecutive rows of 16-float vectors, zero past N.
// A register-blocked micro-kernel then computes an MR x (16 NV) tile of C with MR*NV accumulators
// (6 x 64 on AVX-512: 24 of the 32 vector registers), streaming one broadcast of A and NV vector
// loads of the panel per k. The tile is written with full vectors: C needs columns up to
// round_up(N, 16) (the padding columns receive 0 + bias padding = 0, or are left at 0 + old value).
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

namespace tclm::infer {

/// What the micro-kernel does with a finished tile t (per column n).
enum class Epilogue {
  kStore,            // C = t
  kBias,             // C = t + bias
  kBiasSoftplus,     // C = softplus(t + bias)
  kBiasRelu,         // C = max(t + bias, 0)
  kAccumulate,       // C = C + t   (the residual add)
};

/// 64-byte aligned float storage (std::vector with an aligned allocator).
template <typename T>
struct AlignedAllocator {
  using value_type = T;
  AlignedAllocator() = default;
  template <typename U>
  AlignedAllocator(const AlignedAllocator<U>&) {}
  T* allocate(size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(64)));
  }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(64)); }
  template <typename U>
  bool operator==(const AlignedAllocator<U>&) const { return true; }
};
using AlignedFloats = std::vector<float, AlignedAllocator<float>>;

inline int64_t round_up16(int64_t n) { return (n + 15) / 16 * 16; }

/// A Linear weight packed for the micro-kernel, with its bias padded to round_up16(N) (zeros if none).
struct PackedLinear {
  int K = 0;        // input features
  int N = 0;        // output features
  AlignedFloats panels;
  AlignedFloats bias;

  /// w: [N, K] row-major (torch Linear weight); bias: [N] or nullptr.
  /// `out_rows` optionally places output n at column out_rows[n] (for gaps, e.g. a padded split);
  /// N_out is then the number of output columns (rows of the packed matrix, zero where unmapped).
  void pack(const float* w, int N, int K, const float* bias, const std::vector<int>* out_rows = nullptr,
            int N_out = -1);
  /// Output columns written by gemm (round_up16(N)).
  int64_t padded_n() const { return round_up16(N); }
};

/// C[0..M, 0..padded_n) (op)= A[0..M, 0..K) * W^T (+ bias) under `epi`. A: lda >= K; C: ldc >= padded_n.
/// Thread-safe (reads W only).
void gemm(const float* A, int64_t lda, int64_t M, const PackedLinear& W, float* C, int64_t ldc, Epilogue epi);

}  // namespace tclm::infer
