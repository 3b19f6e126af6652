// model/mamba.h: the Mamba cost model in libtorch (TCL-SPEC §4; Gu & Dao 2023, "Mamba: Linear-Time
// Sequence Modeling with Selective State Spaces", Mamba-1 block).
//
//   x [B, L, F] step features, mask [B, L] (1 = real step, 0 = padding; padding only at the end)
//   h = embed(x)                                   Linear F -> d_model
//   for each layer: h = h + Mixer(LayerNorm(h))    pre-norm residual
//   h = LayerNorm_f(h)
//   p = sum_t mask_t h_t / sum_t mask_t            masked mean pooling: padding cannot change a score
//   score = head(p)                                Linear d -> head_hidden, ReLU, Linear -> 1
// Mixer: in_proj (no bias) -> x, z; x = SiLU(causal depthwise conv1d(x)); x_proj -> dt_raw, B, C;
// delta = softplus(dt_proj(dt_raw)) (bias inside); y = selective_scan(x, delta, A=-exp(A_log), B, C, D);
// out_proj(y * SiLU(z)).
// On the CPU (float32) the conv + SiLU and the scan run as fused kernels with hand-written backward passes
// (selective_scan.cpp); on other devices the mixer uses the tensor-op references below.
#pragma once

#include <string>
#include <torch/torch.h>

#include "model/cost_model.h"
#include "tclm/model_config.h"  // MambaConfig
#include "tclm/weights.h"

namespace tclm {

/// Selective scan with a fused C++ forward and backward (custom autograd function, CPU only).
///   u, delta: [B, L, E]; A: [E, N]; Bm, C: [B, L, N]; D: [E]  ->  y: [B, L, E]
///   h_t = exp(delta_t * A) * h_{t-1} + delta_t * Bm_t * u_t ;  y_t = sum_n C_t[n] h_t[n] + D * u_t
/// All float32 (checked); non-contiguous inputs are copied. Gradients flow to every input and are
/// deterministic (independent of the thread count).
torch::Tensor selective_scan(const torch::Tensor& u, const torch::Tensor& delta,
                             const torch::Tensor& A, const torch::Tensor& Bm,
                             const torch::Tensor& C, const torch::Tensor& D);

/// The same recurrence written step by step with ordinary tensor ops (autograd through the loop).
/// The reference for tests; slow.
torch::Tensor selective_scan_reference(const torch::Tensor& u, const torch::Tensor& delta,
                                       const torch::Tensor& A, const torch::Tensor& Bm,
                                       const torch::Tensor& C, const torch::Tensor& D);

/// SiLU(causal depthwise conv1d(x) + bias), fused CPU kernel with autograd (float32, CPU only).
///   x: [B, L, E] (unit channel stride; a channel slice of a wider tensor is read in place);
///   weight: [E, 1, K] and bias: [E] as in torch::nn::Conv1d(E, E, K, groups=E)  ->  [B, L, E]
///   out[b,t,e] = SiLU(bias[e] + sum_k weight[e,0,k] x[b, t-K+1+k, e]),  x = 0 before t = 0.
torch::Tensor causal_conv1d_silu(const torch::Tensor& x, const torch::Tensor& weight,
                                 const torch::Tensor& bias);

/// The same with torch::conv1d (padding K-1, first L outputs kept) and torch::silu; any device.
torch::Tensor causal_conv1d_silu_reference(const torch::Tensor& x, const torch::Tensor& weight,
                                           const torch::Tensor& bias);

class MambaMixerImpl : public torch::nn::Module {
 public:
  explicit MambaMixerImpl(const MambaConfig& cfg);
  torch::Tensor forward(const torch::Tensor& h);  // [B, L, d_model] -> [B, L, d_model]
  // Parameters are public for initialisation and export.
  torch::nn::Linear in_proj{nullptr}, x_proj{nullptr}, dt_proj{nullptr}, out_proj{nullptr};
  torch::nn::Conv1d conv1d{nullptr};  // depthwise, padding K-1; holds the parameters (see forward)
  torch::Tensor A_log, D;             // [E, N] and [E], official values from construction on
  MambaConfig cfg;
};
TORCH_MODULE(MambaMixer);

class MambaCostModelImpl : public CostModelImpl {
 public:
  explicit MambaCostModelImpl(const MambaConfig& cfg);
  /// x [B, L, F] float32, mask [B, L] float32 (1/0) -> scores [B] (higher = faster).
  /// Padding rows are ignored whatever they hold (they are zeroed on input and masked in pooling). A row
  /// with no real step pools to the zero vector. Throws tclm::Error on wrong shapes.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask) override;
  /// The pooled representation [B, d_model] (before dropout and the head): embeddings for the sampler.
  torch::Tensor embed(const torch::Tensor& x, const torch::Tensor& mask) override;
  /// The head on a pooled representation p [B, d_model] (dropout, Linear, ReLU, Linear) -> [B];
  /// forward(x, mask) = head(embed(x, mask)).
  torch::Tensor head(const torch::Tensor& p);
  std::string kind() const override { return kMambaModelKind; }
  std::string config_json() const override { return cfg_.to_json(); }
  int n_features() const override { return cfg_.n_features; }
  /// Mamba's official initialisation (init_mamba_weights).
  void init_weights() override;
  const MambaConfig& config() const { return cfg_; }

 protected:
  /// A_log, D, norms and biases.
  bool is_no_decay(const std::string& name) const override;

 private:
  MambaConfig cfg_;
  torch::nn::Linear embed_{nullptr};
  std::vector<torch::nn::LayerNorm> norms_;
  std::vector<MambaMixer> mixers_;
  torch::nn::LayerNorm norm_f_{nullptr};
  torch::nn::Linear head1_{nullptr}, head2_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
  // The same modules as norms_ / mixers_, registered as "norms" / "mixers" so that parameter names read
  // "norms.0.weight", "mixers.0.in_proj.weight" (register_module names cannot contain dots). Every module
  // and parameter name, and the LayerNorm epsilon, come from tclm/model_schema.h.
  torch::nn::ModuleList norms_list_{nullptr}, mixers_list_{nullptr};
};
TORCH_MODULE(MambaCostModel);

/// Mamba's official initialisation (reference-notes §3.3), deterministic given torch's seed: A_log =
/// log(1..N), D = 1, dt_proj weight U(-R^-1/2, R^-1/2) and bias = softplus^-1(dt), dt log-uniform in
/// [1e-3, 1e-1] floored at 1e-4, out_proj kaiming-uniform(a=sqrt 5) / sqrt(n_layers), every other Linear
/// bias zero (embedding and head included); other weights keep torch's default initialisation.
inline void init_mamba_weights(MambaCostModel& model) { model->init_weights(); }

/// Holder conveniences for the generic functions of model/cost_model.h.
inline void export_to_weights(MambaCostModel& model, WeightsFile* out) { export_to_weights(*model, out); }
inline void load_into_model(const WeightsFile& weights, MambaCostModel& model) { load_into_model(weights, *model); }

}  // namespace tclm
