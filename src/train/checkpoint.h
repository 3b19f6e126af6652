// train/checkpoint.h: resumable training checkpoints (internal to the trainer).
//
// A checkpoint is an ordinary weights file (tclm/weights.h) holding the model being trained, plus
// training state in tensors named "trainer.*" (which model loaders ignore and `tclm export` strips):
//   trainer.best.<name>              the best model so far (early stopping picks it)
//   trainer.adam.<group>.<i>.exp_avg / .exp_avg_sq   Adam's moments of parameter i of group g
//   trainer.torch_rng                libtorch's CPU generator state (dropout), one byte per float
// and the counters in the metadata JSON under "trainer" (epoch and batch in progress, optimizer step,
// early-stopping state, the data-order RNG state as it was before the epoch's batches were drawn,
// the epoch log, a fingerprint of the options and data). Saved atomically (save_weights), so a
// killed run leaves either the previous checkpoint or the new one.
//
// Resuming restores all of it, redraws the epoch's batches from the saved RNG state and skips the
// batches already done: the resumed run computes exactly what the uninterrupted run would have
// (same thread count; tests/cli/resume.sh kills a run with SIGKILL and compares the models byte for byte).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "model/cost_model.h"
#include "tclm/weights.h"
#include "train/trainer.h"

namespace tclm {

inline constexpr int kCheckpointStateVersion = 1;

struct TrainerState {
  uint64_t fingerprint = 0;  // of the options, model and data (resuming with others is refused)
  int threads = 0;           // libtorch threads of the run (another count may change the last bits)
  int epoch = 1;             // the epoch in progress, 1-based
  int64_t batch = 0;         // batches of `epoch` already done
  int64_t step = 0;          // optimizer steps done
  double loss_sum = 0;       // of `epoch` so far (sum of loss * programs)
  int64_t seen = 0;          // programs of `epoch` so far
  double epoch_seconds = 0;  // training seconds of `epoch` so far
  int since_best = 0;
  double best_valid_top1 = -1;
  int best_epoch = 0;
  bool finished = false;     // the run ended (all epochs or early stop)
  std::string rng;           // the data-order std::mt19937_64 before `epoch`'s batches were drawn
  std::vector<EpochLog> log;
};

/// Writes model + optimizer + `best` (may be empty) + state to `path` atomically.
void save_checkpoint(const std::string& path, const TrainerState& state, CostModelImpl& model,
                     torch::optim::Adam& opt, const WeightsFile& best, uint32_t feature_version);

/// Reads a checkpoint written by save_checkpoint into `model`, `opt` (constructed as for a fresh run)
/// and `best`; restores libtorch's generator. Throws tclm::Error naming `path` when it is not a
/// checkpoint, is corrupt, or was written for other options or data (fingerprint).
TrainerState load_checkpoint(const std::string& path, uint64_t expected_fingerprint, CostModelImpl& model,
                             torch::optim::Adam& opt, WeightsFile* best);

/// The fingerprint of a run: the model kind and config, every option that changes the result, the
/// initial weights, and the data (programs, labels, split) it trains on.
uint64_t training_fingerprint(const TrainOptions& options, const std::string& model_config_json,
                              const Dataset& data, const Split& split);

std::string rng_to_string(const std::mt19937_64& rng);
/// False (rng unchanged or partly set) when `s` is not a state rng_to_string wrote.
bool rng_from_string(const std::string& s, std::mt19937_64* rng);

}  // namespace tclm
