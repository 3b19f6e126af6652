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
// Exit codes (docs/reliability.md): 0 success; 1 an input, file or option was refused or an operation
// failed (the message names the file, line or option and says what to do); 2 a usage error on the
// command line (unknown command or option, a value out of range); 3 an internal error (a bug).
#include <CLI/CLI.hpp>
#include <filesystem>
#include <fmt/format.h>
#include <iostream>
#include <optional>
#include <simdjson.h>
#include <unistd.h>

#include "common/bytes.h"
#include "common/runtime_env.h"
#include "tclm/dataset.h"
#include "tclm/error.h"
#include "tclm/evaluation.h"
#include "tclm/infer.h"
#include "tclm/weights.h"
#include "cli_common.h"
#include "train/trainer.h"

using namespace tclm;

using namespace tclm::cli;

namespace {
constexpr int kExitOk = 0, kExitError = 1, kExitUsage = 2, kExitInternal = 3;

// -m/--model: a missing file that is the option's default gets a hint on how to make one.
WeightsFile load_model_option(const std::string& path, const CLI::App& cmd) {
  std::error_code ec;
  if (cmd.count("--model") == 0 && !std::filesystem::exists(path, ec)) {
    throw Error(fmt::format("no model at '{}' (the default of -m/--model); give -m PATH, or train one with "
                            "'tclm train -o out/model'", path));
  }
  return load_weights(path);
}
}  // namespace

int main(int argc, char** argv) {
  // OMP_WAIT_POLICY=PASSIVE and, where OpenBLAS fell back to kernels older than this CPU, the
  // OPENBLAS_CORETYPE of its own kernels: both are read when the libraries load, before main, so the
  // process re-executes itself once (common/runtime_env.h; a user's own setting wins).
  tclm::reexec_with_runtime_env(argv);
  CLI::App app{
      "tclm: a learned, cross-hardware cost model for tensor programs (TCL).\n"
      "Reads Ansor measure records, trains a Mamba model on transform-step sequences and ranks candidate\n"
      "programs of a task. Run 'tclm COMMAND --help' for each command."};
  app.require_subcommand(1);
  app.footer("Exit codes: 0 success; 1 an input, file or option was refused or an operation failed (the message\n"
             "names the file, line or option); 2 a usage error on the command line; 3 an internal error (a bug).");
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
  train->add_option("--patience", to.patience, "Early stopping: epochs without a better validation figure (--select)")
      ->check(CLI::Range(1, 100000));
  add_select_option(train, &to.select);
  train->add_option("--seed", to.seed, "Seed of initialisation and batch order")->check(kNonNegativeInteger);
  train->add_option("--threads", to.threads, "Threads (0 = all cores)")->check(CLI::Range(0, 4096));
  bool train_quiet = false;
  train->add_flag("--quiet", train_quiet, "No progress display");
  std::string train_init;
  train->add_option("--init", train_init,
                    "Start from this Mamba model's weights (a .tclm file; its architecture replaces --d-model etc.): "
                    "fine-tuning, e.g. a tuner's model on newly measured programs")
      ->check(CLI::ExistingFile);
  train->add_flag("--resume", to.resume,
                  "Continue an interrupted run from OUT/checkpoint.tclm (same data and options; refused otherwise): "
                  "the result is the one the uninterrupted run would have given");
  double checkpoint_minutes = 10;
  train->add_option("--checkpoint-minutes", checkpoint_minutes,
                    "Also write OUT/checkpoint.tclm inside an epoch every this many minutes (0 = after every batch); "
                    "one is always written at the end of each epoch")
      ->check(CLI::Range(0.0, 1e6));

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

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const auto subs = app.get_subcommands({});
    if (argc > 1 && argv[1][0] != '-' &&
        std::none_of(subs.begin(), subs.end(), [&](const CLI::App* sub) { return sub->check_name(argv[1]); })) {
      std::string names;
      for (const CLI::App* sub : subs) names += (names.empty() ? "" : ", ") + sub->get_name();
      std::fprintf(stderr, "tclm: unknown command '%s'; commands: %s (tclm --help)\n", argv[1], names.c_str());
      return kExitUsage;
    }
    const int rc = app.exit(e);  // prints the help, the version or the usage error
    return rc == 0 ? kExitOk : kExitUsage;
  }

  try {
    for (const Command& c : commands) {
      if (c.app->parsed()) return c.run();
    }
    if (info->parsed()) {
      const DataSummary d = info_data.summarize(isatty(fileno(stderr)));  // streaming: memory O(tasks)
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
        const std::string what = "--init " + train_init;
        check_feature_version(*w, what);
        check_finite_parameters(*w, what);
        to.model_kind = w->model_kind;
        try {
          to.model = MambaConfig::from_json(w->config_json);
        } catch (const Error& e) {
          throw Error(fmt::format("{}: {}", what, e.what()));
        }
        to.init = std::move(w);
      }
      to.progress = !train_quiet;
      to.out_dir = out_dir;
      to.checkpoint_seconds = checkpoint_minutes * 60.0;
      ensure_output_dir(out_dir);
      std::error_code fs_ec;
      if (!to.resume && std::filesystem::exists(std::filesystem::path(out_dir) / "checkpoint.tclm", fs_ec) &&
          to.progress) {
        std::fprintf(stderr, "note: %s/checkpoint.tclm exists and will be replaced; --resume continues it instead\n",
                     out_dir.c_str());
      }
      Dataset d = train_data.load(to.progress && isatty(fileno(stderr)));
      std::cerr << info_text(d) << "\n";
      Split s = make_split(d, train_data.split_options());
      print_split(d, s);
      std::string data_desc;
      for (const auto& src : train_data.resolve()) {
        data_desc += fmt::format("{}\"{}={}\"", data_desc.empty() ? "" : ", ", json_escape(src.platform), json_escape(src.path));
      }
      to.metadata_json = fmt::format("{{\"data\": [{}], \"split\": \"{}\", \"split_seed\": {}, \"test_fraction\": {}, "
                                     "\"valid_fraction\": {}, \"tuning_split\": {}, \"max_steps\": {}}}",
                                     data_desc, train_data.split, train_data.split_seed, train_data.test_fraction,
                                     train_data.valid_fraction, train_data.tuning_split, train_data.max_steps);
      if (s.test.empty()) {
        std::fprintf(stderr, "warning: the split has no test task (%zu tasks): the held-out report will be empty; raise "
                             "--test-fraction or change --split-seed\n", d.tasks().size());
      }
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
      WeightsFile w = load_model_option(eval_model, *eval);
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
        if (tasks.empty()) {
          throw Error(fmt::format("the split has no test task ({} tasks in the data); use --all-tasks, raise "
                                  "--test-fraction or change --split-seed", d.tasks().size()));
        }
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
      WeightsFile w = load_model_option(pred_model, *predict);
      if (w.model_kind != kMambaModelKind && pred_backend == "engine") {
        std::fprintf(stderr, "note: the inference engine runs Mamba models only; scoring this %s model with libtorch\n",
                     w.model_kind.c_str());
        pred_backend = "torch";
      }
      std::optional<CostModelEngine> engine;
      CostModel model;
      if (pred_backend == "torch") {
        model = load_cost_model(w, pred_model);  // refuses another feature version
        if (predict->count("--max-steps") == 0) pred_max_steps = model_max_steps(w.metadata_json, pred_max_steps);
      } else {
        engine.emplace(w, pred_model);  // refuses another kind or feature version
        engine->set_threads(pred_threads);
        if (predict->count("--max-steps") == 0) pred_max_steps = model_max_steps(w.metadata_json, pred_max_steps);
        engine->set_max_steps(pred_max_steps);
      }
      // Every well-formed record is scored, failed measurements included (a tuner scores
      // unmeasured candidates); malformed lines are skipped and reported.
      std::vector<MeasureRecord> records;
      std::vector<int64_t> lines;
      ReadStats stats;
      std::error_code fs_ec;
      if (std::filesystem::is_directory(pred_input, fs_ec)) {
        throw Error("--input '" + pred_input + "' is a directory; give one record file (plain or .gz)");
      }
      read_record_file(pred_input, [&](const MeasureRecord& r, const RecordOrigin& o) {
        records.push_back(r);
        lines.push_back(o.line);
      }, &stats);
      if (records.empty()) {
        std::cerr << stats.report();
        throw Error(fmt::format("--input '{}': no well-formed record or trace to score ({} lines, {} skipped{})",
                                pred_input, stats.lines, stats.skipped,
                                stats.workload_tables > 0 ? "; this is a MetaSchedule workload table: give the "
                                                            "database_tuning_record.json beside it"
                                                          : "; see the reasons above"));
      }
      for (size_t i = 0; i < records.size(); ++i) {
        if (records[i].steps.empty()) continue;
        try {
          check_feature_family(w.feature_version, feature_version_of(records[i].steps[0].kind), pred_model);
        } catch (const Error& e) {
          throw Error(fmt::format("--input {}:{}: {}", pred_input, lines[i], e.what()));
        }
      }
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
      WeightsFile w = without_training_state(load_weights(export_in));  // a checkpoint's optimizer state etc. go
      CostModelEngine engine(w, export_in);  // the deployable path must accept it
      save_weights(w, export_out);
      std::printf("%s: %s model, feature encoding v%u, %lld parameters (%.3f MB) -> %s\n", export_in.c_str(),
                  w.model_kind.c_str(), w.feature_version, static_cast<long long>(w.num_parameters()),
                  w.num_parameters() * 4.0 / 1e6, export_out.c_str());
      return 0;
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "tclm: error: %s\n", e.what());
    return std::string_view(e.what()).starts_with("internal error") ? kExitInternal : kExitError;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "tclm: error: out of memory; use fewer or smaller inputs (or a smaller --batch-size, "
                         "--d-model, --expand)\n");
    return kExitError;
  } catch (const c10::Error& e) {
    // libtorch reports its allocator's failure as c10::Error, not std::bad_alloc.
    const std::string what = e.what_without_backtrace();
    if (what.find("can't allocate memory") != std::string::npos) {
      std::fprintf(stderr, "tclm: error: out of memory in libtorch (%s); use a smaller --batch-size, --d-model or "
                           "--expand, or fewer inputs\n", what.c_str());
      return kExitError;
    }
    std::fprintf(stderr, "tclm: internal error: %s\nThis is a bug in tclm (or libtorch); please report it with the "
                         "command line.\n", what.c_str());
    return kExitInternal;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tclm: internal error: %s\nThis is a bug in tclm (or a library it calls); please report it "
                         "with the command line.\n", e.what());
    return kExitInternal;
  }
  return 0;
}
