// train/active_sampling.cpp: see active_sampling.h.
#include "train/active_sampling.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fmt/format.h>

#include "common/timer.h"
#include "tclm/error.h"

namespace tclm {
void mc_dropout_scores(MambaCostModelImpl& model, const Dataset& data, const std::vector<uint32_t>& programs,
                       int passes, std::vector<float>* mean, std::vector<float>* std) {
  torch::NoGradGuard no_grad;
  const bool was_training = model.is_training();
  mean->assign(programs.size(), 0.0f);
  std->assign(programs.size(), 0.0f);
  std::vector<float> x, mask;
  const size_t B = 4096;
  for (size_t i = 0; i < programs.size(); i += B) {
    std::vector<uint32_t> chunk(programs.begin() + i, programs.begin() + std::min(programs.size(), i + B));
    const int L = data.featurize(chunk, &x, &mask);
    const auto n = static_cast<int64_t>(chunk.size());
    model.eval();
    const auto p = model.embed(torch::from_blob(x.data(), {n, L, kStepFeatureDim}),
                               torch::from_blob(mask.data(), {n, L}));
    model.train();  // dropout on; the model has no other train-mode behaviour
    std::vector<torch::Tensor> s;
    for (int k = 0; k < passes; ++k) s.push_back(model.head(p));
    const auto all = torch::stack(s);  // {passes, n}
    const auto m = all.mean(0).contiguous();
    const auto sd = (passes > 1 ? all.std(0) : torch::zeros_like(m)).contiguous();
    std::copy(m.data_ptr<float>(), m.data_ptr<float>() + n, mean->begin() + i);
    std::copy(sd.data_ptr<float>(), sd.data_ptr<float>() + n, std->begin() + i);
  }
  if (was_training) model.train(); else model.eval();
}

std::vector<uint32_t> active_select(const Dataset& data, const std::vector<uint32_t>& tasks,
                                    const ActiveSamplingOptions& o, ActiveSamplingLog* log) {
  if (o.rounds < 1) throw Error("active sampling: rounds must be >= 1");
  ActiveSamplingLog local;
  if (!log) log = &local;
  DataParallel* dist = o.dist && o.dist->world() > 1 ? o.dist.get() : nullptr;
  // The pool: every program of the tasks this process owns (all of them in one process), one group
  // per task; the group of a task another process owns stays empty, so that every task keeps its
  // index (select_per_task seeds each task by it) and its picks are the same in any number of processes.
  std::vector<uint32_t> pool;
  std::vector<std::vector<uint32_t>> groups;
  size_t pool_all = 0;
  for (uint32_t t : tasks) {
    std::vector<uint32_t> rows;
    pool_all += data.tasks()[t].programs.size();
    if (dist == nullptr || data.shard_of(t) == dist->rank()) {
      for (uint32_t p : data.tasks()[t].programs) {
        rows.push_back(static_cast<uint32_t>(pool.size()));
        pool.push_back(p);
      }
    }
    groups.push_back(std::move(rows));
  }
  std::vector<float> points;
  data.pooled_features(pool, &points);
  // The programs picked so far by every process, ascending (with N processes: a mark per program of
  // the data, summed over the processes).
  auto all_picks = [&](const std::vector<uint32_t>& rows) {
    std::vector<uint32_t> out;
    out.reserve(rows.size());
    for (uint32_t r : rows) out.push_back(pool[r]);
    if (dist != nullptr) {
      torch::Tensor marks = torch::zeros({static_cast<int64_t>(data.num_programs())}, torch::kUInt8);
      uint8_t* m = marks.data_ptr<uint8_t>();
      for (uint32_t p : out) m[p] = 1;
      dist->all_reduce_sum(marks, "the sampler's picks");
      out.clear();
      for (size_t p = 0; p < data.num_programs(); ++p) {
        if (m[p] != 0) out.push_back(static_cast<uint32_t>(p));
      }
    }
    std::sort(out.begin(), out.end());
    return out;
  };

  const SampleMethod method = o.sampler.method;
  const bool uses_model = method == SampleMethod::kRdu || method == SampleMethod::kUncertainty ||
                          method == SampleMethod::kBalto;
  const int rounds = uses_model ? o.rounds : 1;
  std::vector<uint32_t> selected;  // pool rows
  std::vector<float> uncertainty, scores;
  for (int round = 1; round <= rounds; ++round) {
    SamplerOptions so = o.sampler;
    so.seed = o.sampler.seed * 1000003ULL + static_cast<uint64_t>(round);
    SamplePool sp;
    sp.points = points;
    sp.dim = kPooledFeatureDim;
    sp.selected = selected;
    if (round == 1 && uses_model) {
      if (method == SampleMethod::kUncertainty) so.method = SampleMethod::kRandom;
      if (method == SampleMethod::kBalto) so.method = SampleMethod::kKCenter;
    } else if (round > 1) {
      // Train the between-round model on what was measured so far, then score the pool.
      const auto t0 = Clock::now();
      const Dataset sub = data.subset(all_picks(selected));
      Split sp_train;
      for (uint32_t t : tasks) sp_train.train.push_back(t);
      TrainOptions to;
      to.model.dropout = o.mc_dropout;
      to.epochs = o.round_epochs;
      to.patience = o.round_epochs;
      to.min_steps = o.round_min_steps;
      to.seed = o.sampler.seed + static_cast<uint64_t>(round);
      to.threads = o.threads;
      to.progress = false;
      to.dist = o.dist;
      TrainResult tr = train_cost_model(sub, sp_train, to);
      CostModel model = load_cost_model(tr.best, "between-round model");
      auto* mamba = dynamic_cast<MambaCostModelImpl*>(model.get());
      mc_dropout_scores(*mamba, data, pool, o.mc_passes, &scores, &uncertainty);
      sp.uncertainty = uncertainty;
      sp.scores = scores;
      log->seconds_model += since(t0);
    }
    PerTaskOptions pt = o.per_task;
    pt.fraction = o.per_task.fraction * round / rounds;
    pt.min_per_task = static_cast<int>(std::ceil(static_cast<double>(o.per_task.min_per_task) * round / rounds));
    const auto t0 = Clock::now();
    const auto picks = select_per_task(sp, groups, pt, so);
    log->seconds_select += since(t0);
    size_t n_new = 0;
    for (const auto& g : picks) {
      selected.insert(selected.end(), g.begin(), g.end());
      n_new += g.size();
    }
    if (dist != nullptr) {  // every process's new picks
      torch::Tensor n = torch::full({1}, static_cast<double>(n_new), torch::kFloat64);
      dist->all_reduce_sum(n, "the sampler's picks");
      n_new = static_cast<size_t>(std::llround(n.item<double>()));
    }
    log->picked_per_round.push_back(n_new);
    if (o.progress) {
      size_t total = 0;
      for (size_t k : log->picked_per_round) total += k;
      std::fprintf(stderr, "sampling round %d/%d (%s): %zu new programs, %zu of %zu picked\n", round, rounds,
                   sample_method_name(so.method), n_new, total, pool_all);
    }
  }
  return all_picks(selected);
}

}  // namespace tclm
