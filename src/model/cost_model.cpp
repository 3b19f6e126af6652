// model/cost_model.cpp: the generic parts of every libtorch cost model: parameter groups, the factory,
// and the weights-file export/import (names = torch parameter names).
#include "model/cost_model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

#include "common/enum_names.h"
#include "model/baselines.h"
#include "model/mamba.h"
#include "model/multi_head.h"
#include "tclm/error.h"
#include "tclm/feature.h"

namespace tclm {
namespace {

std::string shape_str(torch::IntArrayRef shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

void check_cost_model_inputs(const torch::Tensor& x, const torch::Tensor& mask, int64_t n_features,
                             const char* who) {
  if (x.dim() != 3 || x.size(2) != n_features) {
    throw Error(fmt::format("{}: features must be [batch, n_steps, {}], got {}", who, n_features,
                            shape_str(x.sizes())));
  }
  if (mask.dim() != 2 || mask.size(0) != x.size(0) || mask.size(1) != x.size(1)) {
    throw Error(fmt::format("{}: mask must be [{}, {}], got {}", who, x.size(0), x.size(1),
                            shape_str(mask.sizes())));
  }
}

bool CostModelImpl::is_no_decay(const std::string& name) const {
  return ends_with(name, ".bias") || name.rfind("norm", 0) == 0;
}

std::vector<torch::Tensor> CostModelImpl::no_decay_parameters() {
  std::vector<torch::Tensor> out;
  for (const auto& p : named_parameters(/*recurse=*/true)) {
    if (is_no_decay(p.key())) out.push_back(p.value());
  }
  return out;
}

std::vector<torch::Tensor> CostModelImpl::decay_parameters() {
  std::vector<torch::Tensor> out;
  for (const auto& p : named_parameters(/*recurse=*/true)) {
    if (!is_no_decay(p.key())) out.push_back(p.value());
  }
  return out;
}

int64_t CostModelImpl::num_parameters() {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

const std::vector<std::string>& model_kind_names() {
  static const std::vector<std::string> names = {kMambaModelKind, "attention", "lstm", "mlp", kMultiHeadModelKind};
  return names;
}

ModelKind parse_model_kind(const std::string& name, const std::string& what) {
  return enum_from_name<ModelKind>(model_kind_names(), name, "cost model kind", what);
}

const std::string& to_string(ModelKind kind) { return enum_name(model_kind_names(), kind); }

const std::vector<std::string>& cost_model_kinds() {
  static const std::vector<std::string> kinds = {"mamba", "attention", "lstm", "mlp"};
  return kinds;
}

CostModel make_cost_model(const std::string& kind, const std::string& config_json, int n_features) {
  CostModel model;
  if (kind == kMambaModelKind) {
    MambaConfig cfg = MambaConfig::from_json(config_json);
    if (n_features > 0) cfg.n_features = n_features;
    model = std::make_shared<MambaCostModelImpl>(cfg);
  } else if (kind == "attention" || kind == "lstm" || kind == "mlp") {
    BaselineConfig cfg = BaselineConfig::from_json(config_json).resolved(kind);
    if (n_features > 0) cfg.n_features = n_features;
    if (kind == "attention") model = std::make_shared<AttentionCostModelImpl>(cfg);
    if (kind == "lstm") model = std::make_shared<LstmCostModelImpl>(cfg);
    if (kind == "mlp") model = std::make_shared<MlpCostModelImpl>(cfg);
  } else if (kind == kMultiHeadModelKind) {
    auto [cfg, n] = MultiHeadMambaImpl::parse_config(config_json);
    if (n_features > 0) cfg.n_features = n_features;
    model = std::make_shared<MultiHeadMambaImpl>(cfg, n);
  } else {
    throw Error(fmt::format("unknown cost model kind '{}' (known: {})", kind, fmt::join(cost_model_kinds(), ", ")));
  }
  model->init_weights();
  return model;
}

void export_to_weights(CostModelImpl& model, WeightsFile* out) {
  out->model_kind = model.kind();
  out->config_json = model.config_json();
  out->tensors.clear();
  for (const auto& p : model.named_parameters(/*recurse=*/true)) {
    const torch::Tensor t = p.value().detach().to(torch::kCPU, torch::kFloat32).contiguous();
    const float* data = t.data_ptr<float>();
    out->tensors.push_back(NamedTensor{p.key(), t.sizes().vec(), std::vector<float>(data, data + t.numel())});
  }
}

void load_into_model(const WeightsFile& weights, CostModelImpl& model) {
  if (weights.model_kind != model.kind()) {
    throw Error(fmt::format("weights: model kind is \"{}\", expected \"{}\"", weights.model_kind, model.kind()));
  }
  std::map<std::string, const NamedTensor*> by_name;
  for (const NamedTensor& t : weights.tensors) {
    if (!by_name.emplace(t.name, &t).second) {
      throw Error(fmt::format("weights: tensor \"{}\" appears twice", t.name));
    }
  }
  // Check everything before copying anything, so a failed load leaves the model untouched.
  const auto params = model.named_parameters(/*recurse=*/true);
  for (const auto& p : params) {
    const auto it = by_name.find(p.key());
    if (it == by_name.end()) {
      throw Error(fmt::format("weights: missing tensor \"{}\" (model config {})", p.key(), model.config_json()));
    }
    const NamedTensor& t = *it->second;
    if (torch::IntArrayRef(t.shape) != p.value().sizes()) {
      throw Error(fmt::format("weights: tensor \"{}\" has shape {} but the model expects {}", p.key(),
                              shape_str(t.shape), shape_str(p.value().sizes())));
    }
    if (static_cast<int64_t>(t.data.size()) != p.value().numel()) {
      throw Error(fmt::format("weights: tensor \"{}\" has {} values for shape {}", p.key(), t.data.size(),
                              shape_str(t.shape)));
    }
  }
  for (const NamedTensor& t : weights.tensors) {
    if (params.find(t.name) == nullptr && !is_training_state(t.name)) {
      throw Error(fmt::format("weights: unknown tensor \"{}\" for a {} model (config {})", t.name, model.kind(),
                              model.config_json()));
    }
  }
  torch::NoGradGuard no_grad;
  for (const auto& p : params) {
    const NamedTensor& t = *by_name.at(p.key());
    const torch::Tensor src = torch::from_blob(const_cast<float*>(t.data.data()), t.shape, torch::kFloat32);
    p.value().copy_(src);
  }
}

CostModel load_cost_model(const WeightsFile& w, const std::string& name) {
  check_feature_version(w, name);
  check_finite_parameters(w, name);
  CostModel model;
  try {
    model = make_cost_model(w.model_kind, w.config_json);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", name, e.what()));
  }
  if (model->n_features() != kStepFeatureDim) {
    throw Error(fmt::format("{}: model expects {} features per step, the encoding has {}", name,
                            model->n_features(), kStepFeatureDim));
  }
  load_into_model(w, *model);
  model->eval();
  return model;
}

}  // namespace tclm
