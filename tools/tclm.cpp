// tools/tclm.cpp: the tclm command-line tool.
//
//   tclm info     dataset statistics per platform (records, tasks, errors, skipped lines)
//   tclm train    train a Mamba cost model, evaluate it on held-out tasks
//   tclm eval     evaluate a trained model on the held-out tasks of a dataset
//   tclm predict  score the records of a file (JSON or CSV out)
//   tclm export   check a checkpoint and write it as a deployable weights file
//   tclm compare  Mamba against the baselines (tools/cmd_compare.cpp)
//   tclm sweep    Mamba hyper-parameter study (tools/cmd_compare.cpp)
//   tclm sample   choose which candidate programs to measure (tools/cmd_sample.cpp)
//   tclm study-sampling  samplers x rates x seeds (tools/cmd_sample.cpp)
//   tclm transfer the TCL pipeline across platforms (tools/cmd_transfer.cpp)
// Exit codes: 0 success, 1 bad input or failure (the message says which file/option), 2 usage.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <fmt/format.h>
#include <iostream>
#include <optional>
#include <simdjson.h>
#include <unistd.h>

#include "common/bytes.h"
#include "tclm/dataset.h"
#include "tclm/error.h"
#include "tclm/evaluation.h"
#include "tclm/infer.h"
#include "tclm/weights.h"
#include "cli_common.h"
#include "train/trainer.h"

using namespace tclm;

using namespace tclm::cli;

int main(int argc, char** argv) {
  // libgomp reads OMP_WAIT_POLICY when it is loaded, before main. Its default (spinning waiters)
  // fights OpenBLAS's threads for the cores and costs 15-25% of a training step on 2 cores
  // (docs/benchmarks.md), so re-execute once with the passive policy unless the user chose one.
  if (std::getenv("OMP_WAIT_POLICY") == nullptr) {
    ::setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    ::execv("/proc/self/exe", argv);  // returns only on failure: then go on with the default
  }
  CLI::App app{
      "tclm: a learned, cross-hardware cost model for tensor programs (TCL).\n"
      "Reads Ansor measure records, trains a Mamba model on transform-step sequences and ranks candidate\n"
      "programs of a task. Run 'tclm COMMAND --help' for each command."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tclm 0.1.0 (feature encoding v" + std::to_string(kFeatureVersion) + ")");

  // ---- info
  auto* info = app.add_subcommand("info", "Dataset statistics per platform: records, programs, tasks, errors, skipped lines");
  DataOptions info_data;
  info_data.add_to(info, false);
  std::string info_json_path;
  info->add_option("--json", info_json_path, "Also write the statistics as JSON to this file ('-' = stdout only JSON)");

  // ---- train
  auto* train = app.add_subcommand(
      "train", "Train a cost model (Mamba by default; --model for a baseline) and report top-1/top-5 on held-out tasks");
  DataOptions train_data;
  train_data.add_to(train, true);
  TrainOptions to;
  std::string out_dir = "out/model";
  train->add_option("-o,--out", out_dir, "Output directory: best.tclm, checkpoint.tclm, train_log.json, report.json, test_tasks.csv");
  train->add_option("--model", to.model_kind,
                    "Cost model: mamba (TCL), or a baseline: attention (TLP-style), lstm, mlp (pooled steps); "
                    "'tclm compare' also trains xgboost")
      ->check(CLI::IsMember({"mamba", "attention", "lstm", "mlp"}));
  train->add_option("--d-model", to.model.d_model, "Model width (baselines: --hidden)")->check(CLI::Range(4, 4096));
  train->add_option("--hidden", to.baseline.d_model, "Baseline width (0 = its default: attention 256, lstm 128, mlp 256)")
      ->check(CLI::Range(0, 4096));
  train->add_option("--baseline-layers", to.baseline.n_layers,
                    "Baseline depth (0 = default: attention residual blocks 2, lstm layers 1, mlp hidden layers 2)")
      ->check(CLI::Range(0, 64));
  train->add_option("--heads", to.baseline.n_heads, "Attention heads (attention baseline)")->check(CLI::Range(1, 64));
  train->add_option("--n-layers", to.model.n_layers, "Mamba blocks")->check(CLI::Range(1, 64));
  train->add_option("--d-state", to.model.d_state, "SSM state size N")->check(CLI::Range(1, 256));
  train->add_option("--d-conv", to.model.d_conv, "Causal conv width")->check(CLI::Range(1, 64));
  train->add_option("--expand", to.model.expand, "Inner width = expand * d_model")->check(CLI::Range(1, 16));
  train->add_option("--loss", to.loss, "lambdarank (within tasks) or mse")->check(CLI::IsMember({"lambdarank", "mse"}));
  train->add_option("--epochs", to.epochs, "Maximum epochs")->check(CLI::Range(1, 100000));
  train->add_option("--batch-size", to.batch_size, "Programs per batch")->check(CLI::Range(2, 1 << 20));
  train->add_option("--group-size", to.group_size, "Programs of one task per ranking group")->check(CLI::Range(2, 4096));
  train->add_option("--lr", to.lr, "Peak learning rate (Adam)")->check(CLI::Range(1e-7, 1.0));
  train->add_option("--patience", to.patience, "Early stopping: epochs without a better validation top-1")
      ->check(CLI::Range(1, 100000));
  train->add_option("--seed", to.seed, "Seed of initialisation and batch order");
  train->add_option("--threads", to.threads, "Threads (0 = all cores)")->check(CLI::Range(0, 4096));
  bool train_quiet = false;
  train->add_flag("--quiet", train_quiet, "No progress display");
  std::string train_init;
  train->add_option("--init", train_init,
                    "Start from this Mamba model's weights (a .tclm file; its architecture replaces --d-model etc.): "
                    "fine-tuning, e.g. a tuner's model on newly measured programs")
      ->check(CLI::ExistingFile);

  // ---- eval
  auto* eval = app.add_subcommand(
      "eval", "Evaluate a trained model on the held-out test tasks of a dataset (by default the split stored in "
              "the model by 'tclm train'; split options given here override it)");
  DataOptions eval_data;
  eval_data.add_to(eval, true);
  std::string eval_model = "out/model/best.tclm", eval_json;
  bool eval_all = false;
  int eval_threads = 0;
  eval->add_option("-m,--model", eval_model, "Weights file (.tclm)");
  eval->add_flag("--all-tasks", eval_all, "Evaluate on every task, not only the split's test tasks");
  eval->add_option("--json", eval_json, "Write the report as JSON to this file");
  std::string eval_per_task;
  eval->add_option("--per-task", eval_per_task, "Write per-task results (top-1, top-5, random) as CSV to this file");
  eval->add_option("--threads", eval_threads, "Threads (0 = all cores)")->check(CLI::Range(0, 4096));
  std::string eval_backend = "engine";
  eval->add_option("--backend", eval_backend,
                   "engine: the libtorch-free inference engine (default); torch: the libtorch model (for parity checks)")
      ->check(CLI::IsMember({"engine", "torch"}));

  // ---- predict
  auto* predict = app.add_subcommand("predict", "Score the records of a file with a trained model (higher = faster)");
  std::string pred_model = "out/model/best.tclm", pred_input, pred_output = "-", pred_format;
  int pred_threads = 0, pred_max_steps = kDefaultMaxSteps;
  predict->add_option("-m,--model", pred_model, "Weights file (.tclm)");
  predict->add_option("-i,--input", pred_input, "Ansor record file (plain or .gz)")->required();
  predict->add_option("-o,--output", pred_output, "Output file ('-' = stdout)");
  predict->add_option("--format", pred_format, "csv or json (default: from the output name, else csv)")
      ->check(CLI::IsMember({"csv", "json"}));
  predict->add_option("--max-steps", pred_max_steps, "Steps per program kept by the featurizer")
      ->check(CLI::Range(1, 4096));
  predict->add_option("--threads", pred_threads, "Threads (0 = all cores)")->check(CLI::Range(0, 4096));
  std::string pred_backend = "engine";
  predict->add_option("--backend", pred_backend,
                      "engine: the libtorch-free inference engine (default); torch: the libtorch model")
      ->check(CLI::IsMember({"engine", "torch"}));

  // ---- export
  auto* exportc = app.add_subcommand(
      "export", "Check a checkpoint or weights file (it must load in the inference engine) and write it as a "
                "deployable weights file, atomically");
  std::string export_in, export_out;
  exportc->add_option("-c,--checkpoint", export_in, "Checkpoint or weights file (.tclm), e.g. out/model/checkpoint.tclm")
      ->required();
  exportc->add_option("-o,--out", export_out, "Output weights file")->required();

  const std::vector<Command> commands = {add_compare_command(app), add_sweep_command(app), add_sample_command(app),
                                         add_study_sampling_command(app), add_transfer_command(app),
                                         add_tune_bench_command(app), add_collect_command(app)};

  CLI11_PARSE(app, argc, argv);

  try {
    for (const Command& c : commands) {
      if (c.app->parsed()) return c.run();
    }
    if (info->parsed()) {
      Dataset d = info_data.load(isatty(fileno(stderr)));
      if (info_json_path == "-") {
        std::cout << info_json(d);
      } else {
        std::cout << info_text(d);
        if (!info_json_path.empty()) write_file_atomic(info_json_path, info_json(d));
      }
      return 0;
    }

    if (train->parsed()) {
      if (!train_init.empty()) {
        auto w = std::make_shared<WeightsFile>(load_weights(train_init));
        if (w->model_kind != kMambaModelKind) {
          throw Error(fmt::format("--init {}: a {} model; fine-tuning starts from Mamba models only", train_init,
                                  w->model_kind));
        }
        to.model_kind = w->model_kind;
        to.model = MambaConfig::from_json(w->config_json);
        to.init = std::move(w);
      }
      to.progress = !train_quiet;
      to.out_dir = out_dir;
      ensure_output_dir(out_dir);
      Dataset d = train_data.load(to.progress && isatty(fileno(stderr)));
      std::cerr << info_text(d) << "\n";
      Split s = make_split(d, train_data.split_options());
      print_split(d, s);
      std::string data_desc;
      for (const auto& src : train_data.resolve()) {
        data_desc += fmt::format("{}\"{}={}\"", data_desc.empty() ? "" : ", ", json_escape(src.platform), json_escape(src.path));
      }
      to.metadata_json = fmt::format("{{\"data\": [{}], \"split\": \"{}\", \"split_seed\": {}, \"test_fraction\": {}, "
                                     "\"valid_fraction\": {}, \"max_steps\": {}}}",
                                     data_desc, train_data.split, train_data.split_seed, train_data.test_fraction,
                                     train_data.valid_fraction, train_data.max_steps);
      TrainResult r = train_cost_model(d, s, to);
      std::fprintf(stderr, "trained %zu epochs in %.1f s; best epoch %d (valid top-1 %.4f); model: %s/best.tclm\n",
                   r.log.size(), r.seconds, r.best_epoch, r.best_valid_top1, out_dir.c_str());
      CostModel model = load_cost_model(r.best, "best model");
      std::vector<TaskResult> per_task;
      auto reports = evaluate_rankings(d, s.test, [&](const std::vector<uint32_t>& p) {
        return predict_programs(model, d, p);
      }, &per_task);
      write_file_atomic(out_dir + "/test_tasks.csv", per_task_csv(per_task));
      std::cout << "\nheld-out test tasks (never seen in training):\n" << format_reports(reports);
      write_file_atomic(out_dir + "/report.json",
                        fmt::format("{{\"test\": {}, \"best_epoch\": {}, \"seconds\": {:.1f}, \"train_tasks\": {}, "
                                    "\"valid_tasks\": {}, \"test_tasks\": {}}}\n",
                                    reports_json(reports), r.best_epoch, r.seconds, s.train.size(), s.valid.size(),
                                    s.test.size()));
      std::cout << "report: " << out_dir << "/report.json\n";
      return 0;
    }

    if (eval->parsed()) {
      set_threads(eval_threads);
      WeightsFile w = load_weights(eval_model);
      if (w.model_kind != kMambaModelKind && eval_backend == "engine") {
        std::fprintf(stderr, "note: the inference engine runs Mamba models only; scoring this %s model with libtorch\n",
                     w.model_kind.c_str());
        eval_backend = "torch";
      }
      std::optional<CostModelEngine> engine;
      CostModel model;
      if (eval_backend == "torch") {
        model = load_cost_model(w, eval_model);
      } else {
        engine.emplace(w, eval_model);
        engine->set_threads(eval_threads);
      }
      const std::string used = apply_model_split(w.metadata_json, *eval, &eval_data);
      if (!used.empty()) std::fprintf(stderr, "using the model's split (%s); options given here override it\n", used.c_str());
      Dataset d = eval_data.load(isatty(fileno(stderr)));
      check_feature_family(w.feature_version, d.feature_version(), eval_model);
      if (engine) engine->set_max_steps(d.max_steps());
      std::vector<uint32_t> tasks;
      if (eval_all) {
        SplitOptions so = eval_data.split_options();
        so.test_fraction = 0;
        so.valid_fraction = 0;
        Split s = make_split(d, so);
        tasks = s.train;
      } else {
        Split s = make_split(d, eval_data.split_options());
        print_split(d, s);
        tasks = s.test;
      }
      std::vector<TaskResult> per_task;
      auto reports = evaluate_rankings(d, tasks, [&](const std::vector<uint32_t>& p) {
        if (eval_backend == "torch") return predict_programs(model, d, p);
        std::vector<float> scores(p.size());
        engine->predict_views(p.size(), [&](size_t i, std::vector<StepView>* v) { d.steps(p[i], v); }, scores.data());
        return scores;
      }, &per_task);
      std::cout << format_reports(reports);
      if (!eval_per_task.empty()) write_file_atomic(eval_per_task, per_task_csv(per_task));
      if (!eval_json.empty()) write_file_atomic(eval_json, reports_json(reports) + "\n");
      return 0;
    }

    if (predict->parsed()) {
      set_threads(pred_threads);
      WeightsFile w = load_weights(pred_model);
      if (w.model_kind != kMambaModelKind && pred_backend == "engine") {
        std::fprintf(stderr, "note: the inference engine runs Mamba models only; scoring this %s model with libtorch\n",
                     w.model_kind.c_str());
        pred_backend = "torch";
      }
      std::optional<CostModelEngine> engine;
      CostModel model;
      if (pred_backend == "torch") {
        model = load_cost_model(w, pred_model);  // refuses another feature version
      } else {
        engine.emplace(w, pred_model);  // refuses another kind or feature version
        engine->set_threads(pred_threads);
        engine->set_max_steps(pred_max_steps);
      }
      // Every well-formed record is scored, failed measurements included (a tuner scores
      // unmeasured candidates); malformed lines are skipped and reported.
      std::vector<MeasureRecord> records;
      std::vector<int64_t> lines;
      ReadStats stats;
      if (std::filesystem::is_directory(pred_input)) {
        throw Error("--input '" + pred_input + "' is a directory; give one record file (plain or .gz)");
      }
      read_record_file(pred_input, [&](const MeasureRecord& r, const RecordOrigin& o) {
        records.push_back(r);
        lines.push_back(o.line);
      }, &stats);
      std::vector<float> scores(records.size());
      if (pred_backend == "engine") {
        std::vector<std::vector<TransformStep>> programs;
        programs.reserve(records.size());
        for (auto& r : records) programs.push_back(r.steps);
        scores = engine->predict_programs(programs);
      } else {
        torch::NoGradGuard no_grad;
        const size_t B = 4096;
        for (size_t i = 0; i < records.size(); i += B) {
          const size_t n = std::min(records.size(), i + B) - i;
          int L = 1;
          for (size_t j = 0; j < n; ++j) L = std::max(L, std::min<int>(records[i + j].steps.size(), pred_max_steps));
          std::vector<float> x(n * L * kStepFeatureDim), mask(n * L, 0.0f);
          for (size_t j = 0; j < n; ++j) {
            int used = featurize_program(records[i + j].steps, L, x.data() + j * L * kStepFeatureDim);
            std::fill(mask.begin() + j * L, mask.begin() + j * L + used, 1.0f);
          }
          auto s = model->forward(torch::from_blob(x.data(), {(int64_t)n, L, kStepFeatureDim}),
                                  torch::from_blob(mask.data(), {(int64_t)n, L})).contiguous();
          std::copy(s.data_ptr<float>(), s.data_ptr<float>() + n, scores.begin() + i);
        }
      }
      std::string format = pred_format;
      if (format.empty()) format = pred_output.size() > 5 && pred_output.ends_with(".json") ? "json" : "csv";
      std::string out;
      if (format == "csv") {
        out = "line,workload_key,score,mean_cost_sec,error_no\n";
        for (size_t i = 0; i < records.size(); ++i) {
          std::string wk = records[i].workload_key;
          std::string q = "\"";
          for (char c : wk) q += (c == '"') ? std::string("\"\"") : std::string(1, c);
          out += fmt::format("{},{}\",{:.7g},{:.7g},{}\n", lines[i], q, scores[i],
                             records[i].valid() ? records[i].mean_cost() : NAN, records[i].error_no);
        }
      } else {
        out = "[";
        for (size_t i = 0; i < records.size(); ++i) {
          double c = records[i].valid() ? records[i].mean_cost() : -1;
          out += fmt::format("{}\n {{\"line\": {}, \"workload_key\": \"{}\", \"score\": {:.7g}, \"mean_cost_sec\": {}, "
                             "\"error_no\": {}}}",
                             i ? "," : "", lines[i], json_escape(records[i].workload_key), scores[i],
                             c > 0 ? fmt::format("{:.7g}", c) : "null", records[i].error_no);
        }
        out += "\n]\n";
      }
      if (pred_output == "-") {
        std::cout << out;
      } else {
        write_file_atomic(pred_output, out);
      }
      std::fprintf(stderr, "scored %zu records; %lld malformed lines skipped\n", records.size(),
                   static_cast<long long>(stats.skipped));
      if (stats.skipped > 0) std::cerr << stats.report();
      return 0;
    }
    if (exportc->parsed()) {
      WeightsFile w = load_weights(export_in);
      CostModelEngine engine(w, export_in);  // the deployable path must accept it
      save_weights(w, export_out);
      std::printf("%s: %s model, feature encoding v%u, %lld parameters (%.3f MB) -> %s\n", export_in.c_str(),
                  w.model_kind.c_str(), w.feature_version, static_cast<long long>(w.num_parameters()),
                  w.num_parameters() * 4.0 / 1e6, export_out.c_str());
      return 0;
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "tclm: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tclm: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
