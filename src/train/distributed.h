// train/distributed.h: data-parallel training over PyTorch's c10d (ProcessGroupGloo on a TCPStore),
// started the way PyTorch users start it: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT in every
// process's environment (scripts/dist-run.sh sets them for N processes on one machine; on several
// machines, set them yourself or with any launcher that does, e.g. torchrun or a batch scheduler).
//
// How a run is split (train/trainer.cpp, docs/distributed.md): every process reads the same records and
// keeps the steps of the tasks it owns (Dataset::shard_of) and only the metadata of the others, so that
// all of them cut the same global batches from the same seed; each process runs forward and backward on
// the groups of the batch whose tasks it owns, the gradients (weighted by each part's share of the
// loss's normalizer) are summed over the processes in one all-reduce per step, and every process takes
// the same optimizer step. So N processes train the model one process would train with the same
// options, up to the order of floating-point sums. Rank 0 writes the checkpoints and the model.
//
// Failure: a collective that cannot complete (a process died: its connections close; or it hangs past
// the timeout) throws tclm::Error naming this rank and the operation, and the process exits non-zero.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <torch/torch.h>

#include "tclm/evaluation.h"
#include "train/batches.h"

namespace tclm {

struct DistOptions {
  int rank = 0;
  int world = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  double timeout_seconds = 300;  // a collective or the rendezvous waiting longer than this fails
  /// From the environment variables torchrun sets: WORLD_SIZE (absent: 1), RANK, MASTER_ADDR,
  /// MASTER_PORT. Throws tclm::Error naming the variable when one is missing or malformed.
  static DistOptions from_env();
};

class DataParallel {
 public:
  /// Joins the other processes (rank 0 serves the TCPStore at MASTER_ADDR:MASTER_PORT) and builds the
  /// Gloo process group. Blocks until all `world` processes have joined, or throws tclm::Error after
  /// the timeout.
  explicit DataParallel(const DistOptions& options);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  int rank() const { return options_.rank; }
  int world() const { return options_.world; }

  /// Sums a contiguous CPU float tensor over all processes, in place. `what` names the operation in
  /// errors. The time spent is added to comm_seconds().
  void all_reduce_sum(torch::Tensor& t, const char* what);
  /// Copies rank 0's tensor into every process's, in place.
  void broadcast(torch::Tensor& t, const char* what);
  /// Waits until every process has reached this point (a one-number all-reduce); the time is added
  /// to wait_seconds(): before the gradient all-reduce, it is the imbalance between the processes' parts.
  void wait_for_all(const char* what);
  /// Seconds spent in all-reduces and broadcasts (transfer), and in wait_for_all, since construction.
  double comm_seconds() const { return comm_seconds_; }
  double wait_seconds() const { return wait_seconds_; }

  /// The groups of `batch` whose tasks this process owns (Dataset::shard_of): its part of the batch.
  Batch owned_part(const class Dataset& data, const Batch& batch) const;
  /// Throws tclm::Error unless `value` (a fingerprint of the data and options) is rank 0's on this
  /// process: every process must run the same command on the same records. `what` names the run.
  void check_same(uint64_t value, const char* what);
  /// Copies rank 0's parameters into every process's.
  void broadcast_parameters(const std::vector<torch::Tensor>& params);

  /// A scorer for a dataset of which this process keeps a shard: it scores the programs whose steps
  /// it keeps with `local`, and the others' scores come from the processes that keep them (one
  /// all-reduce). Every process must call it with the same programs, in the same order.
  ProgramScorer sharded(const class Dataset& data, ProgramScorer local);

 private:
  template <typename Collective>
  void collective(torch::Tensor& t, const char* what, double* clock, Collective op);
  struct Impl;
  DistOptions options_;
  std::unique_ptr<Impl> impl_;
  double comm_seconds_ = 0, wait_seconds_ = 0;
};

/// One term of a batch's loss that is a mean over rows of the batch (LambdaRank: the groups with a pair;
/// listwise distillation: the groups with two programs; MSE: the real entries): this process's part of
/// it, the mean over the rows it holds (undefined when it holds none), and the number of those rows.
struct LossPart {
  torch::Tensor mean;
  double normalizer = 0;
  double weight = 1;
};

/// The loss of one training step, L = sum_k weight_k * (term k's mean over the whole batch) + global,
/// where `global` (undefined: none) is a term of the parameters alone that every process computes alike
/// (EWC's penalty). Accumulates dL/dtheta into the gradients of `params` (the caller zeroes them first)
/// and returns L. One process: the plain sum and its backward pass. N processes (`dist` of world > 1),
/// each holding its part of the batch: one all-reduce sums the parts' normalizers (timed as waiting:
/// it is where the processes meet after the forward pass), each process weights its part by its share
/// of the normalizer, rank 0 alone adds `global`, and one all-reduce sums the gradients and the loss, so
/// that every process holds the gradient one process computes for the whole batch, up to the order of
/// float sums. A parameter no part touched keeps no gradient (Adam leaves it alone, as in one process).
/// A non-finite loss is returned without a gradient, on every process alike.
double backward_loss(const std::vector<LossPart>& parts, const torch::Tensor& global,
                     const std::vector<torch::Tensor>& params, DataParallel* dist);

}  // namespace tclm
