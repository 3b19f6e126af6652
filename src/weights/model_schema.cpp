// weights/model_schema.cpp: the tensors of a Mamba cost model (tclm/model_schema.h).
#include "tclm/model_schema.h"

namespace tclm::mamba_schema {

std::string join(std::string_view a, std::string_view b) {
  std::string s;
  s.reserve(a.size() + 1 + b.size());
  s.append(a).append(".").append(b);
  return s;
}

std::string norm_module(int layer) { return join(kNorms, std::to_string(layer)); }

std::string mixer_module(int layer) { return join(kMixers, std::to_string(layer)); }

std::vector<TensorSpec> mamba_tensors(const MambaConfig& cfg) {
  const int64_t F = cfg.n_features, D = cfg.d_model, E = cfg.d_inner(), N = cfg.d_state, R = cfg.resolved_dt_rank(),
                K = cfg.d_conv, H = cfg.resolved_head_hidden();
  std::vector<TensorSpec> out;
  auto add = [&](std::string name, std::vector<int64_t> shape) { out.push_back({std::move(name), std::move(shape)}); };
  add(join(kEmbed, kWeight), {D, F});
  add(join(kEmbed, kBias), {D});
  for (int i = 0; i < cfg.n_layers; ++i) {
    const std::string n = norm_module(i);
    add(join(n, kWeight), {D});
    add(join(n, kBias), {D});
  }
  for (int i = 0; i < cfg.n_layers; ++i) {
    const std::string m = mixer_module(i);
    add(join(m, kALog), {E, N});
    add(join(m, kDSkip), {E});
    add(join(m, join(kInProj, kWeight)), {2 * E, D});
    add(join(m, join(kConv1d, kWeight)), {E, 1, K});
    add(join(m, join(kConv1d, kBias)), {E});
    add(join(m, join(kXProj, kWeight)), {R + 2 * N, E});
    add(join(m, join(kDtProj, kWeight)), {E, R});
    add(join(m, join(kDtProj, kBias)), {E});
    add(join(m, join(kOutProj, kWeight)), {D, E});
  }
  add(join(kNormF, kWeight), {D});
  add(join(kNormF, kBias), {D});
  add(join(kHead1, kWeight), {H, D});
  add(join(kHead1, kBias), {H});
  add(join(kHead2, kWeight), {1, H});
  add(join(kHead2, kBias), {1});
  return out;
}

}  // namespace tclm::mamba_schema
