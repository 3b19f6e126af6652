// tools/cmd_eval.cpp: `tclm eval`, a trained model's ranking quality on the held-out test tasks.
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <iostream>
#include <memory>
#include <optional>
#include <unistd.h>

#include "cli_common.h"
#include "scorer.h"
#include "common/bytes.h"
#include "tclm/infer.h"
#include "tclm/weights.h"
#include "train/trainer.h"

namespace tclm::cli {
namespace {

struct EvalOptions {
  DataOptions data;
  std::string model = "out/model/best.tclm";
  std::string json;
  std::string per_task;
  bool all_tasks = false;
  int threads = 0;
  std::string backend = "engine";
};

/// The tasks to score: the split's test tasks (as the model's training run made it), or every task.
std::vector<uint32_t> eval_tasks(const Dataset& d, const DataOptions& data, bool all_tasks) {
  if (all_tasks) {
    SplitOptions so = data.split_options();
    so.test_fraction = 0;
    so.valid_fraction = 0;
    return make_split(d, so).train;
  }
  Split s = make_split(d, data.split_options());
  print_split(d, s);
  if (s.test.empty()) {
    throw Error(fmt::format("the split has no test task ({} tasks in the data); use --all-tasks, raise "
                            "--test-fraction or change --split-seed", d.tasks().size()));
  }
  return s.test;
}

/// Without -d, eval scores the data the model was trained on (its metadata names it); a model
/// without that record falls back to the embedded data, with a note.
void use_training_data(const WeightsFile& w, const std::string& name, DataOptions* data) {
  data->sources = model_data_sources(w.metadata_json);
  if (data->sources.empty()) {
    std::fprintf(stderr, "note: %s does not record the data it was trained on; evaluating on the embedded data "
                         "(%s/*); give -d to choose\n", name.c_str(), TCLM_DEFAULT_DATA);
    return;
  }
  std::string list;
  for (const auto& s : data->sources) {
    const DataSource src = DataSource::parse(s);
    std::error_code ec;
    if (!std::filesystem::exists(src.path, ec)) {
      throw Error(fmt::format("{} was trained on '{}', which does not exist here (a path relative to where 'tclm "
                              "train' ran?); give the data with -d [PLATFORM=]PATH", name, s));
    }
    list += (list.empty() ? "" : ", ") + s;
  }
  std::fprintf(stderr, "using the model's training data (%s); -d chooses other data\n", list.c_str());
}

int run_eval(EvalOptions o, const CLI::App& cmd) {
  set_threads(o.threads);
  WeightsFile w = load_model_option(o.model, cmd);
  ModelScorer scorer(w, o.model, o.backend, o.threads);
  if (cmd.count("--data") == 0) use_training_data(w, o.model, &o.data);
  std::vector<PathOption> inputs = data_inputs(o.data.sources);
  inputs.push_back({"--model", o.model});
  check_outputs(inputs, {{"--json", o.json}, {"--per-task", o.per_task}});
  const std::string used = apply_model_split(w.metadata_json, cmd, &o.data);
  if (!used.empty()) std::fprintf(stderr, "using the model's split (%s); options given here override it\n", used.c_str());
  Dataset d = o.data.load(isatty(fileno(stderr)));
  check_feature_family(w.feature_version, d.feature_version(), o.model);
  scorer.set_max_steps(d.max_steps());
  const std::vector<uint32_t> tasks = eval_tasks(d, o.data, o.all_tasks);

  std::vector<TaskResult> per_task;
  auto reports = evaluate_rankings(d, tasks, [&](const std::vector<uint32_t>& p) { return scorer.score(d, p); },
                                   &per_task);

  std::cout << format_reports(reports);
  if (!o.per_task.empty()) write_output(o.per_task, per_task_csv(per_task));
  if (!o.json.empty()) write_output(o.json, reports_json(reports));
  return 0;
}

}  // namespace

Command add_eval_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "eval", "Evaluate a trained model on the held-out test tasks of a dataset: by default the data and the split "
              "stored in the model by 'tclm train' (-d and the split options given here override them)");
  cmd->option_defaults()->always_capture_default();
  auto o = std::make_shared<EvalOptions>();
  o->data.add_to(cmd, true);
  cmd->get_option("--data")->description(
      "Record source, repeatable: [PLATFORM=]PATH, a file or directory of Ansor records. Default: the data the "
      "model was trained on (recorded by 'tclm train'; for a model without that record, the embedded data, "
      TCLM_DEFAULT_DATA "/*)");
  cmd->add_option("-m,--model", o->model, "Weights file (.tclm)");
  cmd->add_flag("--all-tasks", o->all_tasks, "Evaluate on every task, not only the split's test tasks");
  cmd->add_option("--json", o->json, "Write the report as JSON to this file ('-' = stdout)");
  cmd->add_option("--per-task", o->per_task, "Write per-task results (top-1, top-5, random) as CSV to this file ('-' = stdout)");
  cmd->add_option("--threads", o->threads, "Threads (0 = all cores)")->check(CLI::Range(0, 4096));
  add_backend_option(cmd, &o->backend);
  return Command{cmd, [o, cmd]() { return run_eval(*o, *cmd); }};
}

}  // namespace tclm::cli
