// infer/forward.cpp: the forward pass of one block (infer/block.h): layer 0 through the step-row
// cache, the layers' GEMMs and per-program kernels over the block's rows, pooling and the head.
#include <algorithm>

#include "common/simd.h"
#include "infer/block.h"
#include "infer/kernels.h"

namespace tclm::infer {

using simd::kLanes;
using simd::V;

void forward_block(const Model& m, Block& b, float* scores) {
  const int64_t M = b.rows, P = b.programs();
  if (P == 0) return;
  b.plan_states(m);
  // Program j's own positions [lcp, length); the rows of its shared prefix are only read.
  auto program = [&](int64_t j) { return ProgramRows{b.positions(j), b.lcp[j], b.length(j)}; };
  if (M > 0) {
    // Layer 0's rows come from the step-row cache when it can hold this block (first_layer = 1).
    const bool cached = !m.layers.empty() && b.cache.reserve(M);
    if (b.counters) {
      b.counters->positions += static_cast<int64_t>(b.pos_row.size());
      b.counters->rows += M;
      if (!cached) b.counters->layer0_rows += M;
    }
    if (cached) {
      StepRowCache& c = b.cache;
      const int64_t first_new = c.used;
      for (int64_t r = 0; r < M; ++r) b.entry[r] = c.find_or_insert(b.x.data() + r * m.F);
      const int64_t n_new = c.used - first_new;
      if (b.counters) b.counters->layer0_rows += n_new;
      const Model::Layer& L = m.layers[0];
      embed_rows(m, c.keys.data() + first_new * m.F, n_new, c.h0.data() + first_new * m.Dp, b.nz_idx.data(),
                 b.nz_val.data());
      for (int64_t j = 0; j < n_new; ++j) {
        layer_norm_row(c.h0.data() + (first_new + j) * m.Dp, m, L.ln_w.data(), L.ln_b.data(), b.u.data() + j * m.Dp);
      }
      gemm(b.u.data(), m.Dp, n_new, L.in_proj, c.xz.data() + first_new * m.XZp, m.XZp, Epilogue::kStore);
      for (int64_t r = 0; r < M; ++r) {
        const float* h0 = c.h0.data() + static_cast<int64_t>(b.entry[r]) * m.Dp;
        std::copy(h0, h0 + m.Dp, b.h.data() + r * m.Dp);
        b.xz_row[r] = c.xz.data() + static_cast<int64_t>(b.entry[r]) * m.XZp;
      }
    } else {
      embed_rows(m, b.x.data(), M, b.h.data(), b.nz_idx.data(), b.nz_val.data());
    }
    const int64_t state_size = m.Ep * m.N;
    for (size_t li = 0; li < m.layers.size(); ++li) {
      const Model::Layer& L = m.layers[li];
      if (li > 0 || !cached) {
        for (int64_t r = 0; r < M; ++r) {
          layer_norm_row(b.h.data() + r * m.Dp, m, L.ln_w.data(), L.ln_b.data(), b.u.data() + r * m.Dp);
        }
        gemm(b.u.data(), m.Dp, M, L.in_proj, b.xz.data(), m.XZp, Epilogue::kStore);
        for (int64_t r = 0; r < M; ++r) b.xz_row[r] = b.xz.data() + r * m.XZp;
      }
      for (int64_t j = 0; j < P; ++j) conv_silu(m, L, program(j), b.xz_row.data(), b.xc.data());
      gemm(b.xc.data(), m.Ep, M, L.x_proj, b.dbc.data(), m.DBCp, Epilogue::kStore);
      gemm(b.dbc.data(), m.DBCp, M, L.dt_proj, b.delta.data(), m.Ep, Epilogue::kBiasSoftplus);
      for (int64_t j = 0; j < P; ++j) {
        const ProgramRows p = program(j);
        if (p.t0 >= p.t1) continue;  // the whole program is a prefix of its predecessor
        // After a shared prefix the scan continues from the state the prefix's owner saved.
        const float* start = p.t0 > 0 ? b.states.data() + b.state_slot[j] * state_size : nullptr;
        const int64_t k0 = b.req_begin[j], k1 = b.req_begin[j + 1];
        scan_gate(m, L, p, start, b.request_pos.data() + k0, k1 - k0, b.states.data() + k0 * state_size,
                  b.xz_row.data(), b.delta.data(), b.dbc.data(), b.xc.data());
      }
      gemm(b.xc.data(), m.Ep, M, L.out_proj, b.h.data(), m.Dp, Epilogue::kAccumulate);
    }
  }
  // Final LayerNorm of every row (into u, free again), then each program's masked mean over its positions.
  for (int64_t r = 0; r < M; ++r) {
    layer_norm_row(b.h.data() + r * m.Dp, m, m.lnf_w.data(), m.lnf_b.data(), b.u.data() + r * m.Dp);
  }
  const int64_t nv = m.Dp / kLanes;
  for (int64_t p = 0; p < P; ++p) {
    float* pooled = b.pooled.data() + p * m.Dp;
    std::fill(pooled, pooled + m.Dp, 0.0f);
    int64_t n_real = 0;
    const int32_t* row = b.positions(p);
    for (int32_t t = 0; t < b.length(p); ++t) {
      const int64_t r = row[t];
      if (!b.real[r]) continue;
      ++n_real;
      const float* ln = b.u.data() + r * m.Dp;
      for (int64_t j = 0; j < nv; ++j) {
        simd::store(pooled + j * kLanes, simd::load(pooled + j * kLanes) + simd::load(ln + j * kLanes));
      }
    }
    const float inv = 1.0f / static_cast<float>(std::max<int64_t>(n_real, 1));
    for (int64_t j = 0; j < nv; ++j) simd::store(pooled + j * kLanes, simd::load(pooled + j * kLanes) * inv);
  }
  gemm(b.pooled.data(), m.Dp, P, m.head1, b.hid.data(), m.Hp, Epilogue::kBiasRelu);
  for (int64_t p = 0; p < P; ++p) {
    V s{};
    const float* hid = b.hid.data() + p * m.Hp;
    for (int64_t j = 0; j < m.Hp; j += kLanes) s += simd::load(hid + j) * simd::load(m.head2_w.data() + j);
    scores[b.index[p]] = simd::hsum(s) + m.head2_b;
  }
}

}  // namespace tclm::infer
