// train/active_sampling.h: active sampling in rounds (TCL-SPEC §6): which programs of a set of tasks
// to measure, with a cost model trained between rounds to supply uncertainty and predicted scores.
//
// Round 1 (cold start, no model): rdu uses R + D only; uncertainty starts from random picks; balto
// starts from k-center picks. Every later round: a small Mamba (dropout on its pooled vector) is
// trained for a few epochs on the programs picked so far (their labels are "measured": the oracle of
// a study, the user's measurements in real use), then scores every program of the pool; MC dropout
// (Gal & Ghahramani 2016: `mc_passes` forward passes of the head with dropout on) gives the
// uncertainty = standard deviation of the scores, and the mean gives the predicted scores (balto).
// Each round picks an equal share of the budget; random and kcenter need no model and pick the whole
// budget in one round. Points are the pooled step features (Dataset::pooled_features).
#pragma once

#include <cstdint>
#include <vector>

#include "tclm/dataset.h"
#include "tclm/sample.h"
#include "train/trainer.h"

namespace tclm {

struct ActiveSamplingOptions {
  SamplerOptions sampler;      // method, weights, clusters, seed, threads
  PerTaskOptions per_task;     // fraction of every task to pick in total (default 10%), at least 2
  int rounds = 2;              // rounds for the methods that use a model (>= 1)
  int round_epochs = 4;        // epochs of the between-round model ...
  int64_t round_min_steps = 100; // ... but at least this many optimizer steps
  float mc_dropout = 0.1f;     // dropout of the between-round model's pooled vector
  int mc_passes = 8;           // MC-dropout passes
  int threads = 0;             // libtorch threads of the between-round model (0 = all cores)
  bool progress = false;
  // N processes (train/distributed.h), `data` a shard: each process picks the programs of the tasks it
  // owns (a task's picks depend on its own programs and seed alone), the between-round model is trained
  // data-parallel, and every process returns the same picks.
  std::shared_ptr<DataParallel> dist;
};

struct ActiveSamplingLog {
  std::vector<size_t> picked_per_round;  // new programs picked in each round
  double seconds_select = 0;             // inside select_per_task
  double seconds_model = 0;              // training and scoring the between-round models
};

/// Programs (dataset indices) of `tasks` chosen for measurement, grouped by nothing (sorted ascending).
/// Labels of programs are read only for programs already picked (the between-round model's training
/// data), so the result is what an experimenter measuring one round at a time would get.
/// Throws tclm::Error on bad options (see select_per_task).
std::vector<uint32_t> active_select(const Dataset& data, const std::vector<uint32_t>& tasks,
                                    const ActiveSamplingOptions& options, ActiveSamplingLog* log = nullptr);

/// MC-dropout mean and standard deviation of a Mamba model's scores over `programs`: the embedding is
/// computed once, the head `passes` times with dropout on (the model's own dropout rate).
void mc_dropout_scores(MambaCostModelImpl& model, const Dataset& data, const std::vector<uint32_t>& programs,
                       int passes, std::vector<float>* mean, std::vector<float>* std);

}  // namespace tclm
