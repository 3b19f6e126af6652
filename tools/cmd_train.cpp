// tools/cmd_train.cpp: `tclm train` (train a cost model, report it on the held-out test tasks) and
// `tclm export` (check a checkpoint and write it as a deployable weights file).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <iostream>
#include <memory>
#include <unistd.h>

#include "cli_common.h"
#include "common/bytes.h"
#include "tclm/infer.h"
#include "tclm/weights.h"
#include "train/trainer.h"

namespace tclm::cli {
namespace {

struct TrainCommandOptions {
  DataOptions data;
  TrainOptions train;
  std::string out = "out/model";
  std::string init;
  bool quiet = false;
  double checkpoint_minutes = 10;
  double dist_timeout = 300;

  void add_to(CLI::App* cmd) {
    data.add_to(cmd, true);
    TrainOptions& to = train;
    cmd->add_option("-o,--out", out, "Output directory: best.tclm, checkpoint.tclm, train_log.json, report.json, test_tasks.csv");
    add_enum_option(cmd, "--model", &to.model_kind, cost_model_kinds(), parse_model_kind,
                    "Cost model: mamba (TCL), or a baseline: attention (TLP-style), lstm, mlp (pooled steps); "
                    "'tclm compare' also trains xgboost");
    cmd->add_option("--d-model", to.model.d_model, "Model width (baselines: --hidden)")->check(CLI::Range(4, 4096));
    cmd->add_option("--hidden", to.baseline.d_model, "Baseline width (0 = its default: attention 256, lstm 128, mlp 256)")
        ->check(CLI::Range(0, 4096));
    cmd->add_option("--baseline-layers", to.baseline.n_layers,
                    "Baseline depth (0 = default: attention residual blocks 2, lstm layers 1, mlp hidden layers 2)")
        ->check(CLI::Range(0, 64));
    cmd->add_option("--heads", to.baseline.n_heads, "Attention heads (attention baseline)")->check(CLI::Range(1, 64));
    cmd->add_option("--n-layers", to.model.n_layers, "Mamba blocks")->check(CLI::Range(1, 64));
    cmd->add_option("--d-state", to.model.d_state, "SSM state size N")->check(CLI::Range(1, 256));
    cmd->add_option("--d-conv", to.model.d_conv, "Causal conv width")->check(CLI::Range(1, 64));
    cmd->add_option("--expand", to.model.expand, "Inner width = expand * d_model")->check(CLI::Range(1, 16));
    add_enum_option(cmd, "--loss", &to.loss, loss_names(), parse_loss, "lambdarank (within tasks) or mse");
    cmd->add_option("--epochs", to.epochs, "Maximum epochs")->check(CLI::Range(1, 100000));
    cmd->add_option("--batch-size", to.batch_size, "Programs per batch")->check(CLI::Range(2, 1 << 20));
    cmd->add_option("--group-size", to.group_size, "Programs of one task per ranking group")->check(CLI::Range(2, 4096));
    cmd->add_option("--lr", to.lr, "Peak learning rate (Adam)")->check(CLI::Range(1e-7, 1.0));
    cmd->add_option("--patience", to.patience, "Early stopping: epochs without a better validation figure (--select)")
        ->check(CLI::Range(1, 100000));
    add_select_option(cmd, &to.select);
    cmd->add_option("--seed", to.seed, "Seed of initialisation and batch order")->check(kNonNegativeInteger);
    cmd->add_option("--threads", to.threads, "Threads (0 = all cores)")->check(CLI::Range(0, 4096));
    cmd->add_flag("--quiet", quiet, "No progress display");
    cmd->add_option("--init", init,
                    "Start from this Mamba model's weights (a .tclm file; its architecture replaces --d-model etc.): "
                    "fine-tuning, e.g. a tuner's model on newly measured programs")
        ->check(CLI::ExistingFile);
    cmd->add_flag("--resume", to.resume,
                  "Continue an interrupted run from OUT/checkpoint.tclm (same data and options; refused otherwise): "
                  "the result is the one the uninterrupted run would have given");
    cmd->add_option("--checkpoint-minutes", checkpoint_minutes,
                    "Also write OUT/checkpoint.tclm inside an epoch every this many minutes (0 = after every batch); "
                    "one is always written at the end of each epoch")
        ->check(CLI::Range(0.0, 1e6));
    cmd->add_option("--dist-timeout", dist_timeout,
                    "Data-parallel training (N processes, started with WORLD_SIZE, RANK, MASTER_ADDR and MASTER_PORT "
                    "set, e.g. by scripts/dist-run.sh; docs/distributed.md): seconds a process waits for the others "
                    "(to join, and in each all-reduce) before it stops with an error")
        ->check(CLI::Range(1.0, 1e6));
  }
};

/// --init: the starting model's weights and architecture replace the options'.
void apply_init(const std::string& path, TrainOptions* to) {
  auto w = std::make_shared<WeightsFile>(load_weights(path));
  if (w->model_kind != kMambaModelKind) {
    throw Error(fmt::format("--init {}: a {} model; fine-tuning starts from Mamba models only", path, w->model_kind));
  }
  const std::string what = "--init " + path;
  check_feature_version(*w, what);
  check_finite_parameters(*w, what);
  to->model_kind = ModelKind::kMamba;
  try {
    to->model = MambaConfig::from_json(w->config_json);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", what, e.what()));
  }
  to->init = std::move(w);
}

/// What the training run stores in the model's metadata ("extra"): its data ([PLATFORM=]PATH as -d
/// takes it) and split, so that `tclm eval` and `tclm predict` can use the same ones.
nlohmann::json train_metadata(const DataOptions& data) {
  nlohmann::json sources = nlohmann::json::array();
  for (const auto& src : data.resolve()) sources.push_back(src.platform.empty() ? src.path : src.platform + "=" + src.path);
  return {{"data", sources},
          {"split", data.split},
          {"split_seed", data.split_seed},
          {"test_fraction", data.test_fraction},
          {"valid_fraction", data.valid_fraction},
          {"tuning_split", data.tuning_split},
          {"max_steps", data.max_steps}};
}

int run_train(TrainCommandOptions o) {
  TrainOptions& to = o.train;
  // Data-parallel: this process is one of WORLD_SIZE; rank 0 writes --out and reports.
  DistOptions dist = DistOptions::from_env();
  dist.timeout_seconds = o.dist_timeout;
  const bool writer = dist.rank == 0;
  // The files written into --out, each refused when it is an input (e.g. --init OUT/best.tclm).
  std::vector<PathOption> inputs = data_inputs(o.data.sources), outputs = {{"--out", o.out}};
  if (!o.init.empty()) inputs.push_back({"--init", o.init});
  for (const char* f : {"best.tclm", "checkpoint.tclm", "train_log.json", "report.json", "test_tasks.csv"}) {
    if (to.resume && std::string(f) == "checkpoint.tclm") continue;  // --resume reads it back on purpose
    outputs.push_back({"--out", (std::filesystem::path(o.out) / f).string()});
  }
  check_outputs(inputs, outputs);
  if (!o.init.empty()) apply_init(o.init, &to);
  to.progress = !o.quiet && writer;
  to.out_dir = o.out;
  to.checkpoint_seconds = o.checkpoint_minutes * 60.0;
  if (writer) claim_output_dir(o.out, "train");
  std::error_code fs_ec;
  if (!to.resume && std::filesystem::exists(std::filesystem::path(o.out) / "checkpoint.tclm", fs_ec) && to.progress) {
    std::fprintf(stderr, "note: %s/checkpoint.tclm exists and will be replaced; --resume continues it instead\n",
                 o.out.c_str());
  }
  if (dist.world > 1) {
    to.dist = std::make_shared<DataParallel>(dist);
    o.data.shard = dist.rank;
    o.data.shards = dist.world;
    if (writer && !o.quiet) {
      std::fprintf(stderr, "data-parallel training: %d processes joined at %s:%d; each keeps the steps of its "
                           "shard of the tasks\n", dist.world, dist.master_addr.c_str(), dist.master_port);
    }
  }
  Dataset d = o.data.load(to.progress && isatty(fileno(stderr)), false);  // info_text lists what was left out
  if (writer) std::cerr << info_text(d) << "\n";
  Split s = make_split(d, o.data.split_options());
  if (writer) print_split(d, s);
  to.metadata = train_metadata(o.data);
  if (s.test.empty() && writer) {
    std::fprintf(stderr, "warning: the split has no test task (%zu tasks): the held-out report will be empty; raise "
                         "--test-fraction or change --split-seed\n", d.tasks().size());
  }

  TrainResult r = train_cost_model(d, s, to);

  CostModel model = load_cost_model(r.best, "best model");
  ProgramScorer scorer = [&](const std::vector<uint32_t>& p) { return predict_programs(model, d, p); };
  if (to.dist) scorer = to.dist->sharded(d, scorer);
  std::vector<TaskResult> per_task;
  auto reports = evaluate_rankings(d, s.test, scorer, &per_task);
  if (!writer) return 0;
  std::fprintf(stderr, "trained %zu epochs in %.1f s; best epoch %d (valid top-1 %.4f); model: %s/best.tclm\n",
               r.log.size(), r.seconds, r.best_epoch, r.best_valid_top1, o.out.c_str());
  write_file_atomic(o.out + "/test_tasks.csv", per_task_csv(per_task));
  std::cout << "\nheld-out test tasks (never seen in training):\n" << format_reports(reports);
  nlohmann::json report = {{"test", reports_json_value(reports)}, {"best_epoch", r.best_epoch},
                           {"seconds", std::round(r.seconds * 10) / 10}, {"train_tasks", s.train.size()},
                           {"valid_tasks", s.valid.size()}, {"test_tasks", s.test.size()}};
  if (dist.world > 1) report["processes"] = dist.world;
  write_file_atomic(o.out + "/report.json", dump_json(report));
  std::cout << "report: " << o.out << "/report.json\n";
  return 0;
}

}  // namespace

Command add_train_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "train", "Train a cost model (Mamba by default; --model for a baseline) and report top-1/top-5 on held-out tasks");
  cmd->option_defaults()->always_capture_default();
  auto o = std::make_shared<TrainCommandOptions>();
  o->add_to(cmd);
  return Command{cmd, [o]() { return run_train(*o); }};
}

Command add_export_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "export", "Check a checkpoint or weights file (it must load in the inference engine) and write it as a "
                "deployable weights file, atomically");
  auto in = std::make_shared<std::string>(), out = std::make_shared<std::string>();
  cmd->add_option("-c,--checkpoint", *in, "Checkpoint or weights file (.tclm), e.g. out/model/checkpoint.tclm")
      ->required();
  cmd->add_option("-o,--out", *out, "Output weights file ('-' = stdout)")->required();
  return Command{cmd, [in, out]() {
                   check_outputs({{"--checkpoint", *in}}, {{"--out", *out}});
                   WeightsFile w = without_training_state(load_weights(*in));  // a checkpoint's optimizer state etc. go
                   CostModelEngine engine(w, *in);  // the deployable path must accept it
                   write_output(*out, serialize_weights(w));
                   std::fprintf(*out == "-" ? stderr : stdout, "%s: %s model, feature encoding v%u, %lld parameters (%.3f MB) -> %s\n", in->c_str(),
                               w.model_kind.c_str(), w.feature_version, static_cast<long long>(w.num_parameters()),
                               w.num_parameters() * 4.0 / 1e6, out->c_str());
                   return 0;
                 }};
}

}  // namespace tclm::cli
