// train/batches.h: ranking batches for every training loop (the trainer, distillation, sampling rounds).
//
// Every epoch, each task's programs are shuffled and cut into groups of at most `group_size` programs
// (sizes as even as possible; a group of one program has no pair and is dropped); groups of one
// platform and similar program length form a batch of about `batch_size` programs (less padding), so
// every batch holds whole groups of one platform (TCL-SPEC §4: batches from one platform at a time).
#pragma once

#include <random>
#include <vector>
#include <torch/torch.h>

#include "tclm/dataset.h"

namespace tclm {

/// One batch: groups of programs; each group = programs of one task; all groups of one platform.
struct Batch {
  std::vector<std::vector<uint32_t>> groups;
};

std::vector<Batch> make_batches(const Dataset& data, const std::vector<uint32_t>& tasks, int batch_size,
                                int group_size, std::mt19937_64& rng);

/// The number of batches make_batches returns for these tasks (independent of the shuffling).
int64_t count_batches(const Dataset& data, const std::vector<uint32_t>& tasks, int batch_size, int group_size);

/// A batch as tensors: x [n, L, F] and mask [n, L] of its n programs in group order, labels and
/// label_mask [T, G] (T groups, G = group_size) for the losses.
struct BatchTensors {
  torch::Tensor x, mask, labels, label_mask;
  std::vector<int64_t> index;  // flat program position -> position in the [T, G] grid
  int64_t n = 0;
  /// Per-program values [n] laid out on the [T, G] grid (zeros at padding), differentiable.
  torch::Tensor to_grid(const torch::Tensor& per_program) const;
};

BatchTensors to_tensors(const Dataset& data, const Batch& batch, int group_size);

}  // namespace tclm
