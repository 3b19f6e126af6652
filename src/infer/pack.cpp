// infer/pack.cpp: weights file -> packed model (infer/model.h). The tensors are looked up and checked
// by the names and shapes of tclm/model_schema.h.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>

#include "common/simd.h"
#include "infer/model.h"
#include "tclm/error.h"
#include "tclm/feature.h"
#include "tclm/model_schema.h"

namespace tclm::infer {
namespace {

namespace schema = mamba_schema;

std::string shape_str(const std::vector<int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

AlignedFloats padded_copy(const float* src, int n, int64_t padded) {
  AlignedFloats out(static_cast<size_t>(padded), 0.0f);
  std::copy(src, src + n, out.begin());
  return out;
}

// Checks every tensor of `w` against the names and shapes the config implies and returns them by name.
std::map<std::string, const NamedTensor*> check_tensors(const WeightsFile& w, const MambaConfig& cfg,
                                                        const std::string& name) {
  std::map<std::string, const NamedTensor*> by_name;
  for (const NamedTensor& t : w.tensors) {
    if (!by_name.emplace(t.name, &t).second) {
      throw Error(fmt::format("{}: tensor \"{}\" appears twice", name, t.name));
    }
  }
  std::map<std::string, const NamedTensor*> out;
  for (const auto& [tname, shape] : schema::mamba_tensors(cfg)) {
    const auto it = by_name.find(tname);
    if (it == by_name.end()) {
      throw Error(fmt::format("{}: missing tensor \"{}\" (model config {})", name, tname, cfg.to_json()));
    }
    const NamedTensor& t = *it->second;
    if (t.shape != shape) {
      throw Error(fmt::format("{}: tensor \"{}\" has shape {} but the model expects {}", name, tname,
                              shape_str(t.shape), shape_str(shape)));
    }
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    if (static_cast<int64_t>(t.data.size()) != count) {
      throw Error(fmt::format("{}: tensor \"{}\" has {} values for shape {}", name, tname, t.data.size(),
                              shape_str(shape)));
    }
    out[tname] = &t;
  }
  for (const NamedTensor& t : w.tensors) {
    if (out.count(t.name) == 0 && !is_training_state(t.name)) {
      throw Error(fmt::format("{}: unknown tensor \"{}\" for a Mamba model (config {})", name, t.name,
                              cfg.to_json()));
    }
  }
  return out;
}

}  // namespace

std::shared_ptr<const Model> pack_model(const WeightsFile& w, const std::string& name) {
  if (w.model_kind != kMambaModelKind) {
    throw Error(fmt::format("{}: model kind '{}': the inference engine (and tclm export) takes '{}' models only; score "
                            "this one with 'tclm predict/eval --backend torch'", name, w.model_kind,
                            kMambaModelKind));
  }
  check_feature_version(w, name);
  check_finite_parameters(w, name);
  MambaConfig cfg;
  try {
    cfg = MambaConfig::from_json(w.config_json);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", name, e.what()));
  }
  if (cfg.n_features != kStepFeatureDim) {
    throw Error(fmt::format("{}: model expects {} features per step, the encoding has {}", name,
                            cfg.n_features, kStepFeatureDim));
  }
  const auto t = check_tensors(w, cfg, name);
  auto data = [&](const std::string& n) { return t.at(n)->data.data(); };

  static std::atomic<uint64_t> next_model_id{1};
  auto m = std::make_shared<Model>();
  m->id = next_model_id.fetch_add(1);
  m->cfg = cfg;
  m->feature_version = w.feature_version;
  m->F = cfg.n_features;
  m->D = cfg.d_model;
  m->E = cfg.d_inner();
  m->N = cfg.d_state;
  m->R = cfg.resolved_dt_rank();
  m->K = cfg.d_conv;
  m->H = cfg.resolved_head_hidden();
  m->Dp = round_up16(m->D);
  m->Ep = round_up16(m->E);
  m->XZp = 2 * m->Ep;
  m->DBCp = round_up16(m->R + 2 * m->N);
  m->Hp = round_up16(m->H);
  const int D = m->D, E = m->E, N = m->N, R = m->R, K = m->K;
  const int64_t Ep = m->Ep;
  constexpr int kLanes = simd::kLanes;
  using schema::join;

  m->embed_t.assign(static_cast<size_t>(m->F * m->Dp), 0.0f);
  const float* ew = data(join(schema::kEmbed, schema::kWeight));  // [D, F]
  for (int d = 0; d < D; ++d) {
    for (int f = 0; f < m->F; ++f) m->embed_t[f * m->Dp + d] = ew[d * m->F + f];
  }
  m->embed_b = padded_copy(data(join(schema::kEmbed, schema::kBias)), D, m->Dp);
  for (int i = 0; i < cfg.n_layers; ++i) {
    const std::string n = schema::norm_module(i), p = schema::mixer_module(i);
    auto mixer = [&](const char* module, const char* param) { return data(join(p, join(module, param))); };
    Model::Layer L;
    L.ln_w = padded_copy(data(join(n, schema::kWeight)), D, m->Dp);
    L.ln_b = padded_copy(data(join(n, schema::kBias)), D, m->Dp);
    // in_proj rows 0..E-1 produce x, rows E..2E-1 produce z; z goes to column Ep + (row - E).
    std::vector<int> cols(2 * E);
    for (int r = 0; r < 2 * E; ++r) cols[r] = r < E ? r : static_cast<int>(Ep) + (r - E);
    L.in_proj.pack(mixer(schema::kInProj, schema::kWeight), 2 * E, D, nullptr, &cols, static_cast<int>(Ep) + E);
    L.conv_w.assign(static_cast<size_t>(K * Ep), 0.0f);
    const float* cw = mixer(schema::kConv1d, schema::kWeight);  // [E, 1, K]
    for (int e = 0; e < E; ++e) {
      for (int k = 0; k < K; ++k) L.conv_w[k * Ep + e] = cw[e * K + k];
    }
    L.conv_b = padded_copy(mixer(schema::kConv1d, schema::kBias), E, Ep);
    L.x_proj.pack(mixer(schema::kXProj, schema::kWeight), R + 2 * N, E, nullptr);
    L.dt_proj.pack(mixer(schema::kDtProj, schema::kWeight), E, R, mixer(schema::kDtProj, schema::kBias));
    L.out_proj.pack(mixer(schema::kOutProj, schema::kWeight), D, E, nullptr);
    L.A.assign(static_cast<size_t>(Ep * N), 0.0f);
    const float* a_log = data(join(p, schema::kALog));  // [E, N]
    for (int e = 0; e < E; ++e) {
      for (int s = 0; s < N; ++s) {
        L.A[(static_cast<int64_t>(e / kLanes) * N + s) * kLanes + e % kLanes] = -std::exp(a_log[e * N + s]);
      }
    }
    L.Dskip = padded_copy(data(join(p, schema::kDSkip)), E, Ep);
    m->layers.push_back(std::move(L));
  }
  m->lnf_w = padded_copy(data(join(schema::kNormF, schema::kWeight)), D, m->Dp);
  m->lnf_b = padded_copy(data(join(schema::kNormF, schema::kBias)), D, m->Dp);
  m->col_mask.assign(static_cast<size_t>(m->Dp), 0.0f);
  std::fill(m->col_mask.begin(), m->col_mask.begin() + D, 1.0f);
  m->head1.pack(data(join(schema::kHead1, schema::kWeight)), m->H, D, data(join(schema::kHead1, schema::kBias)));
  m->head2_w = padded_copy(data(join(schema::kHead2, schema::kWeight)), m->H, m->Hp);
  m->head2_b = data(join(schema::kHead2, schema::kBias))[0];
  return m;
}

}  // namespace tclm::infer
