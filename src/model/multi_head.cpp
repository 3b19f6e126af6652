// model/multi_head.cpp: see multi_head.h.
#include "model/multi_head.h"

#include <fmt/format.h>
#include <simdjson.h>

#include "tclm/error.h"
#include "tclm/model_schema.h"

namespace tclm {

MultiHeadMambaImpl::MultiHeadMambaImpl(const MambaConfig& cfg, int n_platforms) : n_platforms_(n_platforms) {
  if (n_platforms < 1 || n_platforms > 4096) throw Error(fmt::format("MultiHeadMamba: {} platforms", n_platforms));
  trunk_ = register_module("trunk", MambaCostModel(cfg));
  heads_ = register_module("heads", torch::nn::ModuleList());
  const int64_t d = cfg.d_model, h = cfg.resolved_head_hidden();
  for (int i = 1; i < n_platforms; ++i) {
    heads_->push_back(torch::nn::Sequential(torch::nn::Linear(d, h), torch::nn::ReLU(), torch::nn::Linear(h, 1)));
  }
}

void MultiHeadMambaImpl::init_weights() {
  trunk_->init_weights();
  torch::NoGradGuard ng;
  for (const auto& m : heads_->modules(false)) {
    if (auto* l = dynamic_cast<torch::nn::LinearImpl*>(m.get())) l->bias.zero_();
  }
}

void MultiHeadMambaImpl::set_platform(int platform) {
  if (platform < 0 || platform >= n_platforms_) {
    throw Error(fmt::format("MultiHeadMamba: platform {} out of range (model has {} heads)", platform, n_platforms_));
  }
  platform_ = platform;
}

torch::Tensor MultiHeadMambaImpl::embed(const torch::Tensor& x, const torch::Tensor& mask) { return trunk_->embed(x, mask); }

torch::Tensor MultiHeadMambaImpl::forward(const torch::Tensor& x, const torch::Tensor& mask) {
  const auto p = trunk_->embed(x, mask);
  if (platform_ == 0) return trunk_->head(p);
  return heads_[platform_ - 1]->as<torch::nn::Sequential>()->forward(p).squeeze(-1);
}

std::string MultiHeadMambaImpl::config_json() const {
  return fmt::format("{{\"mamba\": {}, \"platforms\": {}}}", trunk_->config().to_json(), n_platforms_);
}

std::pair<MambaConfig, int> MultiHeadMambaImpl::parse_config(const std::string& json) {
  simdjson::dom::parser parser;
  simdjson::dom::element root, mamba;
  int64_t n = 0;
  if (parser.parse(json).get(root) || root["mamba"].get(mamba) || root["platforms"].get_int64().get(n)) {
    throw Error("mamba-mtl config JSON: expected {\"mamba\": {...}, \"platforms\": N}");
  }
  return {MambaConfig::from_json(simdjson::minify(mamba)), static_cast<int>(n)};
}

bool MultiHeadMambaImpl::is_no_decay(const std::string& name) const {
  // The trunk's rule (A_log, D, norms and biases) under its "trunk." prefix, and the heads' biases.
  using mamba_schema::join;  // join("", p) = ".p"
  auto ends_with = [&](const std::string& s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  auto contains = [&](const std::string& s) { return name.find(s) != std::string::npos; };
  return ends_with(join("", mamba_schema::kBias)) || contains(join("", mamba_schema::kALog)) ||
         ends_with(join("", mamba_schema::kDSkip)) || contains(join("", join(mamba_schema::kNorms, ""))) ||
         contains(join("", join(mamba_schema::kNormF, "")));
}

}  // namespace tclm
