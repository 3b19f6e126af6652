// infer/model.h: the packed model of the inference engine (internal; CostModelEngine::Model).
//
// Built once from a weights file (pack.cpp) and read-only afterwards (shared by copies of the engine
// and by every worker thread). Vectors are padded to multiples of 16 floats (one simd::V) with zeros,
// so that every row of the block buffers starts a whole vector and padding columns meet zero weights.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "infer/gemm.h"
#include "tclm/infer.h"
#include "tclm/model_config.h"
#include "tclm/weights.h"

namespace tclm {

struct CostModelEngine::Model {
  uint64_t id = 0;  // unique per built model (step-row caches are valid for one model only)
  MambaConfig cfg;
  uint32_t feature_version = kFeatureVersion;  // the encoding family the model reads
  int F = 0, D = 0, E = 0, N = 0, R = 0, K = 0, H = 0;
  int64_t Dp = 0, Ep = 0, XZp = 0, DBCp = 0, Hp = 0;

  struct Layer {
    infer::AlignedFloats ln_w, ln_b;   // [Dp]
    infer::PackedLinear in_proj;       // D -> 2 Ep (x | z)
    infer::AlignedFloats conv_w;       // [K][Ep], tap-major: conv_w[k * Ep + e] = conv1d.weight[e, 0, k]
    infer::AlignedFloats conv_b;       // [Ep]
    infer::PackedLinear x_proj;        // E -> R + 2N
    infer::PackedLinear dt_proj;       // R -> E, with bias
    infer::AlignedFloats A;            // [Ep / 16][N][16]: -exp(A_log[e, n]) for e = blk * 16 + lane (0 past E)
    infer::AlignedFloats Dskip;        // [Ep]
    infer::PackedLinear out_proj;      // E -> D
  };
  infer::AlignedFloats embed_t;        // [F][Dp]: embed.weight transposed (row k = the weights of feature k)
  infer::AlignedFloats embed_b;        // [Dp]
  std::vector<Layer> layers;
  infer::AlignedFloats lnf_w, lnf_b;   // [Dp]
  infer::AlignedFloats col_mask;       // [Dp]: 1 for the D real columns, 0 for padding
  infer::PackedLinear head1;           // D -> H, with bias
  infer::AlignedFloats head2_w;        // [Hp]
  float head2_b = 0.0f;
};

namespace infer {

using Model = CostModelEngine::Model;

/// Checks `w` (model kind, feature version, finite parameters, config, and every tensor against the
/// names and shapes of tclm/model_schema.h) and packs it. Throws tclm::Error starting with `name`.
std::shared_ptr<const Model> pack_model(const WeightsFile& w, const std::string& name);

}  // namespace infer
}  // namespace tclm
