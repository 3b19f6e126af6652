// tclm/model_schema.h: the tensors of a Mamba cost model (names, shapes) and its fixed constants,
// without libtorch.
//
// The one definition of what a "mamba" weights file holds: the libtorch model (src/model/mamba.cpp)
// registers its modules and parameters under these names, and the inference engine (tclm/infer.h)
// looks its tensors up and checks their shapes with them. A parameter's name is its module path and
// its own name joined by dots, as torch names them:
//   embed.{weight [D, F], bias [D]}
//   norms.<i>.{weight [D], bias [D]}                            per layer i
//   mixers.<i>.A_log [E, N], mixers.<i>.D [E]
//   mixers.<i>.in_proj.weight [2E, D]
//   mixers.<i>.conv1d.{weight [E, 1, K], bias [E]}
//   mixers.<i>.x_proj.weight [R + 2N, E]
//   mixers.<i>.dt_proj.{weight [E, R], bias [E]}
//   mixers.<i>.out_proj.weight [D, E]
//   norm_f.{weight [D], bias [D]}
//   head1.{weight [H, D], bias [H]}, head2.{weight [1, H], bias [1]}
// with F = n_features, D = d_model, E = d_inner(), N = d_state, R = resolved_dt_rank(), K = d_conv,
// H = resolved_head_hidden() (tclm/model_config.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tclm/model_config.h"

namespace tclm::mamba_schema {

/// Epsilon of every LayerNorm of the model (upstream Mamba's norm epsilon).
inline constexpr double kLayerNormEps = 1e-5;

// Module names of the cost model (torch register_module names).
inline constexpr char kEmbed[] = "embed";    // Linear F -> D
inline constexpr char kNorms[] = "norms";    // list of the per-layer LayerNorms
inline constexpr char kMixers[] = "mixers";  // list of the per-layer Mamba mixers
inline constexpr char kNormF[] = "norm_f";   // the final LayerNorm
inline constexpr char kHead1[] = "head1";    // Linear D -> H
inline constexpr char kHead2[] = "head2";    // Linear H -> 1

// Module and parameter names inside one mixer.
inline constexpr char kInProj[] = "in_proj";    // Linear D -> 2E, no bias (x | z)
inline constexpr char kConv1d[] = "conv1d";     // depthwise Conv1d E -> E, kernel K, with bias
inline constexpr char kXProj[] = "x_proj";      // Linear E -> R + 2N, no bias (dt_raw | B | C)
inline constexpr char kDtProj[] = "dt_proj";    // Linear R -> E, with bias
inline constexpr char kOutProj[] = "out_proj";  // Linear E -> D, no bias
inline constexpr char kALog[] = "A_log";        // parameter [E, N]: A = -exp(A_log)
inline constexpr char kDSkip[] = "D";           // parameter [E]: the skip term D u

// Parameter names of Linear, Conv1d and LayerNorm modules.
inline constexpr char kWeight[] = "weight";
inline constexpr char kBias[] = "bias";

/// "a.b": a parameter or submodule name under module `a`.
std::string join(std::string_view a, std::string_view b);
/// "norms.<layer>": the LayerNorm before mixer `layer`.
std::string norm_module(int layer);
/// "mixers.<layer>".
std::string mixer_module(int layer);

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
};

/// Every tensor of a Mamba cost model with config `cfg`, in the order the libtorch model lists its
/// parameters (named_parameters(), which is also the order of an exported weights file): embed, all
/// norms, all mixers (A_log, D, in_proj, conv1d, x_proj, dt_proj, out_proj), norm_f, head1, head2.
std::vector<TensorSpec> mamba_tensors(const MambaConfig& cfg);

}  // namespace tclm::mamba_schema
