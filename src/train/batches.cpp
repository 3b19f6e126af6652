// train/batches.cpp: see batches.h.
#include "train/batches.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace tclm {

std::vector<Batch> make_batches(const Dataset& data, const std::vector<uint32_t>& tasks, int batch_size,
                                int group_size, std::mt19937_64& rng) {
  std::map<int, std::vector<std::vector<uint32_t>>> groups_by_platform;
  for (uint32_t t : tasks) {
    std::vector<uint32_t> progs = data.tasks()[t].programs;
    std::shuffle(progs.begin(), progs.end(), rng);
    const size_t n = progs.size();
    const size_t n_chunks = (n + group_size - 1) / group_size;
    for (size_t c = 0; c < n_chunks; ++c) {
      size_t b = c * n / n_chunks, e = (c + 1) * n / n_chunks;
      if (e - b < 2) continue;  // a single program has no pair to rank
      groups_by_platform[data.tasks()[t].platform].emplace_back(progs.begin() + b, progs.begin() + e);
    }
  }
  std::vector<Batch> batches;
  const size_t groups_per_batch = std::max<size_t>(1, batch_size / group_size);
  for (auto& [platform, groups] : groups_by_platform) {
    // Shuffle, then order by length so that a batch holds groups of similar program length: the
    // batch is padded to its longest program, and sequence lengths range from ~5 to ~70 steps.
    // The order of batches is shuffled below, so epochs still visit lengths at random.
    std::shuffle(groups.begin(), groups.end(), rng);
    auto longest = [&](const std::vector<uint32_t>& g) {
      int m = 0;
      for (uint32_t p : g) m = std::max(m, data.num_steps(p));
      return m;
    };
    std::vector<int> len(groups.size());
    for (size_t i = 0; i < groups.size(); ++i) len[i] = longest(groups[i]);
    std::vector<size_t> order(groups.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return len[a] < len[b]; });
    std::vector<std::vector<uint32_t>> sorted;
    sorted.reserve(groups.size());
    for (size_t i : order) sorted.push_back(std::move(groups[i]));
    groups = std::move(sorted);
    for (size_t i = 0; i < groups.size(); i += groups_per_batch) {
      Batch b;
      for (size_t j = i; j < std::min(groups.size(), i + groups_per_batch); ++j) b.groups.push_back(std::move(groups[j]));
      batches.push_back(std::move(b));
    }
  }
  std::shuffle(batches.begin(), batches.end(), rng);
  return batches;
}

BatchTensors to_tensors(const Dataset& data, const Batch& b, int group_size) {
  std::vector<uint32_t> programs;
  BatchTensors t;
  const int64_t T = static_cast<int64_t>(b.groups.size());
  std::vector<float> labels(T * group_size, 0.0f), lmask(T * group_size, 0.0f);
  for (int64_t g = 0; g < T; ++g) {
    for (size_t j = 0; j < b.groups[g].size(); ++j) {
      programs.push_back(b.groups[g][j]);
      t.index.push_back(g * group_size + static_cast<int64_t>(j));
      labels[g * group_size + j] = data.label(b.groups[g][j]);
      lmask[g * group_size + j] = 1.0f;
    }
  }
  std::vector<float> x, mask;
  const int L = data.featurize(programs, &x, &mask);
  const int64_t n = static_cast<int64_t>(programs.size());
  t.n = n;
  t.x = torch::from_blob(x.data(), {n, L, kStepFeatureDim}, torch::kFloat32).clone();
  t.mask = torch::from_blob(mask.data(), {n, L}, torch::kFloat32).clone();
  t.labels = torch::from_blob(labels.data(), {T, group_size}, torch::kFloat32).clone();
  t.label_mask = torch::from_blob(lmask.data(), {T, group_size}, torch::kFloat32).clone();
  return t;
}

int64_t count_batches(const Dataset& data, const std::vector<uint32_t>& tasks, int batch_size, int group_size) {
  std::map<int, int64_t> groups_by_platform;
  for (uint32_t t : tasks) {
    const size_t n = data.tasks()[t].programs.size();
    const size_t n_chunks = (n + group_size - 1) / group_size;
    // Chunk sizes differ by at most one, so a chunk of < 2 programs exists only when n < 2.
    if (n >= 2) groups_by_platform[data.tasks()[t].platform] += static_cast<int64_t>(n_chunks);
  }
  const int64_t per_batch = std::max<int64_t>(1, batch_size / group_size);
  int64_t batches = 0;
  for (const auto& [platform, groups] : groups_by_platform) batches += (groups + per_batch - 1) / per_batch;
  return batches;
}

torch::Tensor BatchTensors::to_grid(const torch::Tensor& per_program) const {
  const auto idx = torch::tensor(index, torch::kInt64);
  return torch::zeros({labels.numel()}, per_program.options()).index_put({idx}, per_program).view(labels.sizes());
}

}  // namespace tclm
