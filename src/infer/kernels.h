// infer/kernels.h: the per-row and per-program kernels of the forward pass (internal): the sparse
// embedding, LayerNorm, the causal conv + SiLU and the gated selective scan. They read the packed
// model and the buffers they are given; where rows come from (a block's own rows, rows shared with
// another program, the step-row cache) is the caller's business (forward.cpp), passed in as row
// pointers and position -> row maps. The scan takes its starting state as an argument.
#pragma once

#include <cmath>
#include <cstdint>

#include "common/simd.h"
#include "infer/model.h"
#include "tclm/model_schema.h"

namespace tclm::infer {

/// h[r] = embed.bias + sum over the nonzero features f of x[r, f] * embed.weight[:, f], for every row.
/// Step features are sparse (one-hot kinds and annotations; ~6.6 nonzeros of 55 per step in real
/// records), so gathering the nonzeros first does ~8x fewer multiply-adds than the dense product; the
/// skipped terms are exact zeros (x = 0), so the sum is the same.
/// x: [rows, F]; h: [rows, Dp]; nz_idx, nz_val: scratch of F entries.
void embed_rows(const Model& m, const float* x, int64_t rows, float* h, int* nz_idx, float* nz_val);

/// out = LayerNorm(in) over the first D columns (the padding columns of `in` are 0; out's stay 0).
inline void layer_norm_row(const float* in, const Model& m, const float* w, const float* b, float* out) {
  using simd::kLanes;
  using simd::V;
  constexpr float kEps = static_cast<float>(mamba_schema::kLayerNormEps);
  const int64_t nv = m.Dp / kLanes;
  V s{};
  for (int64_t j = 0; j < nv; ++j) s += simd::load(in + j * kLanes);
  const float mean = simd::hsum(s) / static_cast<float>(m.D);
  V q{};
  for (int64_t j = 0; j < nv; ++j) {
    const V d = (simd::load(in + j * kLanes) - mean) * simd::load(m.col_mask.data() + j * kLanes);
    q += d * d;
  }
  const float var = simd::hsum(q) / static_cast<float>(m.D);
  const float rstd = 1.0f / std::sqrt(var + kEps);
  for (int64_t j = 0; j < nv; ++j) {
    const V d = (simd::load(in + j * kLanes) - mean) * rstd;
    simd::store(out + j * kLanes, d * simd::load(w + j * kLanes) + simd::load(b + j * kLanes));
  }
}

/// One program's steps as the kernels see them: position t (0-based) is row pos_row[t] of the block
/// buffers; positions [t0, t1) are computed, earlier ones only read.
struct ProgramRows {
  const int32_t* pos_row;
  int64_t t0, t1;
};

/// xc[pos_row[t]] = SiLU(bias + sum_k w[k] * x[t - K + 1 + k]) for t in [t0, t1), x of a row r read
/// from xz_row[r] (columns [0, Ep)); x = 0 before position 0. xc: [rows, Ep].
void conv_silu(const Model& m, const Model::Layer& L, const ProgramRows& p, const float* const* xz_row, float* xc);

/// The selective scan over positions [t0, t1), gated: xc[t] <- (sum_n C_t h_t + D u_t) * SiLU(z_t), with
/// u_t = xc[t], delta_t from delta [rows, Ep], B_t and C_t from dbc [rows, DBCp], z_t from xz_row[r]
/// (columns [Ep, 2 Ep)). The state starts at `start` ([Ep / 16][N][16], the layout it is saved in) or at
/// zero if `start` is null. After position save_pos[k] (ascending; n_saves of them) the state is stored
/// at saves + k * Ep * N.
void scan_gate(const Model& m, const Model::Layer& L, const ProgramRows& p, const float* start,
               const int32_t* save_pos, int64_t n_saves, float* saves, const float* const* xz_row,
               const float* delta, const float* dbc, float* xc);

}  // namespace tclm::infer
