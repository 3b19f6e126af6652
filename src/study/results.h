// study/results.h: the results of a study (tclm transfer, tclm study-sampling): one table of runs keyed
// method x phase x platform x seed, each with named figures (top-1, top-5, ...), aggregated over seeds
// as mean ± standard deviation, and compared with a reference method paired by seed.
//
// Paired differences: every method of a seed runs on the same split with the same seed (and, in
// tclm transfer, the same target picks), so the per-seed difference removes the noise the two runs
// share. A verdict (ahead / behind / level, PairedDifference::verdict in tclm/metrics.h) needs a spread
// of the differences, hence at least 2 seeds; with one seed the difference is shown with
// "1 seed: no paired verdict".
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tclm/metrics.h"

namespace tclm::study {

struct ResultKey {
  std::string method, phase, platform;
  int seed = 0;
  bool operator<(const ResultKey& o) const;
};

struct ResultRow {
  ResultKey key;
  int phase_index = 0;                    // order of the phase within the method's run (0 = one phase)
  std::map<std::string, double> figures;  // e.g. "top1", "top5", "top1_task_mean"
};

/// Mean and sample standard deviation (n - 1; 0 when n < 2) of one figure over seeds.
struct SeedSummary {
  size_t n = 0;
  double mean = 0, std = 0;
};
SeedSummary summarize(const std::map<int, double>& by_seed);

class ResultsTable {
 public:
  /// Adds a run's figures. Throws tclm::Error if the key is already in the table or a figure is not finite.
  void add(ResultRow row);
  const std::vector<ResultRow>& rows() const { return rows_; }
  bool empty() const { return rows_.empty(); }
  bool contains(const ResultKey& key) const { return index_.count(key) > 0; }

  /// The phase of `method`'s rows on `platform` with the highest phase_index ("" when there is none):
  /// the end of a run of several phases.
  std::string last_phase(const std::string& method, const std::string& platform) const;
  /// One figure of every seed's row of method x phase x platform ({} when there is none; a row without
  /// the figure is left out).
  std::map<int, double> by_seed(const std::string& method, const std::string& phase, const std::string& platform,
                                const std::string& figure) const;
  SeedSummary summary(const std::string& method, const std::string& phase, const std::string& platform,
                      const std::string& figure) const {
    return summarize(by_seed(method, phase, platform, figure));
  }
  /// `method` minus `reference`, paired by seed, on one phase and platform each (the phases may differ:
  /// e.g. each method's last phase).
  PairedDifference paired(const std::string& method, const std::string& method_phase, const std::string& reference,
                          const std::string& reference_phase, const std::string& platform,
                          const std::string& figure) const;
  /// Methods, phases and seeds in the order they were first added.
  std::vector<std::string> methods() const;
  std::vector<std::string> phases() const;

 private:
  std::vector<ResultRow> rows_;
  std::map<ResultKey, size_t> index_;
};

/// "0.8123 ± 0.0101" (n > 1), "0.8123" (n = 1), "-" (n = 0); `digits` after the point.
std::string format_summary(const SeedSummary& s, int digits);
/// A paired difference as a table cell: "-" with no common seed; with one seed
/// "+0.012 (1 seed: no paired verdict)"; else format_paired(d) and the verdict,
/// "+0.028 ± 0.082 (+0.092, +0.056, -0.065) level".
std::string format_paired_cell(const PairedDifference& d);
/// The legend of the paired tables (one line).
extern const char* const kPairedLegend;

}  // namespace tclm::study
