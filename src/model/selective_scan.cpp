// model/selective_scan.cpp: the CPU kernels of the Mamba mixer as libtorch autograd functions with fused
// forward and backward passes, each with a tensor-op reference for the tests: the selective scan of
// Mamba-1 (reference-notes §3.2) and, at the end, the causal depthwise conv1d + SiLU.
//
//   h_t[e,n] = exp(delta_t[e] * A[e,n]) * h_{t-1}[e,n] + delta_t[e] * B_t[n] * u_t[e]      h_{-1} = 0
//   y_t[e]   = sum_n C_t[n] * h_t[e,n] + D[e] * u_t[e]
//
// Kernel layout. Work is split over the batch into fixed chunks of kBatchChunk programs (at::parallel_for
// over chunks). Inside a program the channels e are processed kLanes at a time as one GCC/Clang vector
// ("lane" = channel), so the state of one channel block is N vectors and every exp is a vector exp. A
// partial last block is zero-padded; zero u, delta and dy make the padded lanes contribute exactly 0.
//
// Backward, per (program, channel block): recompute h_t and abar_t = exp(delta_t A) forward into local
// buffers of L*N vectors, then run the reverse-time pass with g_t = dL/dh_t:
//   g_t = C_t dy_t + abar_{t+1} g_{t+1}
//   dC_t[n] = sum_e dy_t h_t                 dB_t[n] = sum_e g_t delta_t u_t
//   du_t = D dy_t + sum_n g_t delta_t B_t    ddelta_t = sum_n g_t (h_{t-1} abar_t A + B_t u_t)
//   dA[e,n] = sum_{b,t} g_t h_{t-1} abar_t delta_t                 dD[e] = sum_{b,t} dy_t u_t
// dB and dC reduce over channels of one program (one thread owns the program); dA and dD reduce over the
// batch into one partial buffer per chunk, summed in chunk order afterwards, so the gradients are
// deterministic whatever the thread count.
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "model/mamba.h"

#if !defined(__GNUC__)
#error "selective_scan.cpp uses GCC/Clang vector extensions"
#endif
#if AT_PARALLEL_OPENMP && !defined(_OPENMP)
// With libtorch's OpenMP backend, at::parallel_for is an inline `#pragma omp parallel`: without -fopenmp
// it silently runs on one thread (the kernels are then about 2x slower on 2 cores).
#warning "built without OpenMP: the Mamba kernels run on one thread; link OpenMP::OpenMP_CXX"
#endif

namespace tclm {
namespace {

constexpr int kLanes = 8;            // channels per vector (one AVX register of float32)
constexpr int64_t kBatchChunk = 16;  // programs per work item and per partial buffer of a batch reduction

typedef float VecF __attribute__((vector_size(kLanes * sizeof(float))));
typedef int32_t VecI __attribute__((vector_size(kLanes * sizeof(int32_t))));

inline VecF splat(float v) {
  VecF r = {};
  for (int j = 0; j < kLanes; ++j) r[j] = v;
  return r;
}

/// Loads `cnt` (<= kLanes) consecutive floats, zero-filling the remaining lanes.
inline VecF load(const float* p, int cnt) {
  VecF v = {};
  if (cnt == kLanes) {
    std::memcpy(&v, p, sizeof(VecF));
  } else {
    std::memcpy(&v, p, sizeof(float) * cnt);
  }
  return v;
}

inline void store(float* p, VecF v, int cnt) {
  if (cnt == kLanes) {
    std::memcpy(p, &v, sizeof(VecF));
  } else {
    std::memcpy(p, &v, sizeof(float) * cnt);
  }
}

inline VecF select(VecI mask, VecF a, VecF b) {  // mask lane -1: a, 0: b
  return (VecF)((mask & (VecI)a) | (~mask & (VecI)b));
}

inline float hsum(VecF v) {
  float s = 0.0f;
  for (int j = 0; j < kLanes; ++j) s += v[j];
  return s;
}

/// Vector exp (Cephes expf polynomial, <= 2 ulp on [-87.3, 88]): exp(x) = 2^n * exp(r), n = round(x/ln2),
/// r = x - n ln2 in [-ln2/2, ln2/2]. Below -87.3 (where expf is subnormal) it returns 0; NaN propagates.
inline VecF vec_exp(VecF x) {
  constexpr float kLo = -87.33654f;            // log(FLT_MIN): 2^n stays a normal number
  constexpr float kHi = 88.0f;                 // keeps n + 127 <= 254
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;       // ln2 split so that n * kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRoundMagic = 12582912.0f;   // 1.5 * 2^23: adding it rounds to an integer
  constexpr int32_t kRoundMagicBits = 0x4B400000;
  const VecI underflow = x < splat(kLo);
  VecF xc = select(x < splat(kLo), splat(kLo), x);
  xc = select(xc > splat(kHi), splat(kHi), xc);
  const VecF t = xc * kLog2e + kRoundMagic;
  const VecF n = t - kRoundMagic;
  const VecI ni = (VecI)t - kRoundMagicBits;
  const VecF r = xc - n * kLn2Hi - n * kLn2Lo;
  VecF p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const VecF scale = (VecF)((ni + 127) << 23);
  return select(underflow, splat(0.0f), p * scale);
}

struct ScanDims {
  int64_t batch, n_steps, d_inner, d_state, n_blocks;
};

ScanDims check_inputs(const torch::Tensor& u, const torch::Tensor& delta, const torch::Tensor& A,
                      const torch::Tensor& Bm, const torch::Tensor& C, const torch::Tensor& D) {
  for (const torch::Tensor* t : {&u, &delta, &A, &Bm, &C, &D}) {
    TORCH_CHECK(t->defined(), "selective_scan: undefined input");
    TORCH_CHECK(t->scalar_type() == torch::kFloat32, "selective_scan: inputs must be float32, got ",
                t->scalar_type());
    TORCH_CHECK(t->device().is_cpu(), "selective_scan: inputs must be on the CPU");
  }
  TORCH_CHECK(u.dim() == 3, "selective_scan: u must be [B, L, E], got ", u.sizes());
  ScanDims d{u.size(0), u.size(1), u.size(2), A.dim() == 2 ? A.size(1) : -1, 0};
  d.n_blocks = (d.d_inner + kLanes - 1) / kLanes;
  TORCH_CHECK(delta.sizes() == u.sizes(), "selective_scan: delta ", delta.sizes(), " != u ", u.sizes());
  TORCH_CHECK(A.dim() == 2 && A.size(0) == d.d_inner, "selective_scan: A must be [E, N], got ", A.sizes());
  const std::vector<int64_t> bc_shape{d.batch, d.n_steps, d.d_state};
  TORCH_CHECK(Bm.sizes() == bc_shape, "selective_scan: B must be [B, L, N], got ", Bm.sizes());
  TORCH_CHECK(C.sizes() == bc_shape, "selective_scan: C must be [B, L, N], got ", C.sizes());
  TORCH_CHECK(D.dim() == 1 && D.size(0) == d.d_inner, "selective_scan: D must be [E], got ", D.sizes());
  return d;
}

/// A transposed into channel blocks: a_blk[blk * N + n] lane j = A[blk * kLanes + j, n] (0 past E).
/// Sums per-chunk partial gradients in chunk order (so the result does not depend on the thread
/// count). Each chunk's part holds a channel-blocked matrix {n_blocks, M} of vectors followed by a
/// channel-blocked vector {n_blocks}; they are reduced into mat {E, M} and vec {E}.
void reduce_chunk_partials(const std::vector<VecF>& partials, int64_t n_chunks, int64_t part_size,
                           int64_t n_blocks, int64_t E, int64_t M, float* mat, float* vec) {
  std::fill(mat, mat + E * M, 0.0f);
  std::fill(vec, vec + E, 0.0f);
  for (int64_t chunk = 0; chunk < n_chunks; ++chunk) {
    const VecF* mat_part = &partials[chunk * part_size];
    const VecF* vec_part = mat_part + n_blocks * M;
    for (int64_t e = 0; e < E; ++e) {
      const int64_t blk = e / kLanes, lane = e % kLanes;
      for (int64_t m = 0; m < M; ++m) mat[e * M + m] += mat_part[blk * M + m][lane];
      vec[e] += vec_part[blk][lane];
    }
  }
}

/// A row-major per-channel matrix src {E, M} as channel blocks: out[blk * M + m] lane j =
/// src[(blk * kLanes + j) * M + m], zero past E. Used for A {E, N} and the conv weight {E, 1, K}.
std::vector<VecF> block_channels(const float* src, int64_t E, int64_t M, int64_t n_blocks) {
  std::vector<VecF> out(n_blocks * M, VecF{});
  for (int64_t e = 0; e < E; ++e) {
    for (int64_t m = 0; m < M; ++m) out[(e / kLanes) * M + m][e % kLanes] = src[e * M + m];
  }
  return out;
}

// ---- forward: y {batch, n_steps, d_inner}
void scan_forward_f32(const float* u, const float* delta, const float* A, const float* Bm,
                      const float* C, const float* D, float* y, const ScanDims& d) {
  const int64_t L = d.n_steps, E = d.d_inner, N = d.d_state;
  const std::vector<VecF> a_blk = block_channels(A, d.d_inner, d.d_state, d.n_blocks);
  const int64_t n_chunks = (d.batch + kBatchChunk - 1) / kBatchChunk;
  at::parallel_for(0, n_chunks, 1, [&](int64_t chunk_begin, int64_t chunk_end) {
    std::vector<VecF> h(N);
    for (int64_t b = chunk_begin * kBatchChunk; b < std::min(d.batch, chunk_end * kBatchChunk); ++b) {
      for (int64_t blk = 0; blk < d.n_blocks; ++blk) {
        const int64_t e0 = blk * kLanes;
        const int cnt = static_cast<int>(std::min<int64_t>(kLanes, E - e0));
        const VecF d_skip = load(D + e0, cnt);
        const VecF* a = &a_blk[blk * N];
        std::fill(h.begin(), h.end(), VecF{});
        for (int64_t t = 0; t < L; ++t) {
          const int64_t row = b * L + t;
          const VecF ut = load(u + row * E + e0, cnt);
          const VecF dt = load(delta + row * E + e0, cnt);
          const VecF dtu = dt * ut;
          const float* bt = Bm + row * N;
          const float* ct = C + row * N;
          VecF acc = d_skip * ut;
          for (int64_t n = 0; n < N; ++n) {
            // h = exp(delta*A) * h + delta*B*u ;  y += C * h
            h[n] = vec_exp(dt * a[n]) * h[n] + dtu * bt[n];
            acc += h[n] * ct[n];
          }
          store(y + row * E + e0, acc, cnt);
        }
      }
    }
  });
}

struct ScanGrads {
  torch::Tensor du, ddelta, dA, dB, dC, dD;
};

// ---- backward: gradients of all six inputs given dy {batch, n_steps, d_inner}
void scan_backward_f32(const float* u, const float* delta, const float* A, const float* Bm,
                       const float* C, const float* D, const float* dy, float* du, float* ddelta,
                       float* dA, float* dB, float* dC, float* dD, const ScanDims& d) {
  const int64_t L = d.n_steps, E = d.d_inner, N = d.d_state;
  const std::vector<VecF> a_blk = block_channels(A, d.d_inner, d.d_state, d.n_blocks);
  const int64_t n_chunks = (d.batch + kBatchChunk - 1) / kBatchChunk;
  // Per chunk: dA partial {n_blocks, N} vectors, then dD partial {n_blocks} vectors.
  const int64_t part_size = d.n_blocks * N + d.n_blocks;
  std::vector<VecF> partials(n_chunks * part_size, VecF{});
  at::parallel_for(0, n_chunks, 1, [&](int64_t chunk_begin, int64_t chunk_end) {
    std::vector<VecF> hs(L * N), abar(L * N), dB_acc(L * N), dC_acc(L * N), carry(N);
    for (int64_t chunk = chunk_begin; chunk < chunk_end; ++chunk) {
      VecF* dA_part = &partials[chunk * part_size];
      VecF* dD_part = dA_part + d.n_blocks * N;
      for (int64_t b = chunk * kBatchChunk; b < std::min(d.batch, (chunk + 1) * kBatchChunk); ++b) {
        std::fill(dB_acc.begin(), dB_acc.end(), VecF{});
        std::fill(dC_acc.begin(), dC_acc.end(), VecF{});
        for (int64_t blk = 0; blk < d.n_blocks; ++blk) {
          const int64_t e0 = blk * kLanes;
          const int cnt = static_cast<int>(std::min<int64_t>(kLanes, E - e0));
          const VecF d_skip = load(D + e0, cnt);
          const VecF* a = &a_blk[blk * N];
          // Recompute abar_t = exp(delta_t A) and h_t.
          for (int64_t t = 0; t < L; ++t) {
            const int64_t row = b * L + t;
            const VecF ut = load(u + row * E + e0, cnt);
            const VecF dt = load(delta + row * E + e0, cnt);
            const VecF dtu = dt * ut;
            const float* bt = Bm + row * N;
            for (int64_t n = 0; n < N; ++n) {
              const VecF h_prev = t > 0 ? hs[(t - 1) * N + n] : VecF{};
              abar[t * N + n] = vec_exp(dt * a[n]);
              hs[t * N + n] = abar[t * N + n] * h_prev + dtu * bt[n];
            }
          }
          // Reverse pass; carry[n] = abar_{t+1} g_{t+1}.
          std::fill(carry.begin(), carry.end(), VecF{});
          VecF dD_acc = {};
          VecF* dA_blk = dA_part + blk * N;
          for (int64_t t = L - 1; t >= 0; --t) {
            const int64_t row = b * L + t;
            const VecF ut = load(u + row * E + e0, cnt);
            const VecF dt = load(delta + row * E + e0, cnt);
            const VecF dyt = load(dy + row * E + e0, cnt);
            const VecF dtu = dt * ut;
            const float* bt = Bm + row * N;
            const float* ct = C + row * N;
            dD_acc += dyt * ut;
            VecF du_acc = dyt * d_skip;
            VecF ddelta_acc = {};
            for (int64_t n = 0; n < N; ++n) {
              const int64_t i = t * N + n;
              const VecF g = carry[n] + dyt * ct[n];  // dL/dh_t
              dC_acc[i] += dyt * hs[i];
              const VecF h_prev = t > 0 ? hs[i - N] : VecF{};
              const VecF g_abar = g * h_prev * abar[i];  // dL/d(delta A) through abar_t
              ddelta_acc += g_abar * a[n];
              dA_blk[n] += g_abar * dt;
              const VecF gb = g * bt[n];  // through the input term delta_t B_t u_t
              ddelta_acc += gb * ut;
              du_acc += gb * dt;
              dB_acc[i] += g * dtu;
              carry[n] = abar[i] * g;
            }
            store(du + row * E + e0, du_acc, cnt);
            store(ddelta + row * E + e0, ddelta_acc, cnt);
          }
          dD_part[blk] += dD_acc;
        }
        for (int64_t i = 0; i < L * N; ++i) {
          dB[b * L * N + i] = hsum(dB_acc[i]);
          dC[b * L * N + i] = hsum(dC_acc[i]);
        }
      }
    }
  });
  // Batch reductions in chunk order (deterministic).
  reduce_chunk_partials(partials, n_chunks, part_size, d.n_blocks, E, N, dA, dD);
}

class SelectiveScanFunction : public torch::autograd::Function<SelectiveScanFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& u_in,
                               const torch::Tensor& delta_in, const torch::Tensor& A_in,
                               const torch::Tensor& Bm_in, const torch::Tensor& C_in,
                               const torch::Tensor& D_in) {
    const ScanDims d = check_inputs(u_in, delta_in, A_in, Bm_in, C_in, D_in);
    const torch::Tensor u = u_in.contiguous(), delta = delta_in.contiguous(), A = A_in.contiguous(),
                        Bm = Bm_in.contiguous(), C = C_in.contiguous(), D = D_in.contiguous();
    torch::Tensor y = torch::empty({d.batch, d.n_steps, d.d_inner}, u.options());
    scan_forward_f32(u.data_ptr<float>(), delta.data_ptr<float>(), A.data_ptr<float>(),
                     Bm.data_ptr<float>(), C.data_ptr<float>(), D.data_ptr<float>(), y.data_ptr<float>(),
                     d);
    ctx->save_for_backward({u, delta, A, Bm, C, D});
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &u = saved[0], &delta = saved[1], &A = saved[2], &Bm = saved[3], &C = saved[4],
                        &D = saved[5];
    const ScanDims d = check_inputs(u, delta, A, Bm, C, D);
    const torch::Tensor dy = grad_outputs[0].to(torch::kFloat32).contiguous();
    TORCH_CHECK(dy.sizes() == u.sizes(), "selective_scan backward: dy ", dy.sizes(), " != y ", u.sizes());
    torch::Tensor du = torch::empty_like(u), ddelta = torch::empty_like(delta), dA = torch::empty_like(A),
                  dB = torch::empty_like(Bm), dC = torch::empty_like(C), dD = torch::empty_like(D);
    scan_backward_f32(u.data_ptr<float>(), delta.data_ptr<float>(), A.data_ptr<float>(),
                      Bm.data_ptr<float>(), C.data_ptr<float>(), D.data_ptr<float>(), dy.data_ptr<float>(),
                      du.data_ptr<float>(), ddelta.data_ptr<float>(), dA.data_ptr<float>(),
                      dB.data_ptr<float>(), dC.data_ptr<float>(), dD.data_ptr<float>(), d);
    return {du, ddelta, dA, dB, dC, dD};
  }
};

// ---- causal depthwise conv1d + bias + SiLU (the mixer's conv stage), same layout and chunking as the scan.
//   pre[b,t,e] = bias[e] + sum_k w[e,k] x[b, t-K+1+k, e]   (x = 0 before t = 0);   out = pre * sigmoid(pre)
// torch's depthwise conv (padding K-1, first L outputs) computes the same thing but needs two transposes,
// and its CPU backward is several times slower than the whole fused pass.

struct ConvDims {
  int64_t batch, n_steps, d_inner, d_conv, n_blocks;
  int64_t x_batch_stride, x_step_stride;  // x may be a channel slice of a wider tensor (in_proj's x half)
};

inline VecF sigmoid(VecF v) { return 1.0f / (1.0f + vec_exp(-v)); }

/// pre-activation of (b, t, channel block); x points at x[b, 0, e0].
inline VecF conv_pre(const float* x, const VecF* w, VecF bias, int64_t t, const ConvDims& d, int cnt) {
  VecF acc = bias;
  for (int64_t k = std::max<int64_t>(0, d.d_conv - 1 - t); k < d.d_conv; ++k) {
    acc += w[k] * load(x + (t - d.d_conv + 1 + k) * d.x_step_stride, cnt);
  }
  return acc;
}

// out {batch, n_steps, d_inner}, contiguous
void conv_silu_forward_f32(const float* x, const float* w, const float* bias, float* out, const ConvDims& d) {
  const int64_t L = d.n_steps, E = d.d_inner;
  const std::vector<VecF> w_blk = block_channels(w, d.d_inner, d.d_conv, d.n_blocks);
  const int64_t n_chunks = (d.batch + kBatchChunk - 1) / kBatchChunk;
  at::parallel_for(0, n_chunks, 1, [&](int64_t chunk_begin, int64_t chunk_end) {
    for (int64_t b = chunk_begin * kBatchChunk; b < std::min(d.batch, chunk_end * kBatchChunk); ++b) {
      for (int64_t blk = 0; blk < d.n_blocks; ++blk) {
        const int64_t e0 = blk * kLanes;
        const int cnt = static_cast<int>(std::min<int64_t>(kLanes, E - e0));
        const VecF bias_v = load(bias + e0, cnt);
        const float* xb = x + b * d.x_batch_stride + e0;
        for (int64_t t = 0; t < L; ++t) {
          const VecF pre = conv_pre(xb, &w_blk[blk * d.d_conv], bias_v, t, d, cnt);
          store(out + (b * L + t) * E + e0, pre * sigmoid(pre), cnt);
        }
      }
    }
  });
}

// dx {batch, n_steps, d_inner} contiguous, dw {d_inner, 1, d_conv}, dbias {d_inner}
void conv_silu_backward_f32(const float* x, const float* w, const float* bias, const float* g_out, float* dx,
                            float* dw, float* dbias, const ConvDims& d) {
  const int64_t L = d.n_steps, E = d.d_inner, K = d.d_conv;
  const std::vector<VecF> w_blk = block_channels(w, d.d_inner, d.d_conv, d.n_blocks);
  const int64_t n_chunks = (d.batch + kBatchChunk - 1) / kBatchChunk;
  const int64_t part_size = d.n_blocks * K + d.n_blocks;  // dw {n_blocks, K}, then dbias {n_blocks}
  std::vector<VecF> partials(n_chunks * part_size, VecF{});
  at::parallel_for(0, n_chunks, 1, [&](int64_t chunk_begin, int64_t chunk_end) {
    std::vector<VecF> g_pre(L);
    for (int64_t chunk = chunk_begin; chunk < chunk_end; ++chunk) {
      VecF* dw_part = &partials[chunk * part_size];
      VecF* dbias_part = dw_part + d.n_blocks * K;
      for (int64_t b = chunk * kBatchChunk; b < std::min(d.batch, (chunk + 1) * kBatchChunk); ++b) {
        for (int64_t blk = 0; blk < d.n_blocks; ++blk) {
          const int64_t e0 = blk * kLanes;
          const int cnt = static_cast<int>(std::min<int64_t>(kLanes, E - e0));
          const VecF* wb = &w_blk[blk * K];
          const VecF bias_v = load(bias + e0, cnt);
          const float* xb = x + b * d.x_batch_stride + e0;
          // g_pre = g_out * silu'(pre), silu'(p) = s (1 + p (1 - s)), s = sigmoid(p)
          VecF dbias_acc = {};
          for (int64_t t = 0; t < L; ++t) {
            const VecF pre = conv_pre(xb, wb, bias_v, t, d, cnt);
            const VecF s = sigmoid(pre);
            g_pre[t] = load(g_out + (b * L + t) * E + e0, cnt) * (s * (1.0f + pre * (1.0f - s)));
            dbias_acc += g_pre[t];
            for (int64_t k = std::max<int64_t>(0, K - 1 - t); k < K; ++k) {
              dw_part[blk * K + k] += g_pre[t] * load(xb + (t - K + 1 + k) * d.x_step_stride, cnt);
            }
          }
          dbias_part[blk] += dbias_acc;
          // dx[s] = sum_k w[k] g_pre[s + K - 1 - k]   (terms past the end are 0)
          for (int64_t s = 0; s < L; ++s) {
            VecF acc = {};
            for (int64_t k = std::max<int64_t>(0, s + K - L); k < K; ++k) acc += wb[k] * g_pre[s + K - 1 - k];
            store(dx + (b * L + s) * E + e0, acc, cnt);
          }
        }
      }
    }
  });
  reduce_chunk_partials(partials, n_chunks, part_size, d.n_blocks, E, K, dw, dbias);
}

/// x with unit channel stride (a view such as in_proj's x half is used in place), others contiguous.
ConvDims check_conv_inputs(torch::Tensor& x, torch::Tensor& weight, torch::Tensor& bias) {
  for (const torch::Tensor* t : {&x, &weight, &bias}) {
    TORCH_CHECK(t->defined(), "causal_conv1d_silu: undefined input");
    TORCH_CHECK(t->scalar_type() == torch::kFloat32, "causal_conv1d_silu: inputs must be float32, got ",
                t->scalar_type());
    TORCH_CHECK(t->device().is_cpu(), "causal_conv1d_silu: inputs must be on the CPU");
  }
  TORCH_CHECK(x.dim() == 3, "causal_conv1d_silu: x must be [B, L, E], got ", x.sizes());
  const int64_t E = x.size(2);
  TORCH_CHECK(weight.dim() == 3 && weight.size(0) == E && weight.size(1) == 1 && weight.size(2) >= 1,
              "causal_conv1d_silu: weight must be [E, 1, K], got ", weight.sizes());
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == E, "causal_conv1d_silu: bias must be [E], got ",
              bias.sizes());
  if (x.stride(2) != 1) x = x.contiguous();
  weight = weight.contiguous();
  bias = bias.contiguous();
  return ConvDims{x.size(0), x.size(1), E, weight.size(2), (E + kLanes - 1) / kLanes,
                  x.stride(0), x.stride(1)};
}

class CausalConvSiluFunction : public torch::autograd::Function<CausalConvSiluFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x, torch::Tensor weight,
                               torch::Tensor bias) {
    const ConvDims d = check_conv_inputs(x, weight, bias);
    torch::Tensor out = torch::empty({d.batch, d.n_steps, d.d_inner}, x.options());
    conv_silu_forward_f32(x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(),
                          out.data_ptr<float>(), d);
    ctx->save_for_backward({x, weight, bias});
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    torch::Tensor x = saved[0], weight = saved[1], bias = saved[2];
    const ConvDims d = check_conv_inputs(x, weight, bias);
    const torch::Tensor g = grad_outputs[0].to(torch::kFloat32).contiguous();
    TORCH_CHECK(g.dim() == 3 && g.size(0) == d.batch && g.size(1) == d.n_steps && g.size(2) == d.d_inner,
                "causal_conv1d_silu backward: gradient shape ", g.sizes());
    torch::Tensor dx = torch::empty({d.batch, d.n_steps, d.d_inner}, x.options());
    torch::Tensor dw = torch::empty_like(weight), dbias = torch::empty_like(bias);
    conv_silu_backward_f32(x.data_ptr<float>(), weight.data_ptr<float>(), bias.data_ptr<float>(),
                           g.data_ptr<float>(), dx.data_ptr<float>(), dw.data_ptr<float>(),
                           dbias.data_ptr<float>(), d);
    return {dx, dw, dbias};
  }
};

}  // namespace

torch::Tensor selective_scan(const torch::Tensor& u, const torch::Tensor& delta, const torch::Tensor& A,
                             const torch::Tensor& Bm, const torch::Tensor& C, const torch::Tensor& D) {
  return SelectiveScanFunction::apply(u, delta, A, Bm, C, D);
}

torch::Tensor selective_scan_reference(const torch::Tensor& u, const torch::Tensor& delta,
                                       const torch::Tensor& A, const torch::Tensor& Bm,
                                       const torch::Tensor& C, const torch::Tensor& D) {
  const int64_t L = u.size(1);
  const torch::Tensor abar = torch::exp(delta.unsqueeze(-1) * A);             // {B, L, E, N}
  const torch::Tensor bu = (delta * u).unsqueeze(-1) * Bm.unsqueeze(2);       // {B, L, E, N}
  torch::Tensor h = torch::zeros({u.size(0), u.size(2), A.size(1)}, u.options());  // {B, E, N}
  std::vector<torch::Tensor> ys;
  ys.reserve(L);
  for (int64_t t = 0; t < L; ++t) {
    h = abar.select(1, t) * h + bu.select(1, t);
    ys.push_back((h * C.select(1, t).unsqueeze(1)).sum(-1) + D * u.select(1, t));  // {B, E}
  }
  return torch::stack(ys, 1);  // {B, L, E}
}

torch::Tensor causal_conv1d_silu(const torch::Tensor& x, const torch::Tensor& weight,
                                 const torch::Tensor& bias) {
  return CausalConvSiluFunction::apply(x, weight, bias);
}

torch::Tensor causal_conv1d_silu_reference(const torch::Tensor& x, const torch::Tensor& weight,
                                           const torch::Tensor& bias) {
  const int64_t n_steps = x.size(1), d_inner = x.size(2), d_conv = weight.size(2);
  const torch::Tensor pre = torch::conv1d(x.transpose(1, 2), weight, bias, /*stride=*/1,
                                          /*padding=*/d_conv - 1, /*dilation=*/1, /*groups=*/d_inner);
  return torch::silu(pre.narrow(2, 0, n_steps).transpose(1, 2));  // {B, L, E}
}

}  // namespace tclm
