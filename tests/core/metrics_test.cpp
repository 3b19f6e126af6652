// Tests of tclm/metrics.h against hand-computed values and brute-force enumerations.
#include "tclm/metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "tclm/error.h"

namespace tclm {
namespace {

TaskRanking make_task(std::vector<double> latencies, std::vector<float> scores, double weight,
                      std::string group) {
  TaskRanking t;
  t.latencies = std::move(latencies);
  t.scores = std::move(scores);
  t.weight = weight;
  t.group = std::move(group);
  return t;
}

// Three tasks in two groups plus an empty one (which must be ignored).
//   A (net1, w=1): latencies {4, 2, 1, 3}, scores {0.1, 0.9, 0.5, 0.9}
//        stable ranking by score: index 1 (0.9), index 3 (0.9, tie -> later index), 2, 0
//        ranked latencies: 2, 3, 1, 4; best = 1
//   B (net1, w=2): latencies {10, 5, 20}, scores {3, 2, 1} -> ranked 10, 5, 20; best = 5
//   C (net2, w=1): latencies {8, 6}, scores {1, 2}          -> ranked 6, 8;     best = 6
std::vector<TaskRanking> example_tasks() {
  return {make_task({4, 2, 1, 3}, {0.1f, 0.9f, 0.5f, 0.9f}, 1, "net1"),
          make_task({10, 5, 20}, {3, 2, 1}, 2, "net1"), make_task({8, 6}, {1, 2}, 1, "net2"),
          make_task({}, {}, 1, "net3")};
}

TEST(TopKScore, Top1ByHand) {
  // lat_1: A = 2, B = 10, C = 6.
  // pooled = (1*1 + 2*5 + 1*6) / (1*2 + 2*10 + 1*6) = 17 / 28
  // net1 = (1*1 + 2*5) / (1*2 + 2*10) = 11 / 22 = 0.5;  net2 = 6 / 6 = 1
  // group_mean = (0.5 + 1) / 2 = 0.75
  const TopKScore s = top_k_score(example_tasks(), 1);
  EXPECT_DOUBLE_EQ(s.pooled, 17.0 / 28.0);
  EXPECT_DOUBLE_EQ(s.group_mean, 0.75);
  // task_mean = (1/2 + 5/10 + 6/6) / 3 = 2/3 (weights do not enter a per-task ratio)
  EXPECT_DOUBLE_EQ(s.task_mean, 2.0 / 3.0);
  EXPECT_EQ(s.num_tasks, 3);   // the empty task is ignored
  EXPECT_EQ(s.num_groups, 2);  // ... and so is its group
}

TEST(TopKScore, Top2ByHand) {
  // lat_2: A = min(2, 3) = 2, B = min(10, 5) = 5, C = min(6, 8) = 6.
  // pooled = 17 / (2 + 2*5 + 6) = 17 / 18
  // net1 = 11 / (2 + 10) = 11 / 12;  net2 = 1;  group_mean = (11/12 + 1) / 2 = 23 / 24
  const TopKScore s = top_k_score(example_tasks(), 2);
  EXPECT_DOUBLE_EQ(s.pooled, 17.0 / 18.0);
  EXPECT_DOUBLE_EQ(s.group_mean, 23.0 / 24.0);
  // task_mean = (1/2 + 5/5 + 6/6) / 3 = 5/6
  EXPECT_DOUBLE_EQ(s.task_mean, 5.0 / 6.0);
}

TEST(TopKScore, Top3AndTop5FindTheBest) {
  // lat_3: A = min(2, 3, 1) = 1 = best; B and C have <= 3 programs, so all are used.
  for (int k : {3, 5, 100}) {
    const TopKScore s = top_k_score(example_tasks(), k);
    EXPECT_DOUBLE_EQ(s.pooled, 1.0) << "k=" << k;
    EXPECT_DOUBLE_EQ(s.group_mean, 1.0) << "k=" << k;
  }
}

TEST(TopKScore, WeightsChangePooledScore) {
  // Same tasks with B's weight 1 instead of 2:
  // pooled = (1 + 5 + 6) / (2 + 10 + 6) = 12 / 18 = 2/3
  // net1 = (1 + 5) / (2 + 10) = 1/2;  net2 = 1;  group_mean = 0.75
  std::vector<TaskRanking> tasks = example_tasks();
  tasks[1].weight = 1;
  const TopKScore s = top_k_score(tasks, 1);
  EXPECT_DOUBLE_EQ(s.pooled, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.group_mean, 0.75);
}

TEST(TopKScore, ScoreTiesBrokenByIndex) {
  // All scores equal: the ranking is the program order 0, 1, 2 (latencies 3, 1, 2).
  // top-1 = 1 / 3; top-2 = 1 / min(3, 1) = 1.
  const std::vector<TaskRanking> tasks = {make_task({3, 1, 2}, {0, 0, 0}, 1, "g")};
  EXPECT_DOUBLE_EQ(top_k_score(tasks, 1).pooled, 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(top_k_score(tasks, 2).pooled, 1.0);
}

TEST(TopKScore, NanScoresRankLast) {
  // Program 0 is the fastest but its score is NaN, so program 1 (latency 2) is ranked first: 1/2.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<TaskRanking> tasks = {make_task({1, 2, 4}, {nan, 0.5f, -1}, 1, "g")};
  EXPECT_DOUBLE_EQ(top_k_score(tasks, 1).pooled, 0.5);
}

TEST(TopKScore, NoTasksGivesZeros) {
  const TopKScore s = top_k_score({make_task({}, {}, 1, "g")}, 1);
  EXPECT_EQ(s.num_tasks, 0);
  EXPECT_EQ(s.num_groups, 0);
  EXPECT_EQ(s.pooled, 0);
  EXPECT_EQ(s.group_mean, 0);
}

TEST(TopKScore, RejectsBadInput) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(top_k_score({make_task({1, 2}, {1}, 1, "g")}, 1), Error);
  EXPECT_THROW(top_k_score({make_task({}, {1}, 1, "g")}, 1), Error);
  for (double bad : {0.0, -1.0, inf, nan}) {
    EXPECT_THROW(top_k_score({make_task({1, bad}, {1, 2}, 1, "g")}, 1), Error) << bad;
    EXPECT_THROW(expected_random_top_k_score({make_task({1, bad}, {}, 1, "g")}, 1), Error) << bad;
    EXPECT_THROW(pairwise_accuracy({make_task({1, bad}, {1, 2}, 1, "g")}), Error) << bad;
    EXPECT_THROW(top_k_score({make_task({1, 2}, {1, 2}, bad, "g")}, 1), Error) << bad;  // weight
  }
  EXPECT_THROW(top_k_score(example_tasks(), 0), Error);
  EXPECT_THROW(expected_random_top_k_score(example_tasks(), -1), Error);
  try {
    top_k_score({make_task({1, 2}, {1, 2}, 1, "a"), make_task({1, 2}, {1}, 1, "netX")}, 1);
    FAIL() << "expected tclm::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("task 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("netX"), std::string::npos) << e.what();
  }
}

// ----------------------------------------------------------------- expected random top-k

// E[lat_k] by enumerating every ordering of the programs.
double brute_force_expected_top_k(std::vector<double> latencies, int k) {
  std::vector<int> order(latencies.size());
  std::iota(order.begin(), order.end(), 0);
  const size_t kk = std::min(latencies.size(), static_cast<size_t>(k));
  double sum = 0;
  long count = 0;
  do {
    double best = latencies[order[0]];
    for (size_t i = 1; i < kk; ++i) best = std::min(best, latencies[order[i]]);
    sum += best;
    ++count;
  } while (std::next_permutation(order.begin(), order.end()));
  return sum / static_cast<double>(count);
}

TEST(ExpectedRandomTopK, ByHand) {
  // k = 1: E[lat_1] is the mean latency. A = (4+2+1+3)/4 = 5/2, B = 35/3, C = 7.
  // pooled = 17 / (5/2 + 2*35/3 + 7) = 17 / (197/6) = 102 / 197
  // net1 = 11 / (5/2 + 70/3) = 11 / (155/6) = 66 / 155;  net2 = 6 / 7
  TopKScore s = expected_random_top_k_score(example_tasks(), 1);
  EXPECT_DOUBLE_EQ(s.pooled, 102.0 / 197.0);
  EXPECT_DOUBLE_EQ(s.group_mean, (66.0 / 155.0 + 6.0 / 7.0) / 2);
  EXPECT_EQ(s.num_tasks, 3);
  EXPECT_EQ(s.num_groups, 2);

  // k = 2: A, sorted 1 2 3 4, the 6 pairs have minima 1 1 1 2 2 3 -> 10/6 = 5/3;
  //        B, sorted 5 10 20, pairs {5,10} {5,20} {10,20} -> (5+5+10)/3 = 20/3;  C -> 6.
  // pooled = 17 / (5/3 + 2*20/3 + 6) = 17 / 21
  s = expected_random_top_k_score(example_tasks(), 2);
  EXPECT_DOUBLE_EQ(s.pooled, 17.0 / 21.0);
}

TEST(ExpectedRandomTopK, IgnoresScores) {
  std::vector<TaskRanking> tasks = example_tasks();
  for (TaskRanking& t : tasks) t.scores.clear();
  EXPECT_DOUBLE_EQ(expected_random_top_k_score(tasks, 2).pooled, 17.0 / 21.0);
}

TEST(ExpectedRandomTopK, MatchesAllPermutations) {
  // Includes tied latencies and k >= n.
  const std::vector<std::vector<double>> cases = {
      {5}, {2, 1}, {3, 1, 3, 2, 1, 7}, {0.5, 0.25, 0.125, 4, 8, 2, 1}};
  for (const auto& lat : cases) {
    const double best = *std::min_element(lat.begin(), lat.end());
    for (int k = 1; k <= static_cast<int>(lat.size()) + 1; ++k) {
      const double expected = brute_force_expected_top_k(lat, k);
      const TopKScore s = expected_random_top_k_score({make_task(lat, {}, 1, "g")}, k);
      EXPECT_NEAR(s.pooled, best / expected, 1e-12) << "n=" << lat.size() << " k=" << k;
    }
  }
}

// C(n-i, k-1) / C(n, k) from log-gamma, independently of the implementation's running product.
double lgamma_probability(int n, int k, int i) {
  if (n - i < k - 1) return 0;
  auto log_choose = [](double a, double b) {
    return std::lgamma(a + 1) - std::lgamma(b + 1) - std::lgamma(a - b + 1);
  };
  return std::exp(log_choose(n - i, k - 1) - log_choose(n, k));
}

TEST(ExpectedRandomTopK, LargeTasksAreStable) {
  std::mt19937 rng(7);
  // Latencies 1..n in random order: E[min of a random k-subset of {1..n}] = (n+1)/(k+1),
  // so the score is 1 / ((n+1)/(k+1)) = (k+1)/(n+1).
  for (auto [n, k] : {std::pair{5000, 5}, std::pair{100000, 3}, std::pair{100000, 1}}) {
    std::vector<double> lat(n);
    std::iota(lat.begin(), lat.end(), 1.0);
    std::shuffle(lat.begin(), lat.end(), rng);
    const TopKScore s = expected_random_top_k_score({make_task(lat, {}, 1, "g")}, k);
    EXPECT_NEAR(s.pooled, (k + 1.0) / (n + 1.0), 1e-12 * (k + 1.0) / (n + 1.0))
        << "n=" << n << " k=" << k;
  }

  // Arbitrary latencies, n = 5000, k = 5, against the lgamma form of the formula.
  const int n = 5000, k = 5;
  std::uniform_real_distribution<double> dist(1e-4, 1e-2);
  std::vector<double> lat(n);
  for (double& l : lat) l = dist(rng);
  std::vector<double> sorted = lat;
  std::sort(sorted.begin(), sorted.end());
  double expected = 0, total_probability = 0;
  for (int i = 1; i <= n; ++i) {
    expected += sorted[i - 1] * lgamma_probability(n, k, i);
    total_probability += lgamma_probability(n, k, i);
  }
  EXPECT_NEAR(total_probability, 1.0, 1e-9);  // sanity check of the reference itself
  const TopKScore s = expected_random_top_k_score({make_task(lat, {}, 1, "g")}, k);
  EXPECT_NEAR(s.pooled, sorted[0] / expected, 1e-9 * sorted[0] / expected);
}

// ----------------------------------------------------------------- pairwise accuracy

TEST(PairwiseAccuracy, ByHand) {
  // Task 1: latencies {1, 2, 2, 4}, scores {4, 3, 1, 3}
  //   (0,1) 1<2, scores 4>3 agree 1      (0,2) 1<2, 4>1 agree 1      (0,3) 1<4, 4>3 agree 1
  //   (1,2) latency tie: skipped         (1,3) 2<4, 3=3 score tie 1/2 (2,3) 2<4, 1<3 disagree 0
  //   -> 3.5 / 5 = 0.7
  // Task 2: latencies {5, 3}, scores {1, 2}: the faster program 1 has the higher score -> 1 / 1
  // pooled over pairs: (3.5 + 1) / (5 + 1) = 0.75
  const TaskRanking t1 = make_task({1, 2, 2, 4}, {4, 3, 1, 3}, 1, "a");
  const TaskRanking t2 = make_task({5, 3}, {1, 2}, 7, "b");  // weight is not used
  EXPECT_DOUBLE_EQ(pairwise_accuracy({t1}), 0.7);
  EXPECT_DOUBLE_EQ(pairwise_accuracy({t2}), 1.0);
  EXPECT_DOUBLE_EQ(pairwise_accuracy({t1, t2}), 0.75);
  // Reversed scores: in task 1 agreements become disagreements, the tie stays 1/2 -> 1.5/5.
  EXPECT_DOUBLE_EQ(pairwise_accuracy({make_task({1, 2, 2, 4}, {-4, -3, -1, -3}, 1, "a")}), 0.3);
}

TEST(PairwiseAccuracy, NoComparablePairs) {
  EXPECT_DOUBLE_EQ(pairwise_accuracy({}), 0.5);
  EXPECT_DOUBLE_EQ(pairwise_accuracy({make_task({}, {}, 1, "g"), make_task({3}, {1}, 1, "g")}),
                   0.5);
  EXPECT_DOUBLE_EQ(pairwise_accuracy({make_task({2, 2, 2}, {1, 2, 3}, 1, "g")}), 0.5);
}

TEST(PairwiseAccuracy, RejectsSizeMismatch) {
  EXPECT_THROW(pairwise_accuracy({make_task({1, 2}, {1, 2, 3}, 1, "g")}), Error);
}

TEST(PairwiseAccuracy, MatchesAllPairsOnRandomTasksWithTies) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> small(1, 6);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<TaskRanking> tasks;
    double agree = 0;
    long pairs = 0;
    for (int t = 0; t < 3; ++t) {
      const int n = small(rng) * 5;
      TaskRanking task = make_task({}, {}, 1, "g");
      for (int i = 0; i < n; ++i) {
        task.latencies.push_back(small(rng));                          // many latency ties
        task.scores.push_back(i % 13 == 5 ? nan : small(rng) * 0.5f);  // many score ties, a NaN
      }
      for (int i = 0; i < n; ++i) {
        for (int j = i + 1; j < n; ++j) {
          if (task.latencies[i] == task.latencies[j]) continue;
          const int fast = task.latencies[i] < task.latencies[j] ? i : j;
          const int slow = fast == i ? j : i;
          // NaN ranks below every number; two NaNs tie.
          auto key = [&](int p) {
            return std::isnan(task.scores[p]) ? -1e30 : static_cast<double>(task.scores[p]);
          };
          ++pairs;
          agree += key(fast) > key(slow) ? 1.0 : key(fast) == key(slow) ? 0.5 : 0.0;
        }
      }
      tasks.push_back(std::move(task));
    }
    const double expected = pairs ? agree / static_cast<double>(pairs) : 0.5;
    EXPECT_NEAR(pairwise_accuracy(tasks), expected, 1e-12) << "trial " << trial;
  }
}


// Paired by seed: the K80 study's RDU and random top-1 (pooled) at 10%, seeds 0-2 (an earlier
// K80 sampler study), by hand: differences +0.092028, +0.056305, -0.064573; mean 0.027920; sample std
// sqrt(((0.064108)^2 + (0.028385)^2 + (0.092493)^2) / 2) = 0.082069.
TEST(PairedBySeed, MatchesAHandComputedStudy) {
  const std::map<int, double> rdu{{0, 0.830819}, {1, 0.831483}, {2, 0.703953}, {5, 0.9}};
  const std::map<int, double> random{{0, 0.738791}, {1, 0.775178}, {2, 0.768526}, {7, 0.1}};
  const PairedDifference d = paired_by_seed(rdu, random);
  ASSERT_EQ(d.seeds, (std::vector<int>{0, 1, 2}));  // seeds 5 and 7 have no partner
  EXPECT_NEAR(d.diffs[0], 0.092028, 1e-9);
  EXPECT_NEAR(d.diffs[2], -0.064573, 1e-9);
  EXPECT_NEAR(d.mean, 0.027920, 1e-6);
  EXPECT_NEAR(d.std, 0.082069, 1e-6);
  EXPECT_EQ(d.verdict(), "level");  // a mean gain smaller than its own spread
  EXPECT_EQ(format_paired(d), "+0.028 ± 0.082 (+0.092, +0.056, -0.065)");
  // Reversed: the same spread, the opposite sign.
  EXPECT_NEAR(paired_by_seed(random, rdu).mean, -0.027920, 1e-6);
}

TEST(PairedBySeed, VerdictNeedsTheGainToExceedItsSpread) {
  // Differences 0.03, 0.05, 0.04: mean 0.04, std 0.01 -> ahead; negated -> behind.
  const std::map<int, double> base{{0, 0.5}, {1, 0.5}, {2, 0.5}};
  const std::map<int, double> up{{0, 0.53}, {1, 0.55}, {2, 0.54}}, down{{0, 0.47}, {1, 0.45}, {2, 0.46}};
  EXPECT_EQ(paired_by_seed(up, base).verdict(), "ahead");
  EXPECT_EQ(paired_by_seed(down, base).verdict(), "behind");
  EXPECT_NEAR(paired_by_seed(up, base).std, 0.01, 1e-12);
  // One seed: no spread, never "ahead".
  const PairedDifference one = paired_by_seed({{3, 0.9}}, {{3, 0.1}});
  EXPECT_EQ(one.std, 0.0);
  EXPECT_EQ(one.verdict(), "level");
  EXPECT_EQ(format_paired(one), "+0.800 ± 0.000 (+0.800)");
  // A tiny mean with a tinier spread (runs equal up to rounding) is level, not ahead.
  EXPECT_EQ(paired_by_seed({{0, 0.50001}, {1, 0.50002}}, {{0, 0.5}, {1, 0.5}}).verdict(), "level");
  // No common seed.
  EXPECT_EQ(format_paired(paired_by_seed({{0, 1.0}}, {{1, 1.0}})), "-");
  // A rounded-away loss is not printed as "-0.000".
  EXPECT_EQ(format_paired(paired_by_seed({{0, 0.5}}, {{0, 0.5000001}})), "+0.000 ± 0.000 (+0.000)");
  EXPECT_THROW(paired_by_seed({{0, std::nan("")}}, {{0, 1.0}}), Error);
}

}  // namespace
}  // namespace tclm
