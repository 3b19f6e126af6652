// tools/cmd_predict.cpp: `tclm predict`, scores the candidate programs of a record file.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "common/bytes.h"
#include "scorer.h"
#include "tclm/record.h"
#include "train/trainer.h"

namespace tclm::cli {
namespace {

struct PredictOptions {
  std::string model = "out/model/best.tclm";
  std::string input;
  std::string output = "-";
  std::string format;
  int threads = 0;
  int max_steps = kDefaultMaxSteps;
  std::string backend = "engine";
  bool rank = false;
};

/// The records of the input file and their line numbers.
struct Candidates {
  std::vector<MeasureRecord> records;
  std::vector<int64_t> lines;
  ReadStats stats;
};

Candidates read_candidates(const std::string& path) {
  std::error_code fs_ec;
  if (std::filesystem::is_directory(path, fs_ec)) {
    throw Error("--input '" + path + "' is a directory; give one record file (plain or .gz)");
  }
  // Every well-formed record is scored: measured ones, failed measurements and candidates never
  // measured (lines without "r"); malformed lines are skipped and reported.
  Candidates c;
  RecordReadOptions ro;
  ro.allow_unmeasured = true;
  read_record_file(path, [&](const MeasureRecord& r, const RecordOrigin& o) {
    c.records.push_back(r);
    c.lines.push_back(o.line);
  }, &c.stats, ro);
  if (c.records.empty()) {
    std::cerr << c.stats.report();
    throw Error(fmt::format("--input '{}': no well-formed record or trace to score ({} lines, {} skipped{})", path,
                            c.stats.lines, c.stats.skipped,
                            c.stats.workload_tables > 0 ? "; this is a MetaSchedule workload table: give the "
                                                          "database_tuning_record.json beside it"
                                                        : "; see the reasons above"));
  }
  return c;
}

/// Each candidate's rank within its task (the records of one workload key and target): 1 = the
/// highest score (predicted fastest); equal scores keep the file's order.
std::vector<int64_t> ranks_within_tasks(const Candidates& c, const std::vector<float>& scores) {
  std::map<std::pair<std::string, std::string>, std::vector<size_t>> tasks;
  for (size_t i = 0; i < c.records.size(); ++i) tasks[{c.records[i].workload_key, c.records[i].target}].push_back(i);
  std::vector<int64_t> rank(c.records.size());
  for (auto& [task, idx] : tasks) {
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
    for (size_t k = 0; k < idx.size(); ++k) rank[idx[k]] = static_cast<int64_t>(k) + 1;
  }
  return rank;
}

constexpr char kColumnsHelp[] =
    "Output, one row (CSV) or object (JSON) per candidate, in the input's order:\n"
    "  line           the candidate's line in the input file\n"
    "  workload_key   its task (the record's workload key)\n"
    "  score          the model's score; higher = predicted faster (only the order within a task means anything)\n"
    "  mean_cost_sec  the measured mean cost in seconds: empty/null when the candidate was never measured (no \"r\")\n"
    "                 or its measurement failed (CSV 'nan')\n"
    "  error_no       the measurement's error number (0 = ok); empty/null when never measured\n"
    "  rank           (--rank) its rank within its task (workload key and target): 1 = predicted fastest";

std::string predictions_csv(const Candidates& c, const std::vector<float>& scores, const std::vector<int64_t>* rank) {
  std::string out = rank ? "line,workload_key,score,mean_cost_sec,error_no,rank\n"
                         : "line,workload_key,score,mean_cost_sec,error_no\n";
  for (size_t i = 0; i < c.records.size(); ++i) {
    const MeasureRecord& r = c.records[i];
    std::string q = "\"";
    for (char ch : r.workload_key) q += (ch == '"') ? std::string("\"\"") : std::string(1, ch);
    out += fmt::format("{},{}\",{:.7g},{},{}", c.lines[i], q, scores[i],
                       !r.measured ? "" : fmt::format("{:.7g}", r.valid() ? r.mean_cost() : NAN),
                       r.measured ? std::to_string(r.error_no) : "");
    out += rank ? fmt::format(",{}\n", (*rank)[i]) : "\n";
  }
  return out;
}

/// x with 7 significant digits (a float's precision), so that JSON shows 0.1234567, not the double
/// nearest the float.
double round7(double x) { return std::stod(fmt::format("{:.7g}", x)); }

std::string predictions_json(const Candidates& c, const std::vector<float>& scores, const std::vector<int64_t>* rank) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (size_t i = 0; i < c.records.size(); ++i) {
    const MeasureRecord& r = c.records[i];
    nlohmann::ordered_json row = {{"line", c.lines[i]},
                                  {"workload_key", r.workload_key},
                                  {"score", round7(scores[i])},
                                  {"mean_cost_sec", nullptr},
                                  {"error_no", nullptr}};
    if (r.valid()) row["mean_cost_sec"] = round7(r.mean_cost());
    if (r.measured) row["error_no"] = r.error_no;
    if (rank) row["rank"] = (*rank)[i];
    rows.push_back(std::move(row));
  }
  return dump_json(rows);
}

int run_predict(PredictOptions o, const CLI::App& cmd) {
  check_outputs({{"--model", o.model}, {"--input", o.input}}, {{"--output", o.output}});
  set_threads(o.threads);
  WeightsFile w = load_model_option(o.model, cmd);
  ModelScorer scorer(w, o.model, o.backend, o.threads);
  if (cmd.count("--max-steps") == 0) o.max_steps = model_max_steps(w.metadata_json, o.max_steps);
  scorer.set_max_steps(o.max_steps);
  const Candidates c = read_candidates(o.input);
  for (size_t i = 0; i < c.records.size(); ++i) {
    if (c.records[i].steps.empty()) continue;
    try {
      check_feature_family(w.feature_version, feature_version_of(c.records[i].steps[0].kind), o.model);
    } catch (const Error& e) {
      throw Error(fmt::format("--input {}:{}: {}", o.input, c.lines[i], e.what()));
    }
  }

  std::vector<std::vector<TransformStep>> programs;
  programs.reserve(c.records.size());
  for (const auto& r : c.records) programs.push_back(r.steps);
  const std::vector<float> scores = scorer.score(programs);

  std::string format = o.format;
  if (format.empty()) format = o.output.size() > 5 && o.output.ends_with(".json") ? "json" : "csv";
  std::vector<int64_t> rank;
  if (o.rank) rank = ranks_within_tasks(c, scores);
  const std::vector<int64_t>* r = o.rank ? &rank : nullptr;
  const std::string out = format == "csv" ? predictions_csv(c, scores, r) : predictions_json(c, scores, r);
  write_output(o.output, out);
  const auto unmeasured = std::count_if(c.records.begin(), c.records.end(), [](const auto& r) { return !r.measured; });
  std::fprintf(stderr, "scored %zu records%s; %lld malformed lines skipped\n", c.records.size(),
               unmeasured > 0 ? fmt::format(" ({} never measured)", unmeasured).c_str() : "",
               static_cast<long long>(c.stats.skipped));
  if (c.stats.skipped > 0) std::cerr << c.stats.report();
  return 0;
}

}  // namespace

Command add_predict_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "predict", "Score the candidate programs of a file with a trained model (higher = predicted faster): Ansor "
                 "records, measured or not (a line {\"i\": ...} without \"r\" is a candidate never measured), or "
                 "MetaSchedule tuning records");
  cmd->footer(kColumnsHelp);
  cmd->option_defaults()->always_capture_default();
  auto o = std::make_shared<PredictOptions>();
  cmd->add_option("-m,--model", o->model, "Weights file (.tclm)");
  cmd->add_option("-i,--input", o->input, "Candidate file (plain or .gz): Ansor record lines, \"r\" optional")->required();
  cmd->add_option("-o,--output", o->output, "Output file ('-' = stdout)");
  cmd->add_option("--format", o->format, "csv or json (default: from the output name, else csv)")
      ->check(CLI::IsMember({"csv", "json"}));
  cmd->add_option("--max-steps", o->max_steps,
                  "Steps per program kept by the featurizer (default: the model's, from its training run; this "
                  "value for a model that records none)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--threads", o->threads, "Threads (0 = all cores)")->check(CLI::Range(0, 4096));
  add_backend_option(cmd, &o->backend);
  cmd->add_flag("--rank", o->rank, "Add a column 'rank': each candidate's rank within its task, 1 = predicted fastest");
  return Command{cmd, [o, cmd]() { return run_predict(*o, *cmd); }};
}

}  // namespace tclm::cli
