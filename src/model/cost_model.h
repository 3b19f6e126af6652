// model/cost_model.h: the interface every libtorch cost model implements (Mamba and the baselines), so
// that one training loop, one evaluation and one weights format serve them all (TCL-SPEC §4).
//
//   x [B, L, F] float32 step features (tclm/feature.h), mask [B, L] float32 (1 = real step; padding
//   only at the end)  ->  scores [B], higher = predicted faster. Padding never changes a score.
#pragma once

#include <memory>
#include <string>
#include <vector>
#include <torch/torch.h>

#include "tclm/weights.h"

namespace tclm {

class CostModelImpl : public torch::nn::Module {
 public:
  ~CostModelImpl() override = default;
  /// Scores [B] from x [B, L, F] and mask [B, L]. Throws tclm::Error on wrong shapes.
  virtual torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask) = 0;
  /// The representation the head reads, [B, E]: embeddings for the sampler and distillation.
  virtual torch::Tensor embed(const torch::Tensor& x, const torch::Tensor& mask) = 0;
  /// WeightsFile::model_kind ("mamba", "attention", "lstm", "mlp").
  virtual std::string kind() const = 0;
  /// F, the width of a step's features the model reads.
  virtual int n_features() const = 0;
  /// The hyper-parameters as JSON, stored in the weights file and read back by make_cost_model.
  virtual std::string config_json() const = 0;
  /// Multi-platform models (model/multi_head.h) score with the head of this platform (an index into
  /// Dataset::platforms()); every other model ignores it.
  virtual void set_platform(int platform) {}
  /// The model's own initialisation, deterministic given torch's seed (default: torch's defaults).
  virtual void init_weights() {}
  /// Parameters without weight decay (biases, norms, and model-specific ones such as Mamba's A_log
  /// and D), and the rest.
  std::vector<torch::Tensor> no_decay_parameters();
  std::vector<torch::Tensor> decay_parameters();
  /// Total number of scalar parameters.
  int64_t num_parameters();

 protected:
  /// Whether the parameter named `name` (torch's dotted name) is excluded from weight decay.
  /// Default: names ending in ".bias" and parameters of modules whose name starts with "norm".
  virtual bool is_no_decay(const std::string& name) const;
};

using CostModel = std::shared_ptr<CostModelImpl>;

/// Throws tclm::Error (starting with `who`) unless x is [B, L, n_features] and mask is [B, L].
void check_cost_model_inputs(const torch::Tensor& x, const torch::Tensor& mask, int64_t n_features,
                             const char* who);

/// The kinds of cost model a training run builds (TrainOptions::model_kind); their names are
/// WeightsFile::model_kind's: kMamba "mamba" (TCL), the baselines kAttention "attention", kLstm
/// "lstm", kMlp "mlp", and kMambaMtl "mamba-mtl" (one head per platform, model/multi_head.h).
enum class ModelKind { kMamba, kAttention, kLstm, kMlp, kMambaMtl };
/// The names, in the order of ModelKind.
const std::vector<std::string>& model_kind_names();
/// "mamba" -> ModelKind::kMamba, ...; throws tclm::Error naming `what` and the kinds for another name.
ModelKind parse_model_kind(const std::string& name, const std::string& what = "--model");
const std::string& to_string(ModelKind kind);

/// The single-platform kinds make_cost_model knows, in the order `tclm compare` lists them:
/// "mamba", "attention", "lstm", "mlp".
const std::vector<std::string>& cost_model_kinds();

/// Builds a model of `kind` from its config JSON (the format of that kind's config_json()), with
/// n_features forced to `n_features` when it is > 0, and runs init_weights(). Throws tclm::Error on an
/// unknown kind (listing the known ones) or a bad config.
CostModel make_cost_model(const std::string& kind, const std::string& config_json, int n_features = 0);

/// Parameters <-> weights file (names = torch parameter names). export sets model_kind, config_json
/// and tensors (feature_version and metadata are the caller's). load checks the kind, every name and
/// shape before copying anything (a failed load leaves the model unchanged); throws tclm::Error.
void export_to_weights(CostModelImpl& model, WeightsFile* out);
void load_into_model(const WeightsFile& weights, CostModelImpl& model);

/// A model built from a weights file: make_cost_model(kind, config) + load_into_model, in eval mode.
/// Refuses another feature-encoding version or feature width, naming `name_for_errors`.
CostModel load_cost_model(const WeightsFile& weights, const std::string& name_for_errors);

}  // namespace tclm
