// Ranking metrics of a cost model (tclm/metrics.h).
//
// Everything here is evaluation code that runs over whole held-out sets (thousands of tasks with
// thousands of programs each), so the per-task work is kept at O(n) for top-k and O(n log n) for
// pairwise accuracy instead of the obvious sort-everything / all-pairs versions.
#include "tclm/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "tclm/error.h"

namespace tclm {
namespace {

// std::to_string(double) prints 6 fixed decimals, which shows a 1e-7 s latency as 0.000000.
std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// Checks one task against the contract in metrics.h. `check_scores` is false for the random
// baseline, which ignores scores entirely (callers may leave them empty there); `check_weight` is
// false for pairwise accuracy, which does not use weights.
void validate_task(const TaskRanking& task, size_t task_index, bool check_scores,
                   bool check_weight) {
  const std::string where = "task " + std::to_string(task_index) +
                            (task.group.empty() ? "" : " (group '" + task.group + "')");
  if (check_scores && task.latencies.size() != task.scores.size()) {
    throw Error("metrics: " + where + " has " + std::to_string(task.latencies.size()) +
                " latencies but " + std::to_string(task.scores.size()) +
                " scores; they must be the same size");
  }
  for (size_t i = 0; i < task.latencies.size(); ++i) {
    const double l = task.latencies[i];
    if (!std::isfinite(l) || l <= 0) {
      throw Error("metrics: " + where + ", program " + std::to_string(i) + " has latency " +
                  number(l) + "; latencies must be finite and > 0");
    }
  }
  // A weight of 0 (or less) would let a group's denominator become 0, so it is refused rather than
  // silently producing NaN; drop such tasks before calling instead.
  if (check_weight && !task.latencies.empty() &&
      (!std::isfinite(task.weight) || task.weight <= 0)) {
    throw Error("metrics: " + where + " has weight " + number(task.weight) +
                "; weights must be finite and > 0");
  }
}

void validate_k(int k, const char* function) {
  if (k < 1) {
    throw Error(std::string("metrics: ") + function + " needs k >= 1, got " + std::to_string(k));
  }
}

// Ranking order of programs: higher score first, ties by lower index (what a stable sort by score
// gives). NaN scores rank after every number, so a diverged model is scored badly instead of
// breaking the comparator's strict weak ordering (which would be undefined behaviour).
bool ranks_before(const std::vector<float>& scores, size_t a, size_t b) {
  const float sa = scores[a], sb = scores[b];
  const bool nan_a = std::isnan(sa), nan_b = std::isnan(sb);
  if (nan_a != nan_b) return nan_b;
  if (!nan_a && sa != sb) return sa > sb;
  return a < b;
}

// lat_k(t): best true latency among the k programs ranked first. The order above is a strict total
// order, so nth_element selects exactly the first k of the stable sort, in O(n).
double predicted_top_k_latency(const TaskRanking& task, int k) {
  const size_t n = task.latencies.size();
  const size_t kk = std::min(n, static_cast<size_t>(k));
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  if (kk < n) {
    std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(kk), order.end(),
                     [&](size_t a, size_t b) { return ranks_before(task.scores, a, b); });
  }
  double best = task.latencies[order[0]];
  for (size_t i = 1; i < kk; ++i) best = std::min(best, task.latencies[order[i]]);
  return best;
}

// E[lat_k(t)] under a uniformly random ranking: the first k programs are a uniform k-subset, and
// the i-th smallest latency is its minimum with probability p_i = C(n-i, k-1) / C(n, k).
// The binomials overflow doubles long before n = 100000, so p_i is built as a running product:
//   p_1 = k / n,   p_{i+1} / p_i = C(n-i-1, k-1) / C(n-i, k-1) = (n-i-k+1) / (n-i).
// Every factor is in [0, 1], so the product only shrinks; underflow to 0 happens for terms that
// contribute nothing anyway, and p_i becomes exactly 0 from i = n-k+2 on.
double expected_random_top_k_latency(const TaskRanking& task, int k) {
  std::vector<double> sorted = task.latencies;
  std::sort(sorted.begin(), sorted.end());
  const double n = static_cast<double>(sorted.size());
  const double kk = std::min(n, static_cast<double>(k));
  double p = kk / n;
  double expected = 0;
  for (size_t i = 1; i <= sorted.size(); ++i) {  // i is the 1-based rank of the formula
    expected += p * sorted[i - 1];
    const double remaining = n - static_cast<double>(i);
    if (remaining <= 0) break;
    p *= (remaining - kk + 1) / remaining;
    if (p <= 0) break;
  }
  return expected;
}

// Aggregates per-task (best, lat_k) pairs the two ways metrics.h describes.
struct TaskTerm {
  double weighted_best;
  double weighted_top_k;
  const std::string* group;
};

TopKScore aggregate(const std::vector<TaskTerm>& terms) {
  TopKScore out;
  out.num_tasks = static_cast<int>(terms.size());
  if (terms.empty()) return out;  // no data: all zero, callers see num_tasks == 0

  double best_sum = 0, top_k_sum = 0, ratio_sum = 0;
  // std::map keeps the per-group sums in name order, so the result does not depend on task order
  // beyond floating-point summation within a group.
  std::map<std::string, std::pair<double, double>> groups;
  for (const TaskTerm& t : terms) {
    best_sum += t.weighted_best;
    top_k_sum += t.weighted_top_k;
    ratio_sum += t.weighted_best / t.weighted_top_k;
    auto& g = groups[*t.group];
    g.first += t.weighted_best;
    g.second += t.weighted_top_k;
  }
  out.pooled = best_sum / top_k_sum;
  out.task_mean = ratio_sum / static_cast<double>(terms.size());
  double group_sum = 0;
  for (const auto& [name, sums] : groups) group_sum += sums.first / sums.second;
  out.num_groups = static_cast<int>(groups.size());
  out.group_mean = group_sum / static_cast<double>(groups.size());
  return out;
}

template <typename TopKLatency>
TopKScore score_tasks(const std::vector<TaskRanking>& tasks, bool check_scores,
                      TopKLatency top_k_latency) {
  std::vector<TaskTerm> terms;
  terms.reserve(tasks.size());
  for (size_t t = 0; t < tasks.size(); ++t) {
    const TaskRanking& task = tasks[t];
    validate_task(task, t, check_scores, /*check_weight=*/true);
    if (task.latencies.empty()) continue;
    const double best = *std::min_element(task.latencies.begin(), task.latencies.end());
    terms.push_back({task.weight * best, task.weight * top_k_latency(task), &task.group});
  }
  return aggregate(terms);
}

// Fenwick tree of counts over score ranks 1..size, for counting already-seen scores below a rank.
class CountTree {
 public:
  explicit CountTree(size_t size) : tree_(size + 1, 0) {}
  void add(size_t rank) {
    for (size_t i = rank; i < tree_.size(); i += i & (~i + 1)) ++tree_[i];
  }
  // Number of added ranks <= rank.
  int64_t prefix(size_t rank) const {
    int64_t sum = 0;
    for (size_t i = rank; i > 0; i -= i & (~i + 1)) sum += tree_[i];
    return sum;
  }

 private:
  std::vector<int64_t> tree_;
};

// Adds one task's pair counts: `agree2` gets 2 per agreeing pair and 1 per score tie (so that it
// stays an exact integer), `pairs` the number of pairs with distinct latencies.
// Programs are visited in ascending latency, one equal-latency block at a time; every program
// already in the tree is strictly faster than the current block, so a pair agrees exactly when the
// faster program's score is higher.
void count_task_pairs(const TaskRanking& task, int64_t& agree2, int64_t& pairs) {
  const size_t n = task.latencies.size();
  if (n < 2) return;

  // Dense score ranks 1..m in ascending score order; NaN ranks lowest (consistent with top-k) and
  // NaN vs NaN is a tie.
  std::vector<size_t> by_score(n);
  std::iota(by_score.begin(), by_score.end(), size_t{0});
  std::sort(by_score.begin(), by_score.end(),
            [&](size_t a, size_t b) { return ranks_before(task.scores, b, a); });
  auto same_score = [&](size_t a, size_t b) {
    const float sa = task.scores[a], sb = task.scores[b];
    return sa == sb || (std::isnan(sa) && std::isnan(sb));
  };
  std::vector<size_t> rank(n);
  size_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    if (i == 0 || !same_score(by_score[i - 1], by_score[i])) ++m;
    rank[by_score[i]] = m;
  }

  std::vector<size_t> by_latency(n);
  std::iota(by_latency.begin(), by_latency.end(), size_t{0});
  std::sort(by_latency.begin(), by_latency.end(),
            [&](size_t a, size_t b) { return task.latencies[a] < task.latencies[b]; });

  CountTree seen(m);
  int64_t num_seen = 0;
  for (size_t begin = 0; begin < n;) {
    size_t end = begin;
    while (end < n && task.latencies[by_latency[end]] == task.latencies[by_latency[begin]]) ++end;
    for (size_t i = begin; i < end; ++i) {
      const size_t r = rank[by_latency[i]];
      const int64_t lower_or_equal = seen.prefix(r);
      const int64_t equal = lower_or_equal - seen.prefix(r - 1);
      const int64_t higher = num_seen - lower_or_equal;  // faster program scored higher: agrees
      agree2 += 2 * higher + equal;
      pairs += num_seen;
    }
    for (size_t i = begin; i < end; ++i) seen.add(rank[by_latency[i]]);
    num_seen += static_cast<int64_t>(end - begin);
    begin = end;
  }
}

}  // namespace

TopKScore top_k_score(const std::vector<TaskRanking>& tasks, int k) {
  validate_k(k, "top_k_score");
  return score_tasks(tasks, /*check_scores=*/true,
                     [k](const TaskRanking& task) { return predicted_top_k_latency(task, k); });
}

TopKScore expected_random_top_k_score(const std::vector<TaskRanking>& tasks, int k) {
  validate_k(k, "expected_random_top_k_score");
  return score_tasks(tasks, /*check_scores=*/false, [k](const TaskRanking& task) {
    return expected_random_top_k_latency(task, k);
  });
}

double pairwise_accuracy(const std::vector<TaskRanking>& tasks) {
  int64_t agree2 = 0, pairs = 0;
  for (size_t t = 0; t < tasks.size(); ++t) {
    validate_task(tasks[t], t, /*check_scores=*/true, /*check_weight=*/false);
    count_task_pairs(tasks[t], agree2, pairs);
  }
  if (pairs == 0) return 0.5;
  return static_cast<double>(agree2) / (2.0 * static_cast<double>(pairs));
}

PairedDifference paired_by_seed(const std::map<int, double>& a, const std::map<int, double>& b) {
  PairedDifference d;
  for (const auto& [seed, x] : a) {
    const auto it = b.find(seed);
    if (it == b.end()) continue;
    if (!std::isfinite(x) || !std::isfinite(it->second)) {
      throw Error("paired_by_seed: seed " + std::to_string(seed) + " has a value that is not finite");
    }
    d.seeds.push_back(seed);
    d.diffs.push_back(x - it->second);
  }
  const size_t n = d.diffs.size();
  if (n == 0) return d;
  for (double v : d.diffs) d.mean += v;
  d.mean /= static_cast<double>(n);
  if (n > 1) {
    double ss = 0;
    for (double v : d.diffs) ss += (v - d.mean) * (v - d.mean);
    d.std = std::sqrt(ss / static_cast<double>(n - 1));
  }
  return d;
}

std::string PairedDifference::verdict() const {
  // A mean that prints as +0.000 (identical runs, rounding) is no gain, however small its spread.
  if (diffs.size() < 2 || std::fabs(mean) < 0.0005) return "level";
  if (mean - std > 0) return "ahead";
  if (mean + std < 0) return "behind";
  return "level";
}

std::string format_paired(const PairedDifference& d) {
  if (d.diffs.empty()) return "-";
  auto sign = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%+.3f", v);
    // "-0.000" reads as a loss that is not there
    return std::string(buf) == "-0.000" ? std::string("+0.000") : std::string(buf);
  };
  std::string out = sign(d.mean);
  char buf[32];
  std::snprintf(buf, sizeof buf, " ± %.3f (", d.std);
  out += buf;
  for (size_t i = 0; i < d.diffs.size(); ++i) out += (i ? ", " : "") + sign(d.diffs[i]);
  return out + ")";
}

}  // namespace tclm
