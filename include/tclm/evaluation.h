// tclm/evaluation.h: ranking quality of a scorer on the tasks of a dataset (TCL-SPEC §5).
#pragma once

#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "tclm/dataset.h"
#include "tclm/metrics.h"

namespace tclm {

/// Scores programs (dataset indices); higher = predicted faster. Returns one score per program.
using ProgramScorer = std::function<std::vector<float>(const std::vector<uint32_t>& programs)>;

struct RankingReport {
  std::string platform;        // platform name, or "all"
  int tasks = 0;
  int64_t programs = 0;
  TopKScore top1, top5;                // the scorer
  TopKScore random_top1, random_top5;  // exact expectation of a uniformly random ranking
  double pairwise = 0.5;               // pairwise accuracy within tasks
  /// {"platform", "tasks", "programs", "top1", "top5", "random_top1", "random_top5" (each
  /// {"pooled", "group_mean", "task_mean"}), "pairwise_accuracy"}.
  nlohmann::json to_json_value() const;
  std::string to_json() const;  // to_json_value(), one line
};

/// One task's result (for per-task CSV output).
struct TaskResult {
  std::string platform, workload_key, group;
  int64_t programs = 0;
  double best = 0;        // best true latency, seconds
  double top1 = 0, top5 = 0;  // best(t) / lat_k(t)
  double random_top1 = 0;     // best(t) / E[lat_1] = best / mean latency
};

/// Evaluates `scorer` on `tasks` (indices into data.tasks()): one report per platform present,
/// then, if there is more than one platform, an "all" report. Task weights are 1; groups are the
/// tasks' first group (data directory / network).
std::vector<RankingReport> evaluate_rankings(const Dataset& data, const std::vector<uint32_t>& tasks,
                                             const ProgramScorer& scorer,
                                             std::vector<TaskResult>* per_task = nullptr);

/// Per-task results as CSV (header + one line per task).
std::string per_task_csv(const std::vector<TaskResult>& results);
/// The same CSV's header and rows, without '\n', for a table with columns of its own in front (a
/// study's run or phase): each row is `prefix` (the caller's values, ending in ',') and the task's.
std::string per_task_csv_header();
std::vector<std::string> per_task_csv_rows(const std::vector<TaskResult>& results, const std::string& prefix);

/// A fixed-width table of reports for terminals.
std::string format_reports(const std::vector<RankingReport>& reports);

}  // namespace tclm
