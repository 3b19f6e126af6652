// model/mamba.cpp: the Mamba mixer and cost model, Mamba's initialisation, optimizer
// parameter groups, and the weights-file export/import. The selective scan kernel is in selective_scan.cpp.
#include "model/mamba.h"

#include <fmt/format.h>

#include <cmath>
#include <string_view>
#include <unordered_set>

#include "tclm/error.h"
#include "tclm/model_schema.h"

namespace tclm {
namespace {

namespace schema = mamba_schema;  // the module and parameter names, the LayerNorm epsilon

// Mamba's dt initialisation (reference-notes §3.3, upstream defaults).
constexpr double kDtMin = 1e-3;        // dt ~ exp(U(log dt_min, log dt_max))
constexpr double kDtMax = 1e-1;
constexpr double kDtInitFloor = 1e-4;  // dt clamped from below before inverse softplus
constexpr double kDtScale = 1.0;       // dt_proj.weight ~ U(-dt_scale / sqrt(dt_rank), +...)

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool starts_with(const std::string& s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }

/// A_log = log(1..N) for every channel (S4D-real), {E, N}.
torch::Tensor official_A_log(int64_t d_inner, int64_t d_state) {
  return torch::log(torch::arange(1, d_state + 1, torch::kFloat32)).repeat({d_inner, 1});
}

}  // namespace

// ---- MambaMixer

MambaMixerImpl::MambaMixerImpl(const MambaConfig& config) : cfg(config) {
  cfg.validate("MambaMixer");
  const int64_t d_model = cfg.d_model, d_inner = cfg.d_inner(), d_state = cfg.d_state,
                dt_rank = cfg.resolved_dt_rank(), d_conv = cfg.d_conv;
  in_proj = register_module(
      schema::kInProj, torch::nn::Linear(torch::nn::LinearOptions(d_model, 2 * d_inner).bias(false)));
  conv1d = register_module(
      schema::kConv1d, torch::nn::Conv1d(torch::nn::Conv1dOptions(d_inner, d_inner, /*kernel_size=*/d_conv)
                                      .groups(d_inner)
                                      .padding(d_conv - 1)
                                      .bias(true)));
  x_proj = register_module(
      schema::kXProj, torch::nn::Linear(torch::nn::LinearOptions(d_inner, dt_rank + 2 * d_state).bias(false)));
  dt_proj = register_module(schema::kDtProj, torch::nn::Linear(torch::nn::LinearOptions(dt_rank, d_inner)));
  out_proj = register_module(
      schema::kOutProj, torch::nn::Linear(torch::nn::LinearOptions(d_inner, d_model).bias(false)));
  A_log = register_parameter(schema::kALog, official_A_log(d_inner, d_state));
  D = register_parameter(schema::kDSkip, torch::ones({d_inner}));
}

torch::Tensor MambaMixerImpl::forward(const torch::Tensor& h) {
  const int64_t d_inner = cfg.d_inner(), d_state = cfg.d_state, dt_rank = cfg.resolved_dt_rank();
  // The fused kernels are CPU float32 only; elsewhere the tensor-op references (same math, slower).
  const bool fused = h.device().is_cpu() && h.scalar_type() == torch::kFloat32;
  // split rather than narrow: its backward concatenates the pieces' gradients instead of zero-filling
  // and adding one full-size gradient per piece.
  const auto xz = in_proj(h).split(d_inner, -1);  // {B, L, d_model} @ W^T => {B, L, 2 d_inner} => x, z
  const torch::Tensor& z = xz[1];                 // {B, L, d_inner} gate
  // SiLU(causal depthwise conv(x)) with conv1d's parameters: step t sees steps t-K+1..t. The fused
  // kernel replaces conv1d's forward, whose CPU backward alone costs more than the rest of the mixer.
  const torch::Tensor x =
      fused ? causal_conv1d_silu(xz[0], conv1d->weight, conv1d->bias)
            : causal_conv1d_silu_reference(xz[0], conv1d->weight, conv1d->bias).contiguous();  // {B, L, E}
  const auto dbc = x_proj(x).split_with_sizes({dt_rank, d_state, d_state}, -1);  // {B, L, R + 2N}
  const torch::Tensor& Bm = dbc[1];                               // {B, L, d_state}
  const torch::Tensor& C = dbc[2];                                // {B, L, d_state}
  const torch::Tensor delta = torch::softplus(dt_proj(dbc[0]));  // {B, L, d_inner}, bias inside
  const torch::Tensor A = -torch::exp(A_log);                     // {d_inner, d_state}
  const torch::Tensor y = fused ? selective_scan(x, delta, A, Bm, C, D)
                                : selective_scan_reference(x, delta, A, Bm, C, D);  // {B, L, d_inner}
  return out_proj(y * torch::silu(z));  // {B, L, d_model}
}

// ---- MambaCostModel

MambaCostModelImpl::MambaCostModelImpl(const MambaConfig& cfg) : cfg_(cfg) {
  cfg_.validate("MambaCostModel");
  const int64_t d_model = cfg_.d_model, head_hidden = cfg_.resolved_head_hidden();
  embed_ = register_module(schema::kEmbed, torch::nn::Linear(cfg_.n_features, d_model));
  norms_list_ = register_module(schema::kNorms, torch::nn::ModuleList());
  mixers_list_ = register_module(schema::kMixers, torch::nn::ModuleList());
  for (int i = 0; i < cfg_.n_layers; ++i) {
    norms_.emplace_back(torch::nn::LayerNormOptions({d_model}).eps(schema::kLayerNormEps));
    mixers_.emplace_back(cfg_);
    norms_list_->push_back(norms_.back());
    mixers_list_->push_back(mixers_.back());
  }
  norm_f_ = register_module(
      schema::kNormF, torch::nn::LayerNorm(torch::nn::LayerNormOptions({d_model}).eps(schema::kLayerNormEps)));
  head1_ = register_module(schema::kHead1, torch::nn::Linear(d_model, head_hidden));
  head2_ = register_module(schema::kHead2, torch::nn::Linear(head_hidden, 1));
  dropout_ = register_module("dropout", torch::nn::Dropout(cfg_.dropout));
}

torch::Tensor MambaCostModelImpl::embed(const torch::Tensor& x, const torch::Tensor& mask) {
  check_cost_model_inputs(x, mask, cfg_.n_features, "MambaCostModel");
  const torch::Tensor real = mask > 0;                         // {B, L}
  const torch::Tensor pad = real.logical_not().unsqueeze(-1);  // {B, L, 1}
  // Padding rows are zeroed first so that even NaN garbage there cannot leak into real steps' gradients.
  torch::Tensor h = embed_(x.masked_fill(pad, 0.0));  // {B, L, d_model}
  for (size_t i = 0; i < mixers_.size(); ++i) h = h + mixers_[i](norms_[i](h));
  h = norm_f_(h).masked_fill(pad, 0.0);
  const torch::Tensor n_real = real.sum(1, /*keepdim=*/true).to(h.scalar_type()).clamp_min(1);  // {B, 1}
  return h.sum(1) / n_real;  // {B, d_model}
}

torch::Tensor MambaCostModelImpl::head(const torch::Tensor& p) {
  return head2_(torch::relu(head1_(dropout_(p)))).squeeze(-1);  // {B}
}

torch::Tensor MambaCostModelImpl::forward(const torch::Tensor& x, const torch::Tensor& mask) {
  return head(embed(x, mask));
}

bool MambaCostModelImpl::is_no_decay(const std::string& name) const {
  using schema::join;  // join("", p) = ".p"
  return ends_with(name, join("", schema::kBias)) || ends_with(name, join("", schema::kALog)) ||
         ends_with(name, join("", schema::kDSkip)) || starts_with(name, join(schema::kNorms, "")) ||
         starts_with(name, join(schema::kNormF, ""));
}

// ---- initialisation

void MambaCostModelImpl::init_weights() {
  torch::NoGradGuard no_grad;
  const MambaConfig& cfg = cfg_;
  std::unordered_set<const torch::nn::Module*> dt_projs;
  for (const auto& module : modules(/*include_self=*/false)) {
    auto* mixer = dynamic_cast<MambaMixerImpl*>(module.get());
    if (mixer == nullptr) continue;
    dt_projs.insert(mixer->dt_proj.get());
    const int64_t d_inner = cfg.d_inner();
    // dt_proj.weight ~ U(-s, s), s = dt_scale / sqrt(dt_rank).
    const double s = kDtScale / std::sqrt(static_cast<double>(cfg.resolved_dt_rank()));
    mixer->dt_proj->weight.uniform_(-s, s);
    // dt ~ exp(U(log dt_min, log dt_max)) clamped at the floor; bias = softplus^{-1}(dt).
    const torch::Tensor dt =
        torch::exp(torch::rand({d_inner}, torch::kFloat64) * (std::log(kDtMax) - std::log(kDtMin)) +
                   std::log(kDtMin))
            .clamp_min(kDtInitFloor);
    mixer->dt_proj->bias.copy_(dt + torch::log(-torch::expm1(-dt)));
    mixer->A_log.copy_(official_A_log(d_inner, cfg.d_state));
    mixer->D.fill_(1.0f);
    // Pre-norm residual rescale: kaiming-uniform(a = sqrt 5) / sqrt(n_layers).
    torch::nn::init::kaiming_uniform_(mixer->out_proj->weight, std::sqrt(5.0));
    mixer->out_proj->weight.div_(std::sqrt(static_cast<double>(cfg.n_layers)));
  }
  // Upstream zeroes every other Linear bias (embedding and head included); weights keep torch defaults.
  for (const auto& module : modules(/*include_self=*/false)) {
    auto* linear = dynamic_cast<torch::nn::LinearImpl*>(module.get());
    if (linear == nullptr || dt_projs.count(linear) != 0 || !linear->bias.defined()) continue;
    linear->bias.zero_();
  }
}

}  // namespace tclm
