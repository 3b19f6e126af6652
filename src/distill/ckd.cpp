// distill/ckd.cpp: continual knowledge distillation (see ckd.h).
#include "distill/ckd.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fmt/format.h>
#include <functional>
#include <optional>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "common/timer.h"
#include "tclm/error.h"
#include "train/batches.h"
#include "train/losses.h"
#include "train/trainer.h"

namespace tclm {
namespace {


using ScoreFn = std::function<torch::Tensor(const torch::Tensor& x, const torch::Tensor& mask)>;

std::vector<float> score_programs(const ScoreFn& f, const Dataset& data, const std::vector<uint32_t>& programs) {
  torch::NoGradGuard ng;
  std::vector<float> out;
  out.reserve(programs.size());
  std::vector<float> x, mask;
  for (size_t i = 0; i < programs.size(); i += 4096) {
    std::vector<uint32_t> chunk(programs.begin() + i, programs.begin() + std::min(programs.size(), i + 4096));
    const int L = data.featurize(chunk, &x, &mask);
    const auto n = static_cast<int64_t>(chunk.size());
    const auto s = f(torch::from_blob(x.data(), {n, L, kStepFeatureDim}), torch::from_blob(mask.data(), {n, L}))
                       .contiguous();
    out.insert(out.end(), s.data_ptr<float>(), s.data_ptr<float>() + n);
  }
  return out;
}

/// The ranking report of `tasks` of `data`; with N processes each scores the programs it keeps and the
/// scores are combined (DataParallel::sharded).
RankingReport evaluate(const ScoreFn& f, const Dataset& data, const std::vector<uint32_t>& tasks, DataParallel* dist) {
  ProgramScorer scorer = [&](const std::vector<uint32_t>& p) { return score_programs(f, data, p); };
  if (dist != nullptr) scorer = dist->sharded(data, scorer);
  return evaluate_rankings(data, tasks, scorer).back();
}

/// Copies `from` into `to` element by element (same shapes: one module's parameters into another's).
void assign_parameters(const std::vector<torch::Tensor>& to, const std::vector<torch::Tensor>& from) {
  torch::NoGradGuard ng;
  for (size_t i = 0; i < to.size(); ++i) to[i].copy_(from[i]);
}

/// A step's loss: terms that are means over the batch's rows and a term of the parameters alone
/// (backward_loss, train/distributed.h).
struct StepLoss {
  std::vector<LossPart> parts;
  torch::Tensor global;
};

struct FitSpec {
  std::string name;                   // "CL k80": phase and platform, for progress and errors
  torch::nn::Module* module;          // switched between train() and eval()
  std::vector<torch::Tensor> params;  // trained (and snapshotted for the best epoch)
  double lr;
  int epochs;
  // The loss of this process's part of a batch (null: it owns none of the batch's groups; it is still
  // called, on every process alike, so that everything it draws from the data-order RNG stays in step).
  std::function<StepLoss(const BatchTensors* part, int epoch)> loss;
  ScoreFn score;
};

/// Adam with step decay on `train_tasks` of `data`; every epoch runs, and the best one on `eval_tasks`
/// of `eval_data` by o.select is restored. Returns every epoch's validation figures and sets
/// *kept_epoch to the kept one (1-based).
std::vector<EpochLog> fit(const FitSpec& s, const Dataset& data, const std::vector<uint32_t>& train_tasks,
                          const Dataset& eval_data, const std::vector<uint32_t>& eval_tasks, const CkdOptions& o,
                          std::mt19937_64& rng, int* kept_epoch) {
  DataParallel* dist = o.dist && o.dist->world() > 1 ? o.dist.get() : nullptr;
  torch::optim::Adam opt(s.params, torch::optim::AdamOptions(s.lr));
  // A small platform (a sampled budget) gets more epochs so that the phase takes >= min_steps steps;
  // the learning-rate steps stretch in proportion.
  const int64_t steps_per_epoch = std::max<int64_t>(1, count_batches(data, train_tasks, o.batch_size, o.group_size));
  int epochs = s.epochs, lr_step = std::max(1, o.lr_step);
  if (o.min_steps > 0 && steps_per_epoch * epochs < o.min_steps) {
    const int scaled = static_cast<int>((o.min_steps + steps_per_epoch - 1) / steps_per_epoch);
    lr_step = std::max(1, static_cast<int>(std::lround(static_cast<double>(lr_step) * scaled / epochs)));
    epochs = scaled;
  }
  std::vector<torch::Tensor> best;
  std::vector<EpochLog> curve;
  size_t kept = 0;  // index in curve
  const bool tty = o.progress && isatty(fileno(stderr));
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    const double lr = s.lr * std::pow(o.lr_gamma, (epoch - 1) / lr_step);
    for (auto& g : opt.param_groups()) static_cast<torch::optim::AdamOptions&>(g.options()).lr(lr);
    s.module->train();
    const auto t0 = Clock::now();
    auto batches = make_batches(data, train_tasks, o.batch_size, o.group_size, rng);
    double loss_sum = 0;
    int64_t seen = 0;
    for (size_t bi = 0; bi < batches.size(); ++bi) {
      const Batch mine = dist != nullptr ? dist->owned_part(data, batches[bi]) : Batch{};
      const Batch& part = dist != nullptr ? mine : batches[bi];
      std::optional<BatchTensors> bt;
      if (!part.groups.empty()) bt = to_tensors(data, part, o.group_size);
      opt.zero_grad();
      const StepLoss loss = s.loss(bt ? &*bt : nullptr, epoch);
      const double v = backward_loss(loss.parts, loss.global, s.params, dist);
      if (!std::isfinite(v)) {
        throw Error(fmt::format("{}: the loss is {} at epoch {}; lower --lr-cl / --lr-kd or --lambda", s.name, v, epoch));
      }
      if (o.grad_clip > 0) torch::nn::utils::clip_grad_norm_(s.params, o.grad_clip);
      opt.step();
      int64_t n = 0;
      for (const auto& g : batches[bi].groups) n += static_cast<int64_t>(g.size());
      loss_sum += v * static_cast<double>(n);
      seen += n;
      if (tty) {
        std::fprintf(stderr, "\r%s epoch %d/%d  batch %zu/%zu  loss %.4f   ", s.name.c_str(), epoch, epochs, bi + 1,
                     batches.size(), loss_sum / std::max<int64_t>(seen, 1));
        std::fflush(stderr);
      }
    }
    s.module->eval();
    const RankingReport r = evaluate(s.score, eval_data, eval_tasks, dist);
    // The trainer's model selection (TrainOptions::select, train/trainer.h): the same figures, the
    // same tolerances; no warm-up here (step decay), so every epoch is selectable.
    EpochLog e;
    e.epoch = epoch;
    e.valid_top1 = r.top1.task_mean;
    e.valid_top5 = r.top5.task_mean;
    e.valid_pairwise = r.pairwise;
    curve.push_back(e);
    const bool better = best.empty() || better_epoch(o.select, e, curve[kept]);
    if (better) {
      kept = curve.size() - 1;
      best.clear();
      for (const auto& p : s.params) best.push_back(p.detach().clone());
    }
    if (o.progress) {
      std::fprintf(stderr, "%s%s epoch %2d  loss %.5f  valid top-1 %.4f  pairwise %.4f  lr %.1e  %.1f s%s\n",
                   tty ? "\r" : "", s.name.c_str(), epoch, loss_sum / std::max<int64_t>(seen, 1), r.top1.task_mean, r.pairwise,
                   lr, since(t0), better ? "  *" : "");
    }
  }
  assign_parameters(s.params, best);
  s.module->eval();
  *kept_epoch = curve[kept].epoch;
  return curve;
}

}  // namespace

ActiveColumnImpl::ActiveColumnImpl(const WeightsFile& kb_weights) {
  const MambaConfig cfg = MambaConfig::from_json(kb_weights.config_json);
  column = register_module("column", MambaCostModel(cfg));
  load_into_model(kb_weights, column);
  frozen_kb_ = MambaCostModel(cfg);
  load_into_model(kb_weights, frozen_kb_);
  frozen_kb_->eval();
  for (auto& p : frozen_kb_->parameters()) p.set_requires_grad(false);
  const int64_t d = cfg.d_model;
  lateral = register_module("lateral", torch::nn::Linear(d, d));
  torch::NoGradGuard ng;
  lateral->weight.zero_();
  lateral->bias.zero_();
}

torch::Tensor ActiveColumnImpl::forward(const torch::Tensor& x, const torch::Tensor& mask) {
  torch::Tensor k;
  {
    torch::NoGradGuard ng;
    k = frozen_kb_->embed(x, mask);
  }
  return column->head(column->embed(x, mask) + lateral(k));
}

KnowledgeBase::KnowledgeBase(const MambaConfig& cfg_in, uint64_t seed) {
  MambaConfig cfg = cfg_in;
  cfg.n_features = kStepFeatureDim;
  torch::manual_seed(seed);
  model_ = MambaCostModel(cfg);
  model_->init_weights();
  model_->eval();
}

torch::Tensor KnowledgeBase::ewc_penalty() {
  torch::Tensor total = torch::zeros({});
  if (fisher_.empty()) return total;
  const auto params = model_->parameters();
  for (size_t i = 0; i < params.size(); ++i) total = total + (fisher_[i] * (params[i] - anchor_[i]).pow(2)).sum();
  return total;
}

WeightsFile KnowledgeBase::deployable(const std::string& metadata_json) {
  WeightsFile w;
  export_to_weights(*model_, &w);
  w.feature_version = feature_version_;
  w.metadata_json = metadata_json;
  return w;
}

double KnowledgeBase::fisher_mean() const {
  double s = 0;
  int64_t n = 0;
  for (const auto& f : fisher_) {
    s += f.sum().item<double>();
    n += f.numel();
  }
  return n ? s / static_cast<double>(n) : 0.0;
}

std::vector<torch::Tensor> list_fisher(MambaCostModel& model, const Dataset& data, const std::vector<Batch>& batches,
                                       int group_size, DataParallel* dist) {
  if (dist != nullptr && dist->world() == 1) dist = nullptr;
  const auto params = model->parameters();
  std::vector<torch::Tensor> f;
  for (const auto& p : params) f.push_back(torch::zeros_like(p));
  int64_t lists = 0;
  for (const auto& b : batches) {
    for (const auto& g : b.groups) {
      if (dist != nullptr && data.shard_of(data.task_of(g.front())) != dist->rank()) continue;  // another's list
      Batch one;
      one.groups.push_back(g);
      const BatchTensors bt = to_tensors(data, one, group_size);
      // A list whose programs all have the same label has no pair: no loss, no sample of the
      // likelihood (a batch's loss leaves it out of its mean too).
      const auto labels = bt.labels.masked_select(bt.label_mask > 0);
      if (labels.numel() < 2 || (labels.max() - labels.min()).item<float>() <= 0.0f) continue;
      model->zero_grad();
      lambdarank_loss(bt.to_grid(model->forward(bt.x, bt.mask)), bt.labels, bt.label_mask).backward();
      torch::NoGradGuard ng;
      for (size_t i = 0; i < params.size(); ++i) {
        if (params[i].grad().defined()) f[i] += params[i].grad().pow(2);
      }
      ++lists;
    }
  }
  model->zero_grad();
  torch::NoGradGuard ng;
  if (dist != nullptr) {  // the sums and the count of every process's lists
    std::vector<torch::Tensor> flat;
    for (const auto& t : f) flat.push_back(t.reshape({-1}));
    flat.push_back(torch::full({1}, static_cast<float>(lists)));
    torch::Tensor all = torch::cat(flat);
    dist->all_reduce_sum(all, "the Fisher information");
    int64_t off = 0;
    for (auto& t : f) {
      t.copy_(all.slice(0, off, off + t.numel()).reshape(t.sizes()));
      off += t.numel();
    }
    lists = static_cast<int64_t>(std::lround(all[off].item<double>()));
  }
  if (lists > 0) {
    for (auto& t : f) t /= static_cast<double>(lists);
  }
  return f;
}

struct CkdTrainer {
  static CkdPhaseLog learn(KnowledgeBase& kb, const Dataset& data, const std::vector<uint32_t>& train_tasks,
                           const std::vector<uint32_t>& valid_tasks, const std::string& platform,
                           const CkdOptions& o, const std::function<void(const DatasetScorer&)>& after_cl,
                           const EarlierPrograms& earlier, const CandidatePrograms& candidates) {
    if (train_tasks.empty()) throw Error("learn_platform(" + platform + "): no training tasks");
    if (!(o.temperature > 0) || !std::isfinite(o.temperature))
      throw Error(fmt::format("learn_platform({}): the distillation temperature must be finite and > 0 (CL {:g})",
                              platform, o.temperature));
    const uint32_t version = data.feature_version();
    if (!kb.learned_.empty()) check_feature_family(kb.feature_version_, version, "platform " + platform);
    if (train_tasks.front() >= data.tasks().size()) {
      throw Error(fmt::format("learn_platform({}): task {} out of range", platform, train_tasks.front()));
    }
    const std::string& pname = data.platforms()[data.tasks()[train_tasks.front()].platform];
    auto check_one_platform = [&](const Dataset& on, const std::vector<uint32_t>& tasks, const char* what) {
      for (uint32_t t : tasks) {
        if (t >= on.tasks().size()) throw Error(fmt::format("learn_platform({}): {} task {} out of range", platform, what, t));
        const std::string& q = on.platforms()[on.tasks()[t].platform];
        if (q != pname) {
          throw Error(fmt::format("learn_platform({}): {} of platforms '{}' and '{}' mixed; learn one platform at a time",
                                  platform, what, pname, q));
        }
      }
    };
    check_one_platform(data, train_tasks, "tasks");
    check_one_platform(data, valid_tasks, "tasks");
    // What KD distils on: the candidate pool when there is one, else the measured training programs.
    const bool use_candidates = candidates.data != nullptr && !candidates.tasks.empty();
    const Dataset& kd_data = use_candidates ? *candidates.data : data;
    const std::vector<uint32_t>& kd_tasks = use_candidates ? candidates.tasks : train_tasks;
    if (use_candidates) {
      check_feature_family(version, candidates.data->feature_version(), "the candidate programs of " + platform);
      if (candidates.data->shards() != data.shards()) {
        throw Error(fmt::format("learn_platform({}): the candidate programs were loaded as {} shard(s), the "
                                "platform's as {}; load both with the same LoadOptions shard and shards",
                                platform, candidates.data->shards(), data.shards()));
      }
      check_one_platform(*candidates.data, candidates.tasks, "candidate tasks");
    }
    int64_t kd_programs = 0;
    for (uint32_t t : kd_tasks) kd_programs += static_cast<int64_t>(kd_data.tasks()[t].programs.size());
    kb.feature_version_ = version;
    std::mt19937_64 rng(o.seed ^ std::hash<std::string>{}(platform));
    torch::manual_seed(o.seed + kb.learned_.size());
    CkdPhaseLog log;
    log.platform = platform;
    log.kd_programs = kd_programs;
    DataParallel* dist = o.dist && o.dist->world() > 1 ? o.dist.get() : nullptr;
    if (data.shards() != (dist != nullptr ? dist->world() : 1)) {
      throw Error(fmt::format("learn_platform({}): the dataset was loaded as {} shard(s) for {} process(es); load it "
                              "with LoadOptions shard = rank and shards = the number of processes",
                              platform, data.shards(), dist != nullptr ? dist->world() : 1));
    }
    MambaCostModel& model = kb.model_;
    if (dist != nullptr) dist->broadcast_parameters(model->parameters());  // every process starts from rank 0's KB
    ScoreFn kb_score = [&](const torch::Tensor& x, const torch::Tensor& m) { return model->forward(x, m); };
    // The earlier platforms' programs (their labels are not used): one batch of them per step of CL and of KD.
    // CL's teacher of them is the frozen KB, KD's the active column (see the top of ckd.h).
    std::vector<uint32_t> earlier_cl, earlier_kd;
    if (o.earlier_weight > 0 && earlier.data != nullptr && !kb.learned_.empty()) {
      check_feature_family(version, earlier.data->feature_version(), "the earlier platforms' programs for " + platform);
      if (earlier.data->shards() != data.shards()) {
        throw Error(fmt::format("learn_platform({}): the earlier platforms' programs were loaded as {} shard(s), the "
                                "platform's as {}; load both with the same LoadOptions shard and shards",
                                platform, earlier.data->shards(), data.shards()));
      }
      // CL leaves out the workloads this platform has a task of (Task::workload, so a workload whose
      // key another machine spelled otherwise counts as measured): there its labels say how to rank,
      // and the old KB's order, learned on another platform, would contradict them. KD's teacher is
      // the active column, which learned those labels: it takes every earlier workload.
      std::set<std::string> own;
      for (const auto* part : {&train_tasks, &valid_tasks}) {
        for (uint32_t t : *part) own.insert(data.tasks()[t].workload);
      }
      for (uint32_t t : earlier.tasks) {
        if (t >= earlier.data->tasks().size()) {
          throw Error(fmt::format("learn_platform({}): earlier platforms' task {} out of range", platform, t));
        }
        // A task of one program has no order to teach (make_batches would drop it, drawing nothing
        // from the random stream).
        const Task& task = earlier.data->tasks()[t];
        if (task.programs.size() < 2) continue;
        const auto n = static_cast<int64_t>(task.programs.size());
        earlier_kd.push_back(t);
        log.kd_earlier_programs += n;
        if (own.count(task.workload) != 0) continue;
        earlier_cl.push_back(t);
        log.earlier_programs += n;
      }
      log.earlier_tasks = static_cast<int64_t>(earlier_cl.size());
      log.kd_earlier_tasks = static_cast<int64_t>(earlier_kd.size());
    }
    // Each term is a mean over the programs of its batch. Fewer earlier programs than a batch are all of
    // them in every step's batch, each weighing more than one of the platform's programs in its full
    // batch; the weight scales down in proportion, so that no earlier program weighs more in a step.
    auto term_weight = [&](int64_t programs) {
      return programs == 0 ? 0.0
                           : o.earlier_weight * std::min(1.0, static_cast<double>(programs) / static_cast<double>(o.batch_size));
    };
    log.earlier_weight = term_weight(log.earlier_programs);
    log.kd_earlier_weight = term_weight(log.kd_earlier_programs);
    // Their own random stream, so that the platform's batches are drawn as without them.
    std::mt19937_64 earlier_rng(o.seed ^ std::hash<std::string>{}(platform) ^ 0x9e3779b97f4a7c15ull);
    // Batches of a list of earlier tasks, reshuffled whenever they are used up.
    struct EarlierStream {
      std::vector<uint32_t> tasks;
      std::vector<Batch> batches;
      size_t next = 0;
    };
    EarlierStream stream{earlier_cl, {}, 0};
    // The next batch of the stream's programs (this process's part of it; none when it owns none of the
    // batch's groups). Called once per step on every process alike.
    auto next_earlier = [&]() -> std::optional<BatchTensors> {
      if (stream.tasks.empty()) return std::nullopt;
      if (stream.next >= stream.batches.size()) {
        stream.batches = make_batches(*earlier.data, stream.tasks, o.batch_size, o.group_size, earlier_rng);
        stream.next = 0;
      }
      if (stream.batches.empty()) return std::nullopt;
      const Batch& b = stream.batches[stream.next++];
      const Batch mine = dist != nullptr ? dist->owned_part(*earlier.data, b) : Batch{};
      const Batch& part = dist != nullptr ? mine : b;
      if (part.groups.empty()) return std::nullopt;
      return to_tensors(*earlier.data, part, o.group_size);
    };
    // ListwiseKD(student <- teacher) on the stream's next batch, into `part` at `weight`.
    auto earlier_term = [&](LossPart* part, const ScoreFn& teacher, const ScoreFn& student, double weight) {
      const auto eb = next_earlier();
      if (!eb) return;
      torch::Tensor t;
      {
        torch::NoGradGuard ng;
        t = eb->to_grid(teacher(eb->x, eb->mask));
      }
      part->mean = listwise_distill_loss(eb->to_grid(student(eb->x, eb->mask)), t, eb->label_mask, 1.0, &part->normalizer);
      part->weight = weight;
    };

    // ---- Phi from the KB's ranking quality on this platform's (measured) training data: its top-1
    // score (task mean) above a random ranking's, as a fraction of the possible gain.
    model->eval();
    const RankingReport before = evaluate(kb_score, data, train_tasks, dist);
    log.kb_pairwise_before = before.pairwise;
    log.kb_top1_before = before.top1.task_mean;
    const double random_top1 = before.random_top1.task_mean;
    const double gain = random_top1 < 1.0 ? (before.top1.task_mean - random_top1) / (1.0 - random_top1) : 0.0;
    if (kb.learned_.empty()) {
      log.phi = 0.0;
    } else if (!o.dynamic_phi) {
      log.phi = 1.0;
    } else {
      log.phi = std::clamp(gain, o.phi_floor, 1.0);
    }

    // ---- CL: the active column learns the platform, pulled towards the frozen KB by beta * Phi_e.
    // The KB's parameters take no gradient during CL; the guard restores them even if CL throws.
    struct FreezeGuard {
      std::vector<torch::Tensor> params;
      explicit FreezeGuard(std::vector<torch::Tensor> p) : params(std::move(p)) {
        for (auto& t : params) t.set_requires_grad(false);
      }
      ~FreezeGuard() {
        for (auto& t : params) t.set_requires_grad(true);
      }
    };
    std::optional<FreezeGuard> kb_frozen(std::in_place, model->parameters());
    const WeightsFile kb_before = kb.deployable("{}");
    ActiveColumn ac(kb_before);
    ScoreFn ac_score = [&](const torch::Tensor& x, const torch::Tensor& m) { return ac->forward(x, m); };
    auto t0 = Clock::now();
    FitSpec cl{"CL " + platform, ac.get(), ac->parameters(), o.lr_cl, o.epochs_cl,
               [&](const BatchTensors* bt, int epoch) {
                 StepLoss loss;
                 loss.parts.resize(3);
                 earlier_term(&loss.parts[2], kb_score, ac_score, log.earlier_weight);
                 if (bt == nullptr) return loss;
                 const auto s = bt->to_grid(ac->forward(bt->x, bt->mask));
                 loss.parts[0].mean = lambdarank_loss(s, bt->labels, bt->label_mask, &loss.parts[0].normalizer);
                 const double phi_e = log.phi * std::pow(o.phi_decay, epoch - 1);
                 if (o.beta > 0 && phi_e > 0) {
                   torch::Tensor teacher;
                   {
                     torch::NoGradGuard ng;
                     teacher = bt->to_grid(model->forward(bt->x, bt->mask));
                   }
                   loss.parts[1].mean = listwise_distill_loss(s, teacher, bt->label_mask, o.temperature,
                                                              &loss.parts[1].normalizer);
                   loss.parts[1].weight = o.beta * phi_e;
                 }
                 return loss;
               },
               ac_score};
    const std::vector<uint32_t>& eval_tasks = valid_tasks.empty() ? train_tasks : valid_tasks;
    const auto cl_curve = fit(cl, data, train_tasks, data, eval_tasks, o, rng, &log.cl_kept_epoch);
    for (const EpochLog& e : cl_curve) {
      log.cl_valid_top1.push_back(e.valid_top1);
      log.cl_valid_pairwise.push_back(e.valid_pairwise);
    }
    log.ac_valid_top1 = log.cl_valid_top1[log.cl_kept_epoch - 1];
    log.seconds_cl = since(t0);
    kb_frozen.reset();
    if (after_cl) {
      ac->eval();
      after_cl([&](const Dataset& on, const std::vector<uint32_t>& programs) {
        check_feature_family(version, on.feature_version(), "the active column of " + platform);
        ProgramScorer scorer = [&](const std::vector<uint32_t>& p) { return score_programs(ac_score, on, p); };
        if (dist != nullptr) scorer = dist->sharded(on, scorer);
        return scorer(programs);
      });
    }

    // ---- KD: the frozen AC teaches the KB, starting from the KB's own weights; EWC (when lambda > 0)
    // pulls the parameters the Fisher information marks towards their anchors.
    for (auto& p : ac->parameters()) p.set_requires_grad(false);
    // KD's earlier programs: every earlier workload. The same list as CL's (no shared workload) goes on
    // with CL's batches.
    if (earlier_kd != stream.tasks) stream = EarlierStream{earlier_kd, {}, 0};
    t0 = Clock::now();
    FitSpec kd{"KD " + platform, model.get(), model->parameters(), o.lr_kd, o.epochs_kd,
               [&](const BatchTensors* bt, int epoch) {
                 StepLoss loss;
                 loss.parts.resize(2);
                 earlier_term(&loss.parts[1], ac_score, kb_score, log.kd_earlier_weight);
                 if (bt != nullptr) {
                   torch::Tensor teacher;
                   {
                     torch::NoGradGuard ng;
                     ac->eval();
                     teacher = bt->to_grid(ac->forward(bt->x, bt->mask));
                   }
                   const auto s = bt->to_grid(model->forward(bt->x, bt->mask));
                   loss.parts[0].mean = listwise_distill_loss(s, teacher, bt->label_mask, 1.0, &loss.parts[0].normalizer);
                 }
                 if (o.lambda > 0 && kb.has_fisher()) loss.global = o.lambda * kb.ewc_penalty();
                 return loss;
               },
               kb_score};
    const auto kd_curve = fit(kd, kd_data, kd_tasks, data, eval_tasks, o, rng, &log.kd_kept_epoch);
    for (const EpochLog& e : kd_curve) {
      log.kd_valid_top1.push_back(e.valid_top1);
      log.kd_valid_pairwise.push_back(e.valid_pairwise);
    }
    log.kb_valid_top1 = log.kd_valid_top1[log.kd_kept_epoch - 1];
    log.seconds_kd = since(t0);
    {
      ac->eval();
      const RankingReport ac_train = evaluate(ac_score, data, train_tasks, dist),
                         kb_train = evaluate(kb_score, data, train_tasks, dist);
      log.ac_train_top1 = ac_train.top1.task_mean;
      log.kb_train_top1 = kb_train.top1.task_mean;
      log.ac_train_pairwise = ac_train.pairwise;
      log.kb_train_pairwise = kb_train.pairwise;
    }

    // ---- Fisher information of the KB on this platform (empirical, per ranking list), accumulated.
    t0 = Clock::now();
    const auto params = model->parameters();
    model->eval();
    std::vector<torch::Tensor> f_t =
        list_fisher(model, data, make_batches(data, train_tasks, o.batch_size, o.group_size, rng), o.group_size, dist);
    {
      torch::NoGradGuard ng;
      if (kb.fisher_.empty()) {
        kb.fisher_ = f_t;
      } else {
        for (size_t i = 0; i < params.size(); ++i) kb.fisher_[i] = o.fisher_gamma * kb.fisher_[i] + f_t[i];
      }
      kb.anchor_.clear();
      for (const auto& p : params) kb.anchor_.push_back(p.detach().clone());
    }
    log.seconds_fisher = since(t0);
    log.fisher_mean = kb.fisher_mean();
    kb.learned_.push_back(platform);
    return log;
  }
};

CkdPhaseLog learn_platform(KnowledgeBase& kb, const Dataset& data, const std::vector<uint32_t>& train_tasks,
                           const std::vector<uint32_t>& valid_tasks, const std::string& platform,
                           const CkdOptions& options, const std::function<void(const DatasetScorer&)>& after_cl,
                           const EarlierPrograms& earlier, const CandidatePrograms& candidates) {
  return CkdTrainer::learn(kb, data, train_tasks, valid_tasks, platform, options, after_cl, earlier, candidates);
}

std::string to_json(const CkdPhaseLog& l) {
  const nlohmann::ordered_json j = {
      {"platform", l.platform},
      {"phi", l.phi},
      {"kb_top1_before", l.kb_top1_before},
      {"kb_pairwise_before", l.kb_pairwise_before},
      {"cl_valid_top1", l.cl_valid_top1},
      {"kd_valid_top1", l.kd_valid_top1},
      {"cl_valid_pairwise", l.cl_valid_pairwise},
      {"kd_valid_pairwise", l.kd_valid_pairwise},
      {"cl_kept_epoch", l.cl_kept_epoch},
      {"kd_kept_epoch", l.kd_kept_epoch},
      {"kd_programs", l.kd_programs},
      {"earlier_tasks", l.earlier_tasks},
      {"earlier_programs", l.earlier_programs},
      {"earlier_weight", l.earlier_weight},
      {"kd_earlier_tasks", l.kd_earlier_tasks},
      {"kd_earlier_programs", l.kd_earlier_programs},
      {"kd_earlier_weight", l.kd_earlier_weight},
      {"ac_valid_top1", l.ac_valid_top1},
      {"kb_valid_top1", l.kb_valid_top1},
      {"ac_train_top1", l.ac_train_top1},
      {"kb_train_top1", l.kb_train_top1},
      {"ac_train_pairwise", l.ac_train_pairwise},
      {"kb_train_pairwise", l.kb_train_pairwise},
      {"seconds_cl", l.seconds_cl},
      {"seconds_kd", l.seconds_kd},
      {"seconds_fisher", l.seconds_fisher},
      {"fisher_mean", l.fisher_mean}};
  return j.dump();
}

}  // namespace tclm
