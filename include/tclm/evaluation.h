// tclm/evaluation.h: ranking quality of a scorer on the tasks of a dataset (TCL-SPEC §5).
#pragma once

#include <functional>
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
  std::string to_json() const;
};

/// Evaluates `scorer` on `tasks` (indices into data.tasks()): one report per platform present,
/// then, if there is more than one platform, an "all" report. Task weights are 1; groups are the
/// tasks' first group (data directory / network).
std::vector<RankingReport> evaluate_rankings(const Dataset& data, const std::vector<uint32_t>& tasks,
                                             const ProgramScorer& scorer);

/// A fixed-width table of reports for terminals.
std::string format_reports(const std::vector<RankingReport>& reports);

}  // namespace tclm
