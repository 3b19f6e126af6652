#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <numeric>
#include <random>
#include <thread>
#include <unistd.h>

#include "common/enum_names.h"
#include "common/bytes.h"
#include "common/timer.h"
#include "tclm/error.h"
#include "train/batches.h"
#include "train/checkpoint.h"
#include "train/losses.h"

namespace tclm {

namespace {

int64_t warmup_steps(double warmup_fraction, int64_t total) {
  return std::max<int64_t>(1, static_cast<int64_t>(warmup_fraction * static_cast<double>(total)));
}

double lr_at(const TrainOptions& o, int64_t step, int64_t total) {
  const auto warm = warmup_steps(o.warmup_fraction, total);
  if (step < warm) return o.lr * static_cast<double>(step + 1) / static_cast<double>(warm);
  double p = static_cast<double>(step - warm) / std::max<double>(1.0, static_cast<double>(total - warm));
  p = std::min(1.0, p);
  const double floor = o.lr * o.final_lr_fraction;
  return floor + (o.lr - floor) * 0.5 * (1.0 + std::cos(M_PI * p));
}

std::string log_json(const std::vector<EpochLog>& log, int best_epoch) {
  nlohmann::json epochs = nlohmann::json::array();
  for (const EpochLog& e : log) {
    epochs.push_back({{"epoch", e.epoch},
                      {"train_loss", e.train_loss},
                      {"valid_top1", e.valid_top1},
                      {"valid_top5", e.valid_top5},
                      {"valid_pairwise", e.valid_pairwise},
                      {"lr", e.lr},
                      {"seconds", e.seconds},
                      {"samples_per_second", e.samples_per_second},
                      {"comm_seconds", e.comm_seconds},
                      {"wait_seconds", e.wait_seconds}});
  }
  return nlohmann::json{{"best_epoch", best_epoch}, {"epochs", epochs}}.dump(2) + "\n";
}

void check_finite(double loss, int epoch, int64_t step) {
  if (!std::isfinite(loss)) {
    throw Error(fmt::format(
        "training diverged: the loss is {} at epoch {} step {}; lower --lr, or check the data for "
        "extreme costs (tclm info)",
        loss, epoch, step));
  }
}

}  // namespace

double batch_gradient(CostModelImpl& model, const Dataset& data, const Batch& batch, int group_size, Loss loss,
                      DataParallel* dist) {
  if (dist != nullptr && dist->world() == 1) dist = nullptr;
  // This process's part of the batch: all of it, or the groups of the tasks it owns.
  const Batch mine = dist != nullptr ? dist->owned_part(data, batch) : Batch{};
  const Batch& part = dist != nullptr ? mine : batch;
  LossPart term;
  if (!part.groups.empty()) {
    BatchTensors bt = to_tensors(data, part, group_size);
    model.set_platform(data.tasks()[data.task_of(part.groups.front().front())].platform);
    auto grid = bt.to_grid(model.forward(bt.x, bt.mask));
    term.mean = loss == Loss::kMse ? mse_loss(grid, bt.labels, bt.label_mask, &term.normalizer)
                                   : lambdarank_loss(grid, bt.labels, bt.label_mask, &term.normalizer);
  }
  return backward_loss({term}, torch::Tensor(), model.parameters(), dist);
}

const std::vector<std::string>& loss_names() {
  static const std::vector<std::string> names = {"lambdarank", "mse"};
  return names;
}

Loss parse_loss(const std::string& name, const std::string& what) {
  return enum_from_name<Loss>(loss_names(), name, "loss", what);
}

const std::string& to_string(Loss loss) { return enum_name(loss_names(), loss); }

int first_selectable_epoch(int64_t steps_per_epoch, int64_t total_steps, double warmup_fraction) {
  const int64_t warm = warmup_steps(warmup_fraction, total_steps);
  const int64_t spe = std::max<int64_t>(1, steps_per_epoch);
  return static_cast<int>((warm + spe - 1) / spe);
}

void set_threads(int threads) {
  int n = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  torch::set_num_threads(n);
}

std::vector<float> predict_programs(CostModelImpl& model, const Dataset& data,
                                    const std::vector<uint32_t>& programs, int batch) {
  torch::NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  std::vector<float> out;
  out.reserve(programs.size());
  std::vector<float> x, mask;
  for (size_t i = 0; i < programs.size();) {
    // A chunk: up to `batch` programs of one platform (multi-platform models pick a head per platform).
    const int platform = data.tasks()[data.task_of(programs[i])].platform;
    size_t e = i + 1;
    while (e < programs.size() && e - i < static_cast<size_t>(batch) &&
           data.tasks()[data.task_of(programs[e])].platform == platform) {
      ++e;
    }
    std::vector<uint32_t> chunk(programs.begin() + i, programs.begin() + e);
    i = e;
    model.set_platform(platform);
    const int L = data.featurize(chunk, &x, &mask);
    const auto n = static_cast<int64_t>(chunk.size());
    auto xt = torch::from_blob(x.data(), {n, L, kStepFeatureDim}, torch::kFloat32);
    auto mt = torch::from_blob(mask.data(), {n, L}, torch::kFloat32);
    auto s = model.forward(xt, mt).contiguous();
    out.insert(out.end(), s.data_ptr<float>(), s.data_ptr<float>() + n);
  }
  if (was_training) model.train();
  return out;
}

CostModel make_cost_model(const TrainOptions& o, int n_platforms) {
  const std::string& kind = to_string(o.model_kind);
  if (o.model_kind == ModelKind::kMambaMtl) {
    MambaConfig m = o.model;
    m.n_features = kStepFeatureDim;
    return make_cost_model(kind, fmt::format("{{\"mamba\": {}, \"platforms\": {}}}", m.to_json(), n_platforms));
  }
  if (o.model_kind == ModelKind::kMamba) {
    MambaConfig m = o.model;
    m.n_features = kStepFeatureDim;
    return make_cost_model(kind, m.to_json());
  }
  BaselineConfig b = o.baseline;
  b.n_features = kStepFeatureDim;
  return make_cost_model(kind, b.resolved(kind).to_json(), kStepFeatureDim);
}

TrainResult train_cost_model(const Dataset& data, const Split& split, const TrainOptions& o_in) {
  TrainOptions o = o_in;
  o.model.n_features = kStepFeatureDim;
  DataParallel* dist = o.dist && o.dist->world() > 1 ? o.dist.get() : nullptr;
  const bool writer = dist == nullptr || dist->rank() == 0;  // writes out_dir and the progress display
  if (data.shards() != (dist != nullptr ? dist->world() : 1)) {
    throw Error(fmt::format("the dataset was loaded as {} shard(s) for {} training process(es); load it with "
                            "LoadOptions shard = rank and shards = the number of processes",
                            data.shards(), dist != nullptr ? dist->world() : 1));
  }
  o.progress = o.progress && writer;
  if (o.group_size < 2) throw Error("--group-size must be >= 2");
  if (o.batch_size < o.group_size) {
    throw Error(fmt::format("--batch-size {} must be >= --group-size {}; raise --batch-size or lower --group-size",
                            o.batch_size, o.group_size));
  }
  if (split.train.empty()) {
    throw Error(fmt::format(
        "no training tasks: the data has {} tasks ({} with fewer than 2 valid programs, left out); give more records "
        "per workload (-d) or lower --test-fraction / --valid-fraction",
        data.tasks().size(), split.too_small));
  }
  set_threads(o.threads);
  torch::manual_seed(o.seed);
  std::mt19937_64 rng(o.seed ^ 0x5eedULL);

  const uint32_t feature_version = data.feature_version();
  CostModel model = make_cost_model(o, static_cast<int>(data.platforms().size()));
  if (o.init) {
    check_feature_family(o.init->feature_version, feature_version, "the initial model (--init)");
    load_into_model(*o.init, *model);
  }
  std::vector<torch::optim::OptimizerParamGroup> param_groups;
  param_groups.emplace_back(model->decay_parameters(),
                            std::make_unique<torch::optim::AdamOptions>(torch::optim::AdamOptions(o.lr).weight_decay(o.weight_decay)));
  param_groups.emplace_back(model->no_decay_parameters(),
                            std::make_unique<torch::optim::AdamOptions>(torch::optim::AdamOptions(o.lr).weight_decay(0.0)));
  torch::optim::Adam opt(std::move(param_groups), torch::optim::AdamOptions(o.lr));

  if (!o.out_dir.empty() && writer) {
    std::error_code ec;
    std::filesystem::create_directories(o.out_dir, ec);
    if (ec || !std::filesystem::is_directory(o.out_dir, ec)) {
      throw Error(fmt::format("--out '{}' cannot be used as an output directory{}; remove what is in the way or choose "
                              "another --out", o.out_dir, ec ? " (" + ec.message() + ")" : ""));
    }
  }
  // The validation set picks the epoch; without one, the training tasks do (reported as such).
  const std::vector<uint32_t>& valid_tasks = split.valid.empty() ? split.train : split.valid;
  if (split.valid.empty() && o.progress) {
    std::fprintf(stderr, "warning: no validation tasks (raise --valid-fraction or use more workloads); "
                         "early stopping and \"valid\" figures use the training tasks\n");
  }

  const int64_t steps_per_epoch = std::max<int64_t>(1, count_batches(data, split.train, o.batch_size, o.group_size));
  // Small datasets (a sampled budget) get more epochs, so that every run takes at least min_steps
  // optimizer steps; patience grows in proportion.
  if (o.min_steps > 0 && steps_per_epoch * o.epochs < o.min_steps) {
    const int epochs = static_cast<int>((o.min_steps + steps_per_epoch - 1) / steps_per_epoch);
    o.patience = static_cast<int>(std::ceil(static_cast<double>(o.patience) * epochs / o.epochs));
    o.epochs = epochs;
  }
  const int64_t total_steps = steps_per_epoch * o.epochs;

  // Training state; a checkpoint holds all of it (train/checkpoint.h).
  TrainerState st;
  st.threads = torch::get_num_threads();
  st.fingerprint = training_fingerprint(o, model->config_json(), data, split);
  st.rng = rng_to_string(rng);
  TrainResult result;
  const std::string ckpt_path = o.out_dir.empty() ? "" : (std::filesystem::path(o.out_dir) / "checkpoint.tclm").string();
  if (o.resume) {
    if (ckpt_path.empty()) throw Error("resuming needs an output directory (--out) holding checkpoint.tclm");
    if (!std::filesystem::exists(ckpt_path)) {
      throw Error(fmt::format("{}: no checkpoint to resume from; run without --resume to start training", ckpt_path));
    }
    const int threads = st.threads;
    st = load_checkpoint(ckpt_path, st.fingerprint, *model, opt, &result.best);
    if (st.threads != threads) {
      std::fprintf(stderr, "warning: the checkpoint was written with %d threads, this run has %d; the result may "
                           "differ in the last bits from an uninterrupted run\n", st.threads, threads);
    }
    st.threads = threads;
    {  // always said, --quiet or not: the run's output depends on it
      std::fprintf(stderr, "resuming from %s: epoch %d, batch %lld, step %lld%s\n", ckpt_path.c_str(), st.epoch,
                   static_cast<long long>(st.batch), static_cast<long long>(st.step),
                   st.finished ? " (the run had finished)" : "");
    }
  }
  if (dist != nullptr) {
    // Every process must train on the same data with the same options: compare with rank 0's.
    dist->check_same(st.fingerprint, "training");
    dist->broadcast_parameters(model->parameters());
  }
  result.log = st.log;
  result.best_epoch = st.best_epoch;
  result.best_valid_top1 = st.best_valid_top1;
  auto checkpoint = [&]() {
    if (ckpt_path.empty() || !writer) return;
    st.log = result.log;
    save_checkpoint(ckpt_path, st, *model, opt, result.best, feature_version);
  };
  auto t_start = Clock::now();
  const bool tty = o.progress && isatty(fileno(stderr));
  for (; !st.finished && st.epoch <= o.epochs;) {
    const int epoch = st.epoch;
    auto t0 = Clock::now();
    auto t_ckpt = Clock::now();
    const double seconds_before = st.epoch_seconds;  // of this epoch, before a resume
    model->train();
    // The batches of this epoch are drawn from this state (saved in checkpoints, checked when loaded).
    if (!rng_from_string(st.rng, &rng)) throw InternalError("cannot restore the data-order RNG state");
    auto batches = make_batches(data, split.train, o.batch_size, o.group_size, rng);
    if (st.batch > static_cast<int64_t>(batches.size())) {
      throw Error(fmt::format("{}: batch {} of epoch {} does not exist (the epoch has {})", ckpt_path, st.batch, epoch,
                              batches.size()));
    }
    const double comm_before = dist != nullptr ? dist->comm_seconds() : 0.0;
    const double wait_before = dist != nullptr ? dist->wait_seconds() : 0.0;
    for (size_t bi = static_cast<size_t>(st.batch); bi < batches.size(); ++bi) {
      const double lr = lr_at(o, st.step, total_steps);
      for (auto& g : opt.param_groups()) static_cast<torch::optim::AdamOptions&>(g.options()).lr(lr);
      int64_t n = 0;
      for (const auto& g : batches[bi].groups) n += static_cast<int64_t>(g.size());
      opt.zero_grad();
      const double loss_value = batch_gradient(*model, data, batches[bi], o.group_size, o.loss, dist);
      check_finite(loss_value, epoch, st.step);
      if (o.grad_clip > 0) torch::nn::utils::clip_grad_norm_(model->parameters(), o.grad_clip);
      opt.step();
      st.loss_sum += loss_value * static_cast<double>(n);
      st.seen += n;
      ++st.step;
      st.batch = static_cast<int64_t>(bi) + 1;
      if (tty) {
        std::fprintf(stderr, "\repoch %d/%d  batch %zu/%zu  loss %.4f  %.0f programs/s   ", epoch, o.epochs, bi + 1,
                     batches.size(), st.loss_sum / std::max<int64_t>(st.seen, 1),
                     st.seen / std::max(seconds_before + since(t0), 1e-9));
        std::fflush(stderr);
      }
      if (bi + 1 < batches.size() && !ckpt_path.empty() && since(t_ckpt) >= o.checkpoint_seconds) {
        st.epoch_seconds = seconds_before + since(t0);
        checkpoint();
        t_ckpt = Clock::now();
      }
    }
    const double train_seconds = seconds_before + since(t0);
    ProgramScorer scorer = [&](const std::vector<uint32_t>& progs) { return predict_programs(*model, data, progs); };
    if (dist != nullptr) scorer = dist->sharded(data, scorer);
    auto reports = evaluate_rankings(data, valid_tasks, scorer);
    const RankingReport& all = reports.back();
    EpochLog e;
    e.epoch = epoch;
    e.train_loss = st.loss_sum / std::max<int64_t>(st.seen, 1);
    e.valid_top1 = all.top1.task_mean;
    e.valid_top5 = all.top5.task_mean;
    e.lr = lr_at(o, std::max<int64_t>(st.step - 1, 0), total_steps);
    e.seconds = seconds_before + since(t0);
    e.samples_per_second = static_cast<double>(st.seen) / std::max(train_seconds, 1e-9);
    e.valid_pairwise = all.pairwise;
    e.comm_seconds = dist != nullptr ? dist->comm_seconds() - comm_before : 0.0;
    e.wait_seconds = dist != nullptr ? dist->wait_seconds() - wait_before : 0.0;
    result.log.push_back(e);
    if (o.on_epoch) o.on_epoch(e, *model);
    // Better = a higher selection key (selection_key: by default the validation pairwise accuracy).
    //
    // An epoch that ends inside the learning-rate warm-up is kept only until the first epoch after it:
    // with a small validation set (a sampled budget: 10% of a few tasks) a barely trained model's
    // top-1 is often high by luck, and keeping it (and stopping `patience` epochs later) made some
    // 10% runs score below a random ranking (docs/experiments/sampler.md, "Collapsed runs").
    const int first_selectable = first_selectable_epoch(steps_per_epoch, total_steps, o.warmup_fraction);
    const bool selectable = epoch >= first_selectable;
    const bool best_selectable = result.best_epoch >= first_selectable;  // first_selectable >= 1
    bool better = result.best_epoch == 0 || (selectable && !best_selectable);
    if (!better) {
      const auto kept = std::find_if(result.log.begin(), result.log.end(),
                                     [&](const EpochLog& x) { return x.epoch == result.best_epoch; });
      if (kept == result.log.end()) throw InternalError("the kept epoch is not in the training log");
      better = better_epoch(o.select, e, *kept);
    }
    if (better) {
      result.best_valid_top1 = e.valid_top1;
      result.best_epoch = epoch;
      result.best = WeightsFile{};
      export_to_weights(*model, &result.best);
      result.best.feature_version = feature_version;
      const nlohmann::json metadata = {{"epoch", epoch},
                                       {"valid_top1", e.valid_top1},
                                       {"valid_top5", e.valid_top5},
                                       {"loss", to_string(o.loss)},
                                       {"seed", o.seed},
                                       {"extra", o.metadata}};
      result.best.metadata_json = metadata.dump();
    }
    st.since_best = better ? 0 : st.since_best + 1;
    st.best_valid_top1 = result.best_valid_top1;
    st.best_epoch = result.best_epoch;
    if (o.progress) {
      std::fprintf(stderr, "%sepoch %3d  loss %.5f  valid top-1 %.4f  top-5 %.4f  pairwise %.4f  lr %.2e  %.1f s  %.0f programs/s%s\n",
                   tty ? "\r" : "", epoch, e.train_loss, e.valid_top1, e.valid_top5, e.valid_pairwise, e.lr, e.seconds,
                   e.samples_per_second, better ? "  *" : "");
    }
    const bool early_stop = st.since_best >= o.patience;
    // The next epoch starts from here: its batches are drawn from the RNG as it is now.
    st.epoch = epoch + 1;
    st.batch = 0;
    st.loss_sum = 0;
    st.seen = 0;
    st.epoch_seconds = 0;
    st.rng = rng_to_string(rng);
    st.finished = early_stop || st.epoch > o.epochs;
    if (!o.out_dir.empty() && writer) {
      // best.tclm first: the checkpoint is the commit point, and a resumed run rewrites best.tclm anyway.
      if (better) save_weights(result.best, (std::filesystem::path(o.out_dir) / "best.tclm").string());
      write_file_atomic((std::filesystem::path(o.out_dir) / "train_log.json").string(),
                        log_json(result.log, result.best_epoch));
      checkpoint();
    }
    if (early_stop && o.progress) {
      std::fprintf(stderr, "early stop: no better validation %s for %d epochs\n", selection_figure(o.select), o.patience);
    }
  }
  if (o.resume && !o.out_dir.empty() && writer && result.best_epoch > 0) {
    // A run killed between its checkpoint and best.tclm (or resumed after it finished) leaves best.tclm
    // behind the checkpoint's best model: write it again.
    save_weights(result.best, (std::filesystem::path(o.out_dir) / "best.tclm").string());
  }
  result.seconds = since(t_start);
  return result;
}

}  // namespace tclm
