// infer/kernels.cpp: the forward pass's kernels (infer/kernels.h).
#include "infer/kernels.h"

#include <algorithm>
#include <vector>

namespace tclm::infer {

using simd::kLanes;
using simd::V;

void embed_rows(const Model& m, const float* x_rows, int64_t rows, float* h, int* idx, float* val) {
  const int64_t F = m.F, Dp = m.Dp;
  constexpr int kChunk = 8;  // vectors of output columns held in registers
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = x_rows + r * F;
    int nnz = 0;
    for (int f = 0; f < F; ++f) {  // branch-free compaction
      idx[nnz] = f;
      val[nnz] = x[f];
      nnz += x[f] != 0.0f;
    }
    float* out = h + r * Dp;
    int64_t c0 = 0;
    for (; c0 + kChunk * kLanes <= Dp; c0 += kChunk * kLanes) {
      V acc[kChunk];
      for (int v = 0; v < kChunk; ++v) acc[v] = simd::load(m.embed_b.data() + c0 + v * kLanes);
      for (int j = 0; j < nnz; ++j) {
        const V a = simd::splat(val[j]);
        const float* w = m.embed_t.data() + idx[j] * Dp + c0;
#pragma GCC unroll 8
        for (int v = 0; v < kChunk; ++v) acc[v] += a * simd::load(w + v * kLanes);
      }
      for (int v = 0; v < kChunk; ++v) simd::store(out + c0 + v * kLanes, acc[v]);
    }
    for (; c0 < Dp; c0 += kLanes) {
      V acc = simd::load(m.embed_b.data() + c0);
      for (int j = 0; j < nnz; ++j) acc += simd::splat(val[j]) * simd::load(m.embed_t.data() + idx[j] * Dp + c0);
      simd::store(out + c0, acc);
    }
  }
}

void conv_silu(const Model& m, const Model::Layer& L, const ProgramRows& p, const float* const* xz_row, float* xc) {
  const int64_t Ep = m.Ep, K = m.K;
  const int32_t* row = p.pos_row;
  for (int64_t t = p.t0; t < p.t1; ++t) {
    const int64_t k0 = std::max<int64_t>(0, K - 1 - t);  // first tap that reads a position >= 0
    for (int64_t e = 0; e < Ep; e += kLanes) {
      V acc = simd::load(L.conv_b.data() + e);
      for (int64_t k = k0; k < K; ++k) {
        acc += simd::load(L.conv_w.data() + k * Ep + e) * simd::load(xz_row[row[t - K + 1 + k]] + e);
      }
      simd::store(xc + row[t] * Ep + e, simd::vsilu(acc));
    }
  }
}

namespace {

/// scan_gate with NS > 0: d_state known at compile time (the state stays in registers); NS = 0: any
/// d_state.
template <int NS>
void scan_gate_n(const Model& m, const Model::Layer& L, const ProgramRows& p, const float* start,
                 const int32_t* save_pos, int64_t n_saves, float* saves, const float* const* xz_row,
                 const float* delta, const float* dbc, float* xc) {
  const int N = NS > 0 ? NS : m.N;
  const int64_t Ep = m.Ep, R = m.R;
  constexpr int kStack = NS > 0 ? NS : 64;
  V h_stack[kStack];
  std::vector<V> h_heap;
  V* h = h_stack;
  if (NS == 0 && N > kStack) {
    h_heap.resize(static_cast<size_t>(N));
    h = h_heap.data();
  }
  const int32_t* row = p.pos_row;
  const int64_t t0 = p.t0, t1 = p.t1;
  if (t0 >= t1) return;
  const int64_t state_size = Ep * N;
  for (int64_t e = 0; e < Ep; e += kLanes) {
    const V* a = reinterpret_cast<const V*>(L.A.data() + e * N);
    const V dskip = simd::load(L.Dskip.data() + e);
    if (start != nullptr) {
      const float* saved = start + e * N;
      for (int n = 0; n < N; ++n) h[n] = simd::load(saved + n * kLanes);
    } else {
      for (int n = 0; n < N; ++n) h[n] = V{};
    }
    int64_t next = 0;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t r = row[t];
      float* xt = xc + r * Ep + e;
      const V u = simd::load(xt);
      const V dt = simd::load(delta + r * Ep + e);
      const V z = simd::load(xz_row[r] + Ep + e);
      const float* Bt = dbc + r * m.DBCp + R;
      const float* Ct = Bt + N;
      const V dtu = dt * u;
      V acc = dskip * u;
#pragma GCC unroll 16
      for (int n = 0; n < N; ++n) {
        h[n] = simd::vexp(dt * a[n]) * h[n] + dtu * Bt[n];
        acc += h[n] * Ct[n];
      }
      simd::store(xt, acc * simd::vsilu(z));
      for (; next < n_saves && save_pos[next] == t; ++next) {
        float* saved = saves + next * state_size + e * N;
        for (int n = 0; n < N; ++n) simd::store(saved + n * kLanes, h[n]);
      }
    }
  }
}

}  // namespace

void scan_gate(const Model& m, const Model::Layer& L, const ProgramRows& p, const float* start,
               const int32_t* save_pos, int64_t n_saves, float* saves, const float* const* xz_row,
               const float* delta, const float* dbc, float* xc) {
  switch (m.N) {
    case 8: scan_gate_n<8>(m, L, p, start, save_pos, n_saves, saves, xz_row, delta, dbc, xc); break;
    case 16: scan_gate_n<16>(m, L, p, start, save_pos, n_saves, saves, xz_row, delta, dbc, xc); break;
    default: scan_gate_n<0>(m, L, p, start, save_pos, n_saves, saves, xz_row, delta, dbc, xc); break;
  }
}

}  // namespace tclm::infer
