// infer/gemm.cpp: packing and the register-blocked micro-kernel (see gemm.h).
#include "infer/gemm.h"

#include <algorithm>
#include <array>
#include <utility>

#include "common/simd.h"

namespace tclm::infer {
namespace {

using simd::kLanes;
using simd::load;
using simd::splat;
using simd::store;
using simd::V;
using simd::vmax;
using simd::vsoftplus;

constexpr int kMaxNV = 4;                    // vectors per panel row: 64 output columns
constexpr int kPanel = kMaxNV * kLanes;      // columns per full panel

// Rows per tile for NV vectors per row: MR * NV accumulators plus NV panel vectors and one broadcast
// must fit the register file (32 vectors with AVX-512, 16 with AVX2 where a V is two registers anyway,
// so the compiler spills a little there; results are the same).
constexpr int rows_for(int nv) { return nv == 4 ? 6 : nv == 3 ? 8 : 12; }

inline V apply(Epilogue epi, V t, const float* bias, float* c) {
  switch (epi) {
    case Epilogue::kStore:
      return t;
    case Epilogue::kBias:
      return t + load(bias);
    case Epilogue::kBiasSoftplus:
      return vsoftplus(t + load(bias));
    case Epilogue::kBiasRelu:
      return vmax(t + load(bias), V{});
    case Epilogue::kAccumulate:
      return load(c) + t;
  }
  return t;
}

template <int MR, int NV>
void tile(const float* A, int64_t lda, const float* P, int K, float* C, int64_t ldc, Epilogue epi,
          const float* bias) {
  V acc[MR][NV];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) acc[r][j] = V{};
  }
  for (int k = 0; k < K; ++k) {
    V b[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) b[j] = *reinterpret_cast<const V*>(P + (static_cast<int64_t>(k) * NV + j) * kLanes);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const V a = splat(A[r * lda + k]);
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[r][j] += a * b[j];
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      float* c = C + r * ldc + j * kLanes;
      store(c, apply(epi, acc[r][j], bias + j * kLanes, c));
    }
  }
}

using TileFn = void (*)(const float*, int64_t, const float*, int, float*, int64_t, Epilogue, const float*);

template <int NV, int... R>
constexpr auto make_table(std::integer_sequence<int, R...>) {
  return std::array<TileFn, sizeof...(R)>{&tile<R + 1, NV>...};
}

// kTiles[nv - 1][mr - 1]: the tile kernel for nv vectors and mr rows (mr <= rows_for(nv)).
template <int NV>
struct Tiles {
  static constexpr auto table = make_table<NV>(std::make_integer_sequence<int, rows_for(NV)>{});
};

template <int NV>
void panel_gemm(const float* A, int64_t lda, int64_t M, const float* P, int K, float* C, int64_t ldc,
                Epilogue epi, const float* bias) {
  constexpr int MR = rows_for(NV);
  int64_t m = 0;
  for (; m + MR <= M; m += MR) tile<MR, NV>(A + m * lda, lda, P, K, C + m * ldc, ldc, epi, bias);
  if (m < M) Tiles<NV>::table[M - m - 1](A + m * lda, lda, P, K, C + m * ldc, ldc, epi, bias);
}

}  // namespace

void PackedLinear::pack(const float* w, int n_rows, int k_in, const float* b, const std::vector<int>* out_rows,
                        int n_out) {
  K = k_in;
  N = out_rows ? n_out : n_rows;
  const int64_t np = padded_n();
  const int64_t n_panels = (np + kPanel - 1) / kPanel;
  panels.assign(static_cast<size_t>(n_panels * kPanel * K), 0.0f);
  bias.assign(static_cast<size_t>(np), 0.0f);
  for (int n = 0; n < n_rows; ++n) {
    const int col = out_rows ? (*out_rows)[n] : n;
    const int64_t p = col / kPanel;
    const int64_t width = std::min<int64_t>(kPanel, np - p * kPanel);  // columns of this panel (16 nv)
    const int64_t j = col - p * kPanel;
    float* panel = panels.data() + p * kPanel * K;
    for (int k = 0; k < K; ++k) panel[k * width + j] = w[static_cast<int64_t>(n) * K + k];
    if (b) bias[col] = b[n];
  }
}

void gemm(const float* A, int64_t lda, int64_t M, const PackedLinear& W, float* C, int64_t ldc, Epilogue epi) {
  if (M <= 0) return;
  const int64_t np = W.padded_n();
  for (int64_t c0 = 0; c0 < np; c0 += kPanel) {
    const int nv = static_cast<int>(std::min<int64_t>(kPanel, np - c0) / kLanes);
    const float* P = W.panels.data() + c0 * W.K;
    const float* bias = W.bias.data() + c0;
    switch (nv) {
      case 4: panel_gemm<4>(A, lda, M, P, W.K, C + c0, ldc, epi, bias); break;
      case 3: panel_gemm<3>(A, lda, M, P, W.K, C + c0, ldc, epi, bias); break;
      case 2: panel_gemm<2>(A, lda, M, P, W.K, C + c0, ldc, epi, bias); break;
      default: panel_gemm<1>(A, lda, M, P, W.K, C + c0, ldc, epi, bias); break;
    }
  }
}

}  // namespace tclm::infer
