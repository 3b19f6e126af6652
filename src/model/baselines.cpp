// model/baselines.cpp: the attention (TLP-style), LSTM and MLP baseline cost models and their config.
#include "model/baselines.h"

#include <fmt/format.h>

#include <limits>

#include "tclm/error.h"
#include "tclm/feature.h"
#include "weights/flat_config.h"

namespace tclm {
namespace {

constexpr int kMaxDim = 1 << 16;

/// Sum over the real steps of per-step values v [B, L] -> [B].
torch::Tensor masked_sum(const torch::Tensor& v, const torch::Tensor& real) {
  return v.masked_fill(real.logical_not(), 0.0).sum(1);
}

/// Mean over the real steps of h [B, L, d] -> [B, d] (zero for a row without real steps).
torch::Tensor masked_mean(const torch::Tensor& h, const torch::Tensor& real) {
  const auto n = real.sum(1, /*keepdim=*/true).to(h.scalar_type()).clamp_min(1);
  return h.masked_fill(real.logical_not().unsqueeze(-1), 0.0).sum(1) / n;
}

}  // namespace

// ---- config

BaselineConfig BaselineConfig::resolved(const std::string& kind) const {
  BaselineConfig c = *this;
  if (c.d_model == 0) c.d_model = kind == "lstm" ? 128 : 256;
  if (c.n_layers == 0) c.n_layers = kind == "lstm" ? 1 : 2;
  return c;
}

void BaselineConfig::validate(const std::string& where) const {
  auto check = [&](const char* name, int value, int lo) {
    if (value < lo || value > kMaxDim) {
      throw Error(fmt::format("{}: {} = {} is out of range [{}, {}]", where, name, value, lo, kMaxDim));
    }
  };
  check("n_features", n_features, 1);
  check("d_model", d_model, 1);
  check("n_layers", n_layers, 1);
  check("n_heads", n_heads, 1);
  if (!(dropout >= 0.0f && dropout < 1.0f)) {
    throw Error(fmt::format("{}: dropout = {} must be in [0, 1)", where, dropout));
  }
}

std::string BaselineConfig::to_json() const {
  return fmt::format("{{\"n_features\":{},\"d_model\":{},\"n_layers\":{},\"n_heads\":{},\"dropout\":{}}}", n_features,
                     d_model, n_layers, n_heads, dropout);
}

BaselineConfig BaselineConfig::from_json(const std::string& json) {
  BaselineConfig cfg;
  parse_flat_config(json, "baseline config JSON",
                    {{"n_features", &cfg.n_features}, {"d_model", &cfg.d_model}, {"n_layers", &cfg.n_layers},
                     {"n_heads", &cfg.n_heads}},
                    &cfg.dropout, 0);
  return cfg;
}

// ---- attention (TLP-style)

AttentionCostModelImpl::AttentionCostModelImpl(const BaselineConfig& cfg) : cfg_(cfg.resolved("attention")) {
  cfg_.validate("AttentionCostModel");
  const int64_t d = cfg_.d_model;
  if (d % cfg_.n_heads != 0) {
    throw Error(fmt::format("attention model: --hidden {} is not a multiple of --heads {}; choose e.g. --hidden {}", d,
                            cfg_.n_heads, (d / cfg_.n_heads + 1) * cfg_.n_heads));
  }
  enc1_ = register_module("enc1", torch::nn::Linear(cfg_.n_features, d));
  enc2_ = register_module("enc2", torch::nn::Linear(d, d));
  attention_ = register_module("attention",
                               torch::nn::MultiheadAttention(torch::nn::MultiheadAttentionOptions(d, cfg_.n_heads)));
  blocks_ = register_module("blocks", torch::nn::ModuleList());
  for (int i = 0; i < cfg_.n_layers; ++i) blocks_->push_back(torch::nn::Linear(d, d));
  dec1_ = register_module("dec1", torch::nn::Linear(d, d));
  dec2_ = register_module("dec2", torch::nn::Linear(d, 1));
  dropout_ = register_module("dropout", torch::nn::Dropout(cfg_.dropout));
}

torch::Tensor AttentionCostModelImpl::steps(const torch::Tensor& x, const torch::Tensor& mask) {
  check_cost_model_inputs(x, mask, cfg_.n_features, "AttentionCostModel");
  const torch::Tensor real = mask > 0;  // {B, L}
  torch::Tensor h = torch::relu(enc2_(torch::relu(enc1_(x.masked_fill(real.logical_not().unsqueeze(-1), 0.0)))));
  // Keys at padding are masked. A row without any real step would mask every key (NaN softmax): its
  // first key is left visible; such a row's steps are all masked out below anyway.
  torch::Tensor key_padding = real.logical_not();
  if (key_padding.size(1) > 0) {
    const torch::Tensor empty = real.any(1).logical_not();  // {B}
    key_padding.select(1, 0).masked_fill_(empty, false);
  }
  const torch::Tensor hl = h.transpose(0, 1);  // {L, B, d}: MultiheadAttention's layout
  const torch::Tensor a = std::get<0>(attention_(hl, hl, hl, key_padding, /*need_weights=*/false));
  h = h + a.transpose(0, 1);
  for (const auto& block : *blocks_) h = h + torch::relu(block->as<torch::nn::Linear>()->forward(h));
  return h;  // {B, L, d}
}

torch::Tensor AttentionCostModelImpl::embed(const torch::Tensor& x, const torch::Tensor& mask) {
  return masked_mean(steps(x, mask), mask > 0);
}

torch::Tensor AttentionCostModelImpl::forward(const torch::Tensor& x, const torch::Tensor& mask) {
  const torch::Tensor h = dropout_(steps(x, mask));
  const torch::Tensor per_step = dec2_(torch::relu(dec1_(h))).squeeze(-1);  // {B, L}
  return masked_sum(per_step, mask > 0);
}

// ---- LSTM

LstmCostModelImpl::LstmCostModelImpl(const BaselineConfig& cfg) : cfg_(cfg.resolved("lstm")) {
  cfg_.validate("LstmCostModel");
  const int64_t d = cfg_.d_model;
  in_ = register_module("in", torch::nn::Linear(cfg_.n_features, d));
  lstm_ = register_module("lstm", torch::nn::LSTM(torch::nn::LSTMOptions(d, d).num_layers(cfg_.n_layers).batch_first(true)));
  head1_ = register_module("head1", torch::nn::Linear(d, d));
  head2_ = register_module("head2", torch::nn::Linear(d, 1));
  dropout_ = register_module("dropout", torch::nn::Dropout(cfg_.dropout));
}

torch::Tensor LstmCostModelImpl::embed(const torch::Tensor& x, const torch::Tensor& mask) {
  check_cost_model_inputs(x, mask, cfg_.n_features, "LstmCostModel");
  const torch::Tensor real = mask > 0;
  const torch::Tensor h = torch::relu(in_(x.masked_fill(real.logical_not().unsqueeze(-1), 0.0)));
  const torch::Tensor out = std::get<0>(lstm_(h));  // {B, L, d}; causal, so padding after a step cannot reach it
  // The output at the last real step (step 0 for a row without real steps).
  const torch::Tensor last = (real.sum(1) - 1).clamp_min(0).to(torch::kInt64);  // {B}
  return out.gather(1, last.view({-1, 1, 1}).expand({out.size(0), 1, out.size(2)})).squeeze(1);
}

torch::Tensor LstmCostModelImpl::forward(const torch::Tensor& x, const torch::Tensor& mask) {
  return head2_(torch::relu(head1_(dropout_(embed(x, mask))))).squeeze(-1);
}

// ---- MLP over pooled step features

MlpCostModelImpl::MlpCostModelImpl(const BaselineConfig& cfg) : cfg_(cfg.resolved("mlp")) {
  cfg_.validate("MlpCostModel");
  const int64_t d = cfg_.d_model;
  body_ = register_module("body", torch::nn::Sequential());
  body_->push_back(torch::nn::Linear(2 * cfg_.n_features + 1, d));
  body_->push_back(torch::nn::ReLU());
  for (int i = 0; i < cfg_.n_layers; ++i) {
    body_->push_back(torch::nn::Linear(d, d));
    body_->push_back(torch::nn::ReLU());
  }
  out_ = register_module("out", torch::nn::Linear(d, 1));
  dropout_ = register_module("dropout", torch::nn::Dropout(cfg_.dropout));
}

torch::Tensor MlpCostModelImpl::pool(const torch::Tensor& x, const torch::Tensor& mask) {
  const torch::Tensor real = mask > 0;                // {B, L}
  const torch::Tensor pad = real.logical_not().unsqueeze(-1);
  const torch::Tensor n = real.sum(1, /*keepdim=*/true).to(x.scalar_type());  // {B, 1}
  const torch::Tensor mean = x.masked_fill(pad, 0.0).sum(1) / n.clamp_min(1);
  torch::Tensor max = x.masked_fill(pad, -std::numeric_limits<float>::infinity()).amax(1);
  max = max.masked_fill((n == 0).expand_as(max), 0.0);
  return torch::cat({mean, max, torch::log2(1.0 + n)}, 1);  // {B, 2F + 1}
}

torch::Tensor MlpCostModelImpl::embed(const torch::Tensor& x, const torch::Tensor& mask) {
  check_cost_model_inputs(x, mask, cfg_.n_features, "MlpCostModel");
  return body_->forward(pool(x, mask));
}

torch::Tensor MlpCostModelImpl::forward(const torch::Tensor& x, const torch::Tensor& mask) {
  return out_(dropout_(embed(x, mask))).squeeze(-1);
}

}  // namespace tclm
