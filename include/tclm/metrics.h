// tclm/metrics.h: ranking metrics of a cost model on held-out tasks (TCL-SPEC §5).
//
// top-k score (TenSet / TLP, scripts/tlp_eval.py): for each task t with weight w_t, sort t's programs
// by predicted score (descending), lat_k(t) = best true latency among the first k, best(t) = best true
// latency of t.
//   pooled      = sum_t w_t best(t) / sum_t w_t lat_k(t)                       (TLP's "average")
//   group_mean  = mean over groups g of  sum_{t in g} w_t best(t) / sum_{t in g} w_t lat_k(t)
//                 (TenSet's mean of per-network scores; a group is a network or a data directory)
// Both are in (0, 1]; 1 means the model's top-k always contains the best program.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace tclm {

/// One task's programs as the evaluation sees them.
struct TaskRanking {
  std::vector<double> latencies;  // true mean cost of each program, seconds (> 0, finite)
  std::vector<float> scores;      // predicted score of each program, higher = faster; same size
  double weight = 1.0;            // how often the task occurs in its network (1 if unknown);
                                  // finite and > 0 (top-k scores throw otherwise)
  std::string group;              // network / directory name used by group_mean
};

struct TopKScore {
  double pooled = 0;      // TLP aggregation
  double group_mean = 0;  // TenSet aggregation
  double task_mean = 0;   // unweighted mean over tasks of best(t) / lat_k(t): every task counts the
                          // same, whatever its latency (the pooled score is dominated by the
                          // slowest tasks); tclm's early-stopping criterion
  int num_tasks = 0;
  int num_groups = 0;
};

/// top-k score of the predicted rankings. Ties in `scores` are broken by program index (stable
/// sort), which is what a search that keeps candidate order does; NaN scores rank after all others.
/// k >= 1; a task with fewer than k programs uses all of them. Tasks with no programs are ignored
/// (and so is a group with only such tasks); with no tasks left the result is all zeros.
/// Throws tclm::Error if k < 1, a task's latencies and scores differ in size, a latency is not
/// finite and > 0, or a non-empty task's weight is not finite and > 0.
TopKScore top_k_score(const std::vector<TaskRanking>& tasks, int k);

/// The exact expected top-k score of a uniformly random ranking of the same tasks (no sampling):
/// E[lat_k(t)] = sum_i l_(i) C(n-i, k-1) / C(n, k) over latencies sorted ascending l_(1) <= ... <= l_(n),
/// then aggregated as in top_k_score with E[lat_k] in place of lat_k. `scores` is ignored (it may
/// be empty); otherwise validated and thrown like top_k_score. Stable for n up to at least 1e5.
TopKScore expected_random_top_k_score(const std::vector<TaskRanking>& tasks, int k);

/// Pairwise ranking accuracy within tasks: over all pairs (i, j) of the same task whose true
/// latencies differ, the fraction where the predicted order agrees (a tie in scores counts 1/2).
/// Pooled over all pairs of all tasks; weights are not used. NaN scores count as lower than every
/// number (two NaNs tie). Returns 0.5 when there are no such pairs. O(n log n) per task. Throws
/// tclm::Error on a size mismatch or a latency that is not finite and > 0.
double pairwise_accuracy(const std::vector<TaskRanking>& tasks);

/// One setting against a baseline over the same seeds, paired by seed. In tclm's studies both runs
/// of a seed share the task split, the initialisation seed and the batch order, so the per-seed
/// difference removes the part of the seed-to-seed noise the two runs have in common (a test workload
/// that one seed's models all rank badly). Used by `tclm study-sampling` (a sampler against random and
/// against all data) and `tclm transfer` (TCL against each baseline).
struct PairedDifference {
  std::vector<int> seeds;     // seeds present in both, ascending
  std::vector<double> diffs;  // a - b for each of them, same order
  double mean = 0;            // mean of diffs (0 when there are none)
  double std = 0;             // sample standard deviation of diffs (n - 1); 0 when n < 2
  /// "ahead" when mean - std > 0, "behind" when mean + std < 0, "level" otherwise: also for n < 2
  /// (the spread is unknown; the study tables print "1 seed: no paired verdict" instead) and for |mean| < 0.0005 (a difference the 3-digit tables show as
  /// +0.000, e.g. two runs equal up to rounding). A setting counts as better only when its mean
  /// gain is larger than the seed-to-seed spread of the gain itself.
  std::string verdict() const;
};

/// a[s] - b[s] over the seeds s in both maps. Seeds in only one map are left out (`seeds` says which
/// were used). Throws tclm::Error if a value is not finite.
PairedDifference paired_by_seed(const std::map<int, double>& a, const std::map<int, double>& b);

/// "+0.028 ± 0.082 (+0.092, +0.056, -0.065)": mean ± std of the differences, then each seed's in
/// ascending seed order; "-" when no seed is in both.
std::string format_paired(const PairedDifference& d);

}  // namespace tclm
