// model/baselines.h: the baseline cost models of the model study (TCL-SPEC §4), trained by the same
// loop, loss and split as the Mamba model (model/cost_model.h). Written from the papers' descriptions:
//
//   attention  TLP (Zhai et al., ASPLOS 2023): per-step MLP encoder (Linear F->d, ReLU, Linear d->d,
//              ReLU), one multi-head self-attention layer over the steps (padding keys masked) with a
//              residual connection, n_layers residual blocks h + ReLU(Linear(h)), a per-step decoder
//              (Linear d->d, ReLU, Linear d->1) summed over the real steps.
//   lstm       per-step Linear F->d + ReLU, an n_layers LSTM, the output at the last real step, head
//              (Linear d->d, ReLU, Linear d->1). Padding is only at the end, so it is never read.
//   mlp        the pooled step features of tclm/feature.h (masked mean, masked max, log2(1 + length);
//              kPooledFeatureDim values, computed in the model from x and mask), then Linear 111->d,
//              ReLU, n_layers x (Linear d->d, ReLU), Linear d->1. Sees no step order.
//
// Shapes as in CostModelImpl: x [B, L, F], mask [B, L] -> scores [B].
#pragma once

#include <string>

#include "model/cost_model.h"

namespace tclm {

/// Hyper-parameters of a baseline. JSON: a flat object with exactly these five fields.
struct BaselineConfig {
  int n_features = 0;    // F, from the feature encoding
  int d_model = 0;       // hidden width (0 = the kind's default: attention 256, lstm 128, mlp 256)
  int n_layers = 0;      // attention: residual blocks (default 2); lstm: LSTM layers (1); mlp: hidden layers (2)
  int n_heads = 8;       // attention heads (attention only; d_model must be a multiple)
  float dropout = 0.0f;  // before the decoder / head

  /// Fills the zeros with `kind`'s defaults.
  BaselineConfig resolved(const std::string& kind) const;
  std::string to_json() const;
  /// Throws tclm::Error naming the field on a missing, unknown, repeated or mistyped field.
  static BaselineConfig from_json(const std::string& json);
  /// Throws tclm::Error if a size is out of [1, 65536] or dropout is outside [0, 1).
  void validate(const std::string& where) const;
};

class AttentionCostModelImpl : public CostModelImpl {
 public:
  explicit AttentionCostModelImpl(const BaselineConfig& cfg);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask) override;
  torch::Tensor embed(const torch::Tensor& x, const torch::Tensor& mask) override;  // masked mean [B, d]
  std::string kind() const override { return "attention"; }
  std::string config_json() const override { return cfg_.to_json(); }
  int n_features() const override { return cfg_.n_features; }

 private:
  torch::Tensor steps(const torch::Tensor& x, const torch::Tensor& mask);  // [B, L, d] before the decoder
  BaselineConfig cfg_;
  torch::nn::Linear enc1_{nullptr}, enc2_{nullptr}, dec1_{nullptr}, dec2_{nullptr};
  torch::nn::MultiheadAttention attention_{nullptr};
  torch::nn::ModuleList blocks_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
};

class LstmCostModelImpl : public CostModelImpl {
 public:
  explicit LstmCostModelImpl(const BaselineConfig& cfg);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask) override;
  torch::Tensor embed(const torch::Tensor& x, const torch::Tensor& mask) override;  // last real output [B, d]
  std::string kind() const override { return "lstm"; }
  std::string config_json() const override { return cfg_.to_json(); }
  int n_features() const override { return cfg_.n_features; }

 private:
  BaselineConfig cfg_;
  torch::nn::Linear in_{nullptr}, head1_{nullptr}, head2_{nullptr};
  torch::nn::LSTM lstm_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
};

class MlpCostModelImpl : public CostModelImpl {
 public:
  explicit MlpCostModelImpl(const BaselineConfig& cfg);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask) override;
  torch::Tensor embed(const torch::Tensor& x, const torch::Tensor& mask) override;  // last hidden [B, d]
  std::string kind() const override { return "mlp"; }
  std::string config_json() const override { return cfg_.to_json(); }
  int n_features() const override { return cfg_.n_features; }
  /// pool_step_features (tclm/feature.h) in torch: [B, L, F], [B, L] -> [B, 2F + 1].
  static torch::Tensor pool(const torch::Tensor& x, const torch::Tensor& mask);

 private:
  BaselineConfig cfg_;
  torch::nn::Sequential body_{nullptr};
  torch::nn::Linear out_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
};

}  // namespace tclm
