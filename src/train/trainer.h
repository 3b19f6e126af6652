// train/trainer.h: trains a Mamba cost model on the training tasks of a dataset (TCL-SPEC §4).
//
// Batches: every epoch, each training task's programs are shuffled and cut into groups of at most
// `group_size` programs (sizes as even as possible); groups of one platform and similar program
// length form a batch of about `batch_size` programs (less padding), so every batch holds whole
// groups of one platform and every program is seen once per epoch. The loss is computed within groups (LambdaRank needs programs of one task).
// Optimiser: Adam, linear warm-up then cosine decay, gradient-norm clipping. The kept model and early
// stopping follow TrainOptions::select: by default the validation tasks' pairwise accuracy (the top-1
// of a few validation tasks saturates early and picks lucky epochs; docs/design.md, "Model
// selection"). Deterministic for a given seed and thread count.
// Checkpoints (out_dir/checkpoint.tclm, atomic) hold everything a killed run needs to resume exactly
// where it stopped (train/checkpoint.h).
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "model/baselines.h"
#include "model/cost_model.h"
#include "model/mamba.h"
#include "model/multi_head.h"
#include "tclm/dataset.h"
#include "tclm/evaluation.h"
#include "tclm/selection.h"
#include "train/distributed.h"

namespace tclm {

struct Batch;  // train/batches.h

/// The training loss: LambdaRank within tasks, or mean squared error of the labels.
enum class Loss { kLambdaRank, kMse };
/// The losses' names (--loss, the model metadata's "loss"), in the order of Loss: "lambdarank", "mse".
const std::vector<std::string>& loss_names();
/// "lambdarank" -> Loss::kLambdaRank, ...; throws tclm::Error naming `what` and the losses for another name.
Loss parse_loss(const std::string& name, const std::string& what = "--loss");
const std::string& to_string(Loss loss);

struct TrainOptions {
  ModelKind model_kind = ModelKind::kMamba;  // kMambaMtl: one head per platform
  MambaConfig model;               // the Mamba's hyper-parameters (n_features is set from the encoding)
  BaselineConfig baseline;         // a baseline's (model_kind attention | lstm | mlp)
  Loss loss = Loss::kLambdaRank;
  int epochs = 30;
  int batch_size = 1024;           // programs per batch
  int group_size = 64;             // programs of one task per group
  double lr = 7e-4;
  double warmup_fraction = 0.05;   // of all steps
  double final_lr_fraction = 0.05; // cosine decay ends at lr * this
  double grad_clip = 1.0;          // max global gradient norm (<= 0: off)
  double weight_decay = 0.0;       // never applied to A_log, D, norms, biases
  SelectRule select = SelectRule::kPairwise;  // which validation figure picks the kept epoch (tclm/selection.h)
  int patience = 6;                // epochs without a better one (by `select`) before stopping
  int64_t min_steps = 0;           // at least this many optimizer steps: more epochs (and patience in
                                   // proportion) when the data is small, e.g. a sampled budget
  uint64_t seed = 0;
  int threads = 0;                 // 0 = all cores
  std::string out_dir;             // checkpoint.tclm, best.tclm, train_log.json (empty: keep in memory)
  bool resume = false;             // continue from out_dir/checkpoint.tclm (train/checkpoint.h); the
                                   // result equals the uninterrupted run's (same thread count)
  double checkpoint_seconds = 600; // also checkpoint inside an epoch after this many seconds (0: after
                                   // every batch); a checkpoint is always written at the end of an epoch
  bool progress = true;            // progress display on stderr
  nlohmann::json metadata = nlohmann::json::object();  // stored as "extra" in the weights file's metadata ("data" etc.)
  std::shared_ptr<const WeightsFile> init;  // start from these weights (fine-tuning) instead of the
                                            // model's initialisation; its kind and shapes must match
  // Called after every epoch's validation, with that epoch's log entry and the model as it is then
  // (before the best model is chosen): a study's learning curves (study-sampling --curves evaluates the
  // test tasks here). It must not train the model; it never influences selection or stopping.
  std::function<void(const EpochLog&, CostModelImpl&)> on_epoch;
  // Data-parallel training (train/distributed.h): null or world 1 = this process alone. With N
  // processes the dataset must be this process's shard (LoadOptions::shard = rank, shards = N) of the
  // same sources on every process, and every option must be the same; rank 0 writes out_dir.
  std::shared_ptr<DataParallel> dist;
};

struct TrainResult {
  int best_epoch = 0;
  double best_valid_top1 = 0;
  std::vector<EpochLog> log;
  double seconds = 0;
  WeightsFile best;       // the best model (also at out_dir/best.tclm when out_dir is set)
};

TrainResult train_cost_model(const Dataset& data, const Split& split, const TrainOptions& options);

/// The first epoch whose model train_cost_model may keep as the best one: the first that ends at or
/// after the learning-rate warm-up (max(1, floor(warmup_fraction * total_steps)) steps). Earlier
/// epochs are kept only until it is reached (a barely trained model's validation top-1 on a small
/// validation set is often high by luck). E.g. 7 steps per epoch, 406 steps, warm-up 0.05: warm-up
/// 20 steps, first selectable epoch 3.
int first_selectable_epoch(int64_t steps_per_epoch, int64_t total_steps, double warmup_fraction);

/// The untrained model `options` describe (kind, hyper-parameters, n_features of the encoding),
/// initialised from torch's current seed.
/// n_platforms: heads of a multi-platform model (ModelKind::kMambaMtl); ignored otherwise.
CostModel make_cost_model(const TrainOptions& options, int n_platforms = 1);

/// Scores programs with a model (eval mode, no gradients), in batches of `batch` programs.
std::vector<float> predict_programs(CostModelImpl& model, const Dataset& data,
                                    const std::vector<uint32_t>& programs, int batch = 4096);
inline std::vector<float> predict_programs(const CostModel& model, const Dataset& data,
                                           const std::vector<uint32_t>& programs, int batch = 4096) {
  return predict_programs(*model, data, programs, batch);
}
inline std::vector<float> predict_programs(MambaCostModel& model, const Dataset& data,
                                           const std::vector<uint32_t>& programs, int batch = 4096) {
  return predict_programs(*model, data, programs, batch);
}

/// One batch's mean loss and its gradient (accumulated into the parameters' gradients, which the caller
/// zeroes first), as every training step computes them: the whole batch in this process, or with a
/// `dist` of N > 1 processes this process's part of it (the groups of the tasks it owns) and one
/// all-reduce, after which every process holds the gradient one process computes for the whole batch,
/// up to the order of float sums. A non-finite loss is returned without a gradient (single process).
double batch_gradient(CostModelImpl& model, const Dataset& data, const Batch& batch, int group_size, Loss loss,
                      DataParallel* dist = nullptr);

/// Sets libtorch's intra-op threads (0 = all cores).
void set_threads(int threads);

}  // namespace tclm
