// model/xgboost_model.h: the XGBoost baseline (what TVM's Ansor and MetaSchedule tuners use by default),
// trained on the same dataset and split as the neural cost models.
//
// Features: the fixed-size pooled vector of each program (tclm/feature.h, pool_step_features:
// per-slot mean and max over the steps and log2(1 + length); kPooledFeatureDim floats). Objective:
// rank:pairwise with one query group per training task, labels = normalized throughput. Booster
// parameters follow TVM's XGBModel (max_depth 10, eta 0.2, gamma 0.001, min_child_weight 0).
// Early stopping: the validation tasks' mean top-1 is evaluated every `eval_every` rounds and the
// model is cut to the best round count (ties broken by pairwise accuracy, as in the trainer).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tclm/dataset.h"
#include "tclm/selection.h"

namespace tclm {

struct XgbOptions {
  int max_rounds = 400;
  int eval_every = 25;
  int max_depth = 10;
  double eta = 0.2;
  double gamma = 0.001;
  double min_child_weight = 0;
  // Which validation figure picks the kept round count: the trainer's rules (tclm/selection.h), so
  // that `tclm compare --select` treats XGBoost like the neural models.
  SelectRule select = SelectRule::kPairwise;
  uint64_t seed = 0;
  int threads = 0;     // 0 = all cores
  bool progress = true;
};

/// A trained booster (owns the XGBoost handle).
class XgbCostModel {
 public:
  XgbCostModel();
  ~XgbCostModel();
  XgbCostModel(XgbCostModel&&) noexcept;
  XgbCostModel& operator=(XgbCostModel&&) noexcept;

  /// Scores [n] (higher = predicted faster) of programs of `data`.
  std::vector<float> predict(const Dataset& data, const std::vector<uint32_t>& programs) const;
  /// Scores of pooled feature rows [n, kPooledFeatureDim].
  std::vector<float> predict_pooled(const std::vector<float>& pooled) const;
  /// The model as XGBoost's binary (ubj) buffer: its size is the model size.
  std::string serialize() const;
  int rounds() const;

 private:
  friend struct XgbTrainer;
  void* booster_ = nullptr;  // BoosterHandle
};

struct XgbTrainResult {
  XgbCostModel model;
  int best_rounds = 0;
  double best_valid_top1 = 0;
  double seconds = 0;
};

/// Trains on split.train, early-stops on split.valid (or the training tasks if there is none).
/// Throws tclm::Error on an empty training set or an XGBoost error (with XGBoost's message).
XgbTrainResult train_xgboost(const Dataset& data, const Split& split, const XgbOptions& options);

}  // namespace tclm
