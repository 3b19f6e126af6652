// Tests of the active samplers (tclm/sample.h, TCL-SPEC §6):
//   (1) the contract of every method: exact count, distinct, none already selected, deterministic;
//   (2) k-center / BALTO on hand-made 1-D points whose farthest-first order is known;
//   (3) rdu on well-separated Gaussian blobs of very different sizes: every blob covered (random
//       misses the small ones), quotas ∝ size as computed by hand, picks near the centres, the
//       staging (prefilter) and the uncertainty term each change the picks as documented;
//   (4) the quota rule by hand; per-task selection counts; edge cases and errors.
#include "tclm/sample.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "sample/sample_internal.h"
#include "tclm/error.h"

namespace tclm {
namespace {

// The message of the tclm::Error that f throws ("" if none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// K Gaussian blobs (sigma 1) in `dim` dims with centres ~100 apart, rows shuffled so that blob
// membership is not a contiguous index range.
struct Blobs {
  std::size_t dim = 0;
  std::vector<float> x;           // [n, dim]
  std::vector<int> blob;          // [n]
  std::vector<std::vector<double>> centre;
  std::size_t n() const { return blob.size(); }
};

Blobs make_blobs(const std::vector<int>& sizes, std::size_t dim, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  Blobs b;
  b.dim = dim;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    std::vector<double> c(dim);
    for (auto& v : c) v = 60.0 * nd(gen);  // pairwise distance ~ 60 * sqrt(2 * dim) >> 1
    b.centre.push_back(c);
  }
  std::vector<std::pair<int, std::vector<float>>> rows;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    for (int i = 0; i < sizes[k]; ++i) {
      std::vector<float> r(dim);
      for (std::size_t j = 0; j < dim; ++j) r[j] = static_cast<float>(b.centre[k][j] + nd(gen));
      rows.emplace_back(static_cast<int>(k), r);
    }
  }
  std::shuffle(rows.begin(), rows.end(), gen);
  for (auto& [k, r] : rows) {
    b.blob.push_back(k);
    b.x.insert(b.x.end(), r.begin(), r.end());
  }
  return b;
}

const std::vector<int> kBlobSizes = {2000, 600, 150, 30, 8};

std::vector<float> uniform_points(std::size_t n, std::size_t dim, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> ud(-1.f, 1.f);
  std::vector<float> x(n * dim);
  for (auto& v : x) v = ud(gen);
  return x;
}

std::vector<int> picks_per_blob(const Blobs& b, const std::vector<uint32_t>& picks) {
  std::vector<int> c(b.centre.size(), 0);
  for (uint32_t p : picks) ++c[b.blob[p]];
  return c;
}

SamplerOptions with_method(SampleMethod m) {
  SamplerOptions o;
  o.method = m;
  return o;
}

const SampleMethod kAllMethods[] = {SampleMethod::kRdu, SampleMethod::kRandom,
                                    SampleMethod::kUncertainty, SampleMethod::kKCenter,
                                    SampleMethod::kBalto};

// ---------------------------------------------------------------------------------------------
TEST(SampleMethodNames, RoundTripAndUnknownNameListsValidOnes) {
  for (SampleMethod m : kAllMethods) EXPECT_EQ(parse_sample_method(sample_method_name(m)), m);
  const std::string msg = error_of([] { parse_sample_method("coreset"); });
  EXPECT_NE(msg.find("unknown sampling method 'coreset'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rdu, random, uncertainty, kcenter, balto"), std::string::npos) << msg;
}

// Every method: exactly `budget` distinct rows in range, none of the earlier picks.
TEST(SampleContract, ExactCountDistinctNoOverlapWithSelected) {
  const std::size_t n = 700, dim = 6;
  const auto x = uniform_points(n, dim, 1);
  std::vector<float> unc(n), score(n);
  for (std::size_t i = 0; i < n; ++i) {
    unc[i] = static_cast<float>((i * 37) % 101);
    score[i] = static_cast<float>((i * 53) % 97);
  }
  std::vector<uint32_t> selected;
  for (uint32_t i = 0; i < n; i += 9) selected.push_back(i);  // 78 earlier picks
  SamplePool pool{x, dim, unc, score, selected};
  for (SampleMethod m : kAllMethods) {
    const auto picks = select_samples(pool, 100, with_method(m));
    ASSERT_EQ(picks.size(), 100u) << sample_method_name(m);
    std::set<uint32_t> uniq(picks.begin(), picks.end());
    EXPECT_EQ(uniq.size(), 100u) << sample_method_name(m);
    for (uint32_t p : picks) {
      EXPECT_LT(p, n) << sample_method_name(m);
      EXPECT_NE(p % 9, 0u) << sample_method_name(m) << " picked an earlier pick " << p;
    }
  }
}

TEST(SampleContract, DeterministicPerSeedAndSeedMatters) {
  const std::size_t n = 600, dim = 5;
  const auto x = uniform_points(n, dim, 2);
  std::vector<float> unc(n);
  for (std::size_t i = 0; i < n; ++i) unc[i] = static_cast<float>(std::sin(0.1 * i));
  SamplePool pool{x, dim, unc, {}, {}};
  for (SampleMethod m : {SampleMethod::kRdu, SampleMethod::kRandom, SampleMethod::kKCenter}) {
    SamplerOptions o = with_method(m);
    o.seed = 7;
    EXPECT_EQ(select_samples(pool, 50, o), select_samples(pool, 50, o)) << sample_method_name(m);
  }
  SamplerOptions a = with_method(SampleMethod::kRandom), b = a;
  b.seed = 1;
  EXPECT_NE(select_samples(pool, 50, a), select_samples(pool, 50, b));
}

// rdu and k-center do not depend on the OpenMP thread count (fixed blocks, ordered reductions).
TEST(SampleContract, SameResultForOneAndTwoThreads) {
  const Blobs b = make_blobs(kBlobSizes, 8, 3);
  std::vector<float> unc(b.n());
  for (std::size_t i = 0; i < b.n(); ++i) unc[i] = static_cast<float>((i * 7919) % 1000);
  SamplePool pool{b.x, b.dim, unc, {}, {}};
  for (SampleMethod m : {SampleMethod::kRdu, SampleMethod::kKCenter}) {
    SamplerOptions o1 = with_method(m), o2 = o1;
    o1.threads = 1;
    o2.threads = 2;
    EXPECT_EQ(select_samples(pool, 120, o1), select_samples(pool, 120, o2)) << sample_method_name(m);
  }
}

// ---------------------------------------------------------------------------------------------
// 1-D points 0, 1, 2, 10, 11, 20, 100 with row 0 (value 0) already measured. Farthest first:
// 100 (row 6, distance 100); then 20 (row 5: min(20, 80)); then among 1, 2, 10, 11 the distances
// to {0, 20, 100} are 1, 2, 10, 9, so 10 (row 3); then 11 -> 1 now, 2 -> 2, 1 -> 1: row 2.
// Standardization is an affine map in 1-D, so the order is the same.
TEST(KCenter, FarthestFirstOnHandMadePoints) {
  const std::vector<float> x = {0, 1, 2, 10, 11, 20, 100};
  const std::vector<uint32_t> selected = {0};
  SamplePool pool{x, 1, {}, {}, selected};
  EXPECT_EQ(select_samples(pool, 4, with_method(SampleMethod::kKCenter)),
            (std::vector<uint32_t>{6, 5, 3, 2}));
}

// Without earlier picks the first pick is a seeded random point and the second is the point
// farthest from it: one of the two ends of the line.
TEST(KCenter, ColdStartSecondPickIsAnEnd) {
  const std::vector<float> x = {0, 1, 2, 10, 11, 20, 100};
  SamplePool pool{x, 1, {}, {}, {}};
  for (uint64_t seed = 0; seed < 5; ++seed) {
    SamplerOptions o = with_method(SampleMethod::kKCenter);
    o.seed = seed;
    const auto p = select_samples(pool, 2, o);
    const uint32_t expected = x[p[0]] >= 50 ? 0u : 6u;
    EXPECT_EQ(p[1], expected) << "first pick " << p[0];
  }
}

// Rows 1 (-10) and 2 (+10) are equally far from the measured row 0 (0). k-center breaks the tie
// by the lower index; BALTO prefers the better-predicted one (row 2's score is higher).
TEST(Balto, BiasBreaksDistanceTieTowardsBetterPrediction) {
  const std::vector<float> x = {0, -10, 10};
  const std::vector<float> score = {0.f, 1.f, 2.f};
  const std::vector<uint32_t> selected = {0};
  SamplePool pool{x, 1, {}, score, selected};
  EXPECT_EQ(select_samples(pool, 1, with_method(SampleMethod::kKCenter)), (std::vector<uint32_t>{1}));
  EXPECT_EQ(select_samples(pool, 1, with_method(SampleMethod::kBalto)), (std::vector<uint32_t>{2}));
  // bias 0 is plain k-center
  SamplerOptions o = with_method(SampleMethod::kBalto);
  o.balto_bias = 0.0;
  EXPECT_EQ(select_samples(pool, 1, o), (std::vector<uint32_t>{1}));
}

// Points 0..9 on a line, scores = value. BALTO's first pick (nothing measured) is the best
// predicted (row 9). Next: key = d^2 * (1 + p) with p = i / 9: row 0 gives 81 * 1 = 81, row 1
// gives 64 * (1 + 1/9) = 71.1, so row 0 (the far end still wins over a closer, better one) ...
// but with bias 4 row 1 gives 64 * (1 + 4/9) = 92.4 > 81 and row 2 gives 49 * (1 + 8/9) = 92.6:
// row 2 is picked.
TEST(Balto, BiasTradesDistanceForPredictedScore) {
  std::vector<float> x(10), score(10);
  for (int i = 0; i < 10; ++i) x[i] = score[i] = static_cast<float>(i);
  SamplePool pool{x, 1, {}, score, {}};
  SamplerOptions o = with_method(SampleMethod::kBalto);
  EXPECT_EQ(select_samples(pool, 2, o), (std::vector<uint32_t>{9, 0}));
  o.balto_bias = 4.0;
  EXPECT_EQ(select_samples(pool, 2, o), (std::vector<uint32_t>{9, 2}));
}

// ---------------------------------------------------------------------------------------------
// Quota rule (docs/sampler.md): one pick for every uncovered cluster, the rest ∝ the deficit
// against the share (already + budget) * size / n, largest remainders.
TEST(RduQuotas, ByHand) {
  using sample_detail::cluster_quotas;
  const std::vector<int64_t> size = {2000, 600, 150, 30, 8};
  // shares 40 * size / 2788 = 28.69, 8.61, 2.15, 0.43, 0.11; one each, then 35 ∝ deficits
  // 27.69, 7.61, 1.15 -> 26.59, 7.31, 1.11 -> floors 26, 7, 1 and the last one to the 0.59.
  EXPECT_EQ(cluster_quotas(size, {0, 0, 0, 0, 0}, 40), (std::vector<int64_t>{28, 8, 2, 1, 1}));
  // second round: 80 in all, shares 57.39, 17.22, 4.30, 0.86, 0.23 minus the 28, 8, 2, 1, 1 already
  // there: deficits 29.39, 9.22, 2.30 -> 40 ∝ them = 28.73, 9.01, 2.25 -> 28, 9, 2 (+1 to the 0.73)
  EXPECT_EQ(cluster_quotas(size, {28, 8, 2, 1, 1}, 40), (std::vector<int64_t>{29, 9, 2, 0, 0}));
  // budget below the cluster count: the largest uncovered clusters get one each
  EXPECT_EQ(cluster_quotas(size, {0, 0, 0, 0, 0}, 3), (std::vector<int64_t>{1, 1, 1, 0, 0}));
  // a cluster that already has more than its share gets nothing
  EXPECT_EQ(cluster_quotas({10, 1000, 5}, {9, 0, 0}, 500), (std::vector<int64_t>{0, 498, 2}));
  // equal remainders: ties by size, then by cluster order
  EXPECT_EQ(cluster_quotas({100, 100}, {0, 0}, 7), (std::vector<int64_t>{4, 3}));
  // the whole pool: every cluster gets all its candidates (caps)
  EXPECT_EQ(cluster_quotas({2, 3, 50}, {1, 0, 10}, 44), (std::vector<int64_t>{1, 3, 40}));
}

// k = ceil(budget / picks_per_cluster): 40 / 1 = 40 (the default), 40 / 4 = 10, 40 / 3 = 13.33 -> 14;
// below 1 is refused.
TEST(Rdu, PicksPerClusterSetsTheNumberOfClusters) {
  const Blobs b = make_blobs(kBlobSizes, 8, 4);
  SamplePool pool{b.x, b.dim, {}, {}, {}};
  EXPECT_EQ(SamplerOptions{}.picks_per_cluster, 1.0);
  for (auto [ppc, k] : {std::pair{4.0, 10}, {1.0, 40}, {3.0, 14}, {40.0, 1}}) {
    SamplerOptions o = with_method(SampleMethod::kRdu);
    o.picks_per_cluster = ppc;
    SampleReport rep;
    EXPECT_EQ(select_samples(pool, 40, o, &rep).size(), 40u);
    EXPECT_EQ(rep.n_clusters, k) << "picks_per_cluster " << ppc;
  }
  SamplerOptions bad = with_method(SampleMethod::kRdu);
  bad.picks_per_cluster = 0.5;
  EXPECT_THROW(select_samples(pool, 40, bad), Error);
}

// Blobs of 2000, 600, 150, 30 and 8 points; budget 40 (k = 10 clusters with 4 picks per cluster;
// the default of 1 gives 40 clusters, an easier case). rdu covers every blob: k-means++ seeding
// puts a centre in each far-away blob and every cluster gets a pick.
// Random sampling misses the 8-point blob with probability (1 - 8/2788)^40 = 0.89, so most seeds
// leave a blob out.
TEST(Rdu, CoversEveryBlobWhereRandomMissesSmallOnes) {
  const Blobs b = make_blobs(kBlobSizes, 8, 4);
  SamplePool pool{b.x, b.dim, {}, {}, {}};
  int random_missed = 0;
  for (uint64_t seed = 0; seed < 10; ++seed) {
    SamplerOptions o = with_method(SampleMethod::kRdu);
    o.seed = seed;
    o.picks_per_cluster = 4;
    SampleReport rep;
    const auto per_blob = picks_per_blob(b, select_samples(pool, 40, o, &rep));
    EXPECT_EQ(rep.n_clusters, 10);
    for (std::size_t k = 0; k < per_blob.size(); ++k)
      EXPECT_GE(per_blob[k], 1) << "seed " << seed << " missed blob " << k;
    o.method = SampleMethod::kRandom;
    const auto rnd = picks_per_blob(b, select_samples(pool, 40, o));
    if (*std::min_element(rnd.begin(), rnd.end()) == 0) ++random_missed;
  }
  EXPECT_GE(random_missed, 7);
}

// With k = 5 clusters, one per blob, the picks per blob are exactly the hand-computed quotas
// (RduQuotas.ByHand): 28, 8, 2, 1, 1 — proportional to size, every blob at least one.
TEST(Rdu, QuotaProportionalToBlobSize) {
  const Blobs b = make_blobs(kBlobSizes, 8, 5);
  SamplePool pool{b.x, b.dim, {}, {}, {}};
  SamplerOptions o = with_method(SampleMethod::kRdu);
  o.n_clusters = 5;
  SampleReport rep;
  const auto picks = select_samples(pool, 40, o, &rep);
  // every cluster is exactly one blob
  std::vector<int> cluster_blob(5, -1);
  for (std::size_t i = 0; i < b.n(); ++i) {
    int& cb = cluster_blob[rep.cluster_of[i]];
    if (cb < 0) cb = b.blob[i];
    ASSERT_EQ(cb, b.blob[i]) << "cluster " << rep.cluster_of[i] << " mixes blobs";
  }
  EXPECT_EQ(picks_per_blob(b, picks), (std::vector<int>{28, 8, 2, 1, 1}));
  for (int c = 0; c < 5; ++c) {
    EXPECT_EQ(rep.cluster_size[c], kBlobSizes[cluster_blob[c]]);
    // the prefilter keeps ceil(0.3 * size) (at least the quota)
    const auto pre = static_cast<int64_t>(std::ceil(0.3 * kBlobSizes[cluster_blob[c]] - 1e-9));
    EXPECT_EQ(rep.cluster_kept[c], std::max<int64_t>(pre, rep.cluster_quota[c]));
  }
}

double mean_distance_to_centre(const Blobs& b, const std::vector<uint32_t>& picks, int blob) {
  double sum = 0;
  int count = 0;
  for (uint32_t p : picks) {
    if (b.blob[p] != blob) continue;
    double s = 0;
    for (std::size_t j = 0; j < b.dim; ++j) {
      const double t = b.x[p * b.dim + j] - b.centre[blob][j];
      s += t * t;
    }
    sum += std::sqrt(s);
    ++count;
  }
  return sum / count;
}

// Representativeness: the prefilter keeps the inner 30% of each cluster, so rdu's 28 picks in
// the big blob are closer to its centre than random picks (in 8-D a Gaussian's 30% quantile of the
// radius is ~2.4 sigma, its mean radius ~2.7 sigma, and diversity pushes picks to the kept rim, so
// the margin is modest but the order is certain over 10 random draws).
TEST(Rdu, PicksCloserToCentreThanRandom) {
  const Blobs b = make_blobs(kBlobSizes, 8, 6);
  SamplePool pool{b.x, b.dim, {}, {}, {}};
  SamplerOptions o = with_method(SampleMethod::kRdu);
  o.n_clusters = 5;
  const double rdu = mean_distance_to_centre(b, select_samples(pool, 40, o), 0);
  double rnd = 0;
  for (uint64_t seed = 0; seed < 10; ++seed) {
    o.method = SampleMethod::kRandom;
    o.seed = seed;
    rnd += mean_distance_to_centre(b, select_samples(pool, 40, o), 0) / 10;
  }
  EXPECT_LT(rdu, 0.93 * rnd) << "rdu " << rdu << " random " << rnd;
  // with R alone (no diversity) the picks are the most central ones: far closer still
  o.method = SampleMethod::kRdu;
  o.w_div = 0.0;
  const double central = mean_distance_to_centre(b, select_samples(pool, 40, o), 0);
  EXPECT_LT(central, 0.75 * rnd) << "central " << central << " random " << rnd;
  EXPECT_LT(central, rdu);
}

// Diversity: one cluster whose kept set is two tight groups, A at -1 and B at +1.05 (20 points
// each, spread 0.01), plus 60 outliers at +-5..5.5 that the 40% prefilter removes. The centre is
// near 0.01, so A is slightly more representative. Without diversity both picks are the two most
// central points (both in A); with it the second pick goes to B (max-min distance: D ~ 1 in B,
// ~0 in A, against an R difference of ~0.003).
TEST(Rdu, DiversitySpreadsPicksInsideCluster) {
  std::vector<float> x;
  std::vector<int> side;
  for (int i = 0; i < 20; ++i) {
    x.push_back(-1.f + 0.0005f * i);
    side.push_back(-1);
  }
  for (int i = 0; i < 20; ++i) {
    x.push_back(1.05f + 0.0005f * i);
    side.push_back(1);
  }
  for (int j = 0; j < 30; ++j) {
    for (float sign : {-1.f, 1.f}) {
      x.push_back(sign * 5.f * (1.f + 0.003f * j));
      side.push_back(0);
    }
  }
  SamplePool pool{x, 1, {}, {}, {}};
  SamplerOptions o = with_method(SampleMethod::kRdu);
  o.n_clusters = 1;
  o.prefilter_fraction = 0.4;
  SampleReport rep;
  const auto div = select_samples(pool, 2, o, &rep);
  ASSERT_EQ(div.size(), 2u);
  EXPECT_EQ(rep.cluster_kept[0], 40);
  EXPECT_EQ(div[0], 19u);  // the A point nearest the centre (D = 1 for all before any pick)
  EXPECT_EQ(side[div[1]], 1) << "second pick " << div[1] << " should be in group B";
  o.w_div = 0.0;
  EXPECT_EQ(select_samples(pool, 2, o), (std::vector<uint32_t>{19, 18}));
}

// With only the uncertainty term and no prefilter (fraction 1), rdu picks in every cluster the
// quota most uncertain points: the most uncertain within the quotas.
// The `quota` points of highest `value` in every cluster of the report (distinct values).
std::set<uint32_t> highest_per_cluster(const SampleReport& rep, const std::vector<float>& value) {
  std::set<uint32_t> out;
  for (int c = 0; c < rep.n_clusters; ++c) {
    std::vector<uint32_t> members;
    for (uint32_t i = 0; i < rep.cluster_of.size(); ++i)
      if (rep.cluster_of[i] == c) members.push_back(i);
    std::sort(members.begin(), members.end(), [&](uint32_t a, uint32_t z) { return value[a] > value[z]; });
    for (int64_t j = 0; j < rep.cluster_quota[c]; ++j) out.insert(members[j]);
  }
  return out;
}

TEST(Rdu, UncertaintyOnlyPicksMostUncertainWithinQuotas) {
  const Blobs b = make_blobs(kBlobSizes, 8, 7);
  std::vector<float> unc(b.n());
  for (std::size_t i = 0; i < b.n(); ++i) unc[i] = static_cast<float>((i * 7919) % 2789);  // distinct
  SamplePool pool{b.x, b.dim, unc, {}, {}};
  SamplerOptions o = with_method(SampleMethod::kRdu);
  o.n_clusters = 5;
  o.w_repr = 0.0;
  o.w_div = 0.0;
  o.prefilter_fraction = 1.0;
  SampleReport rep;
  const auto picks = select_samples(pool, 40, o, &rep);
  EXPECT_EQ(std::set<uint32_t>(picks.begin(), picks.end()), highest_per_cluster(rep, unc));
}

// Predicted speed alone (w_repr = w_div = 0): the cheap pass keeps, and the greedy pass takes, the
// candidates of highest predicted score in every cluster, so the picks are each cluster's `quota`
// best-predicted points; the quotas are those of the clusters, whatever the scores.
TEST(Rdu, PredictedSpeedAlonePicksEachClustersBestPredicted) {
  const Blobs b = make_blobs(kBlobSizes, 8, 17);
  std::vector<float> score(b.n());
  for (std::size_t i = 0; i < b.n(); ++i) score[i] = static_cast<float>((i * 7919) % 2789);  // distinct
  SamplePool pool{b.x, b.dim, {}, score, {}};
  SamplerOptions o = with_method(SampleMethod::kRdu);
  o.n_clusters = 5;
  o.w_repr = 0.0;
  o.w_div = 0.0;
  o.w_fast = 1.0;
  SampleReport rep;
  const auto picks = select_samples(pool, 40, o, &rep);
  EXPECT_EQ(picks_per_blob(b, picks), (std::vector<int>{28, 8, 2, 1, 1}));
  EXPECT_EQ(std::set<uint32_t>(picks.begin(), picks.end()), highest_per_cluster(rep, score));
}

// With R and D at their defaults, w_fast = 1 moves the picks towards better-predicted programs inside
// the clusters (a higher mean percentile of the picks' scores) without changing how many each
// cluster gets; scores with w_fast = 0 change nothing.
TEST(Rdu, PredictedSpeedLeansPicksTowardsFastWithinClusters) {
  const Blobs b = make_blobs(kBlobSizes, 8, 18);
  std::vector<float> score(b.n());
  for (std::size_t i = 0; i < b.n(); ++i) score[i] = static_cast<float>((i * 104729) % 7919);
  std::vector<double> pct(b.n());
  {
    std::vector<uint32_t> order(b.n());
    std::iota(order.begin(), order.end(), 0u);
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t z) { return score[a] < score[z]; });
    for (std::size_t r = 0; r < order.size(); ++r) pct[order[r]] = static_cast<double>(r) / (b.n() - 1);
  }
  auto mean_pct = [&](const std::vector<uint32_t>& picks) {
    double m = 0;
    for (uint32_t p : picks) m += pct[p];
    return m / static_cast<double>(picks.size());
  };
  SamplerOptions o = with_method(SampleMethod::kRdu);
  o.n_clusters = 5;
  const auto plain = select_samples(SamplePool{b.x, b.dim, {}, {}, {}}, 40, o);  // no scores: no F
  o.w_fast = 0.0;
  EXPECT_EQ(select_samples(SamplePool{b.x, b.dim, {}, score, {}}, 40, o), plain);
  o.w_fast = 1.0;
  const auto fast = select_samples(SamplePool{b.x, b.dim, {}, score, {}}, 40, o);
  EXPECT_EQ(picks_per_blob(b, fast), picks_per_blob(b, plain));
  EXPECT_GT(mean_pct(fast), mean_pct(plain) + 0.3) << mean_pct(fast) << " vs " << mean_pct(plain);
}

// Staging: the most uncertain points sit on the blobs' rims. With the default 30% prefilter they
// are outside the kept (central) set and are not picked even with w_unc alone; without the
// prefilter they are.
TEST(Rdu, PrefilterKeepsRimPointsOutEvenWhenUncertain) {
  const Blobs b = make_blobs(kBlobSizes, 8, 8);
  // uncertainty = distance to the blob's true centre: the rim is the most uncertain
  std::vector<float> unc(b.n());
  std::vector<double> radius(b.n());
  for (std::size_t i = 0; i < b.n(); ++i) {
    double s = 0;
    for (std::size_t j = 0; j < b.dim; ++j) {
      const double t = b.x[i * b.dim + j] - b.centre[b.blob[i]][j];
      s += t * t;
    }
    radius[i] = std::sqrt(s);
    unc[i] = static_cast<float>(radius[i]);
  }
  SamplePool pool{b.x, b.dim, unc, {}, {}};
  SamplerOptions o = with_method(SampleMethod::kRdu);
  o.n_clusters = 5;
  o.w_repr = 0.0;
  o.w_div = 0.0;
  const auto staged = select_samples(pool, 40, o);
  o.prefilter_fraction = 1.0;
  const auto unstaged = select_samples(pool, 40, o);
  EXPECT_LT(mean_distance_to_centre(b, staged, 0), 0.8 * mean_distance_to_centre(b, unstaged, 0));
}

// Earlier rounds: new picks avoid them, and a cluster covered before gets only its deficit.
TEST(Rdu, SecondRoundUsesEarlierPicks) {
  const Blobs b = make_blobs(kBlobSizes, 8, 9);
  SamplePool pool{b.x, b.dim, {}, {}, {}};
  SamplerOptions o = with_method(SampleMethod::kRdu);
  o.n_clusters = 5;
  const auto first = select_samples(pool, 40, o);
  pool.selected = first;
  const auto second = select_samples(pool, 40, o);
  ASSERT_EQ(second.size(), 40u);
  std::set<uint32_t> s1(first.begin(), first.end());
  for (uint32_t p : second) EXPECT_EQ(s1.count(p), 0u);
  EXPECT_EQ(picks_per_blob(b, second), (std::vector<int>{29, 9, 2, 0, 0}));  // RduQuotas.ByHand
}

// ---------------------------------------------------------------------------------------------
TEST(Uncertainty, ExactlyTheTopUncertainTiesByIndex) {
  const std::vector<float> x(8 * 2, 0.5f);
  const std::vector<float> unc = {0.1f, 0.9f, 0.5f, 0.9f, 0.2f, 0.7f, 0.5f, 0.0f};
  const std::vector<uint32_t> selected = {1};
  SamplePool pool{x, 2, unc, {}, selected};
  // 0.9 (row 3; row 1 is measured), 0.7 (row 5), 0.5 (rows 2 and 6: the lower index first)
  EXPECT_EQ(select_samples(pool, 3, with_method(SampleMethod::kUncertainty)),
            (std::vector<uint32_t>{3, 5, 2}));
  EXPECT_EQ(select_samples(pool, 4, with_method(SampleMethod::kUncertainty)),
            (std::vector<uint32_t>{3, 5, 2, 6}));
}

TEST(SampleEdges, BudgetCoveringThePoolReturnsEveryCandidate) {
  const auto x = uniform_points(50, 3, 10);
  const std::vector<uint32_t> selected = {4, 7};
  std::vector<uint32_t> rest;
  for (uint32_t i = 0; i < 50; ++i)
    if (i != 4 && i != 7) rest.push_back(i);
  std::vector<float> unc(50, 1.f), score(50, 1.f);
  SamplePool pool{x, 3, unc, score, selected};
  for (SampleMethod m : kAllMethods) {
    auto p = select_samples(pool, 1000, with_method(m));
    std::sort(p.begin(), p.end());
    EXPECT_EQ(p, rest) << sample_method_name(m);
  }
}

TEST(SampleEdges, EmptyPoolAndZeroBudgetGiveEmptyResults) {
  SamplePool empty{{}, 4, {}, {}, {}};
  EXPECT_TRUE(select_samples(empty, 10, SamplerOptions{}).empty());
  const auto x = uniform_points(20, 4, 11);
  SamplePool pool{x, 4, {}, {}, {}};
  EXPECT_TRUE(select_samples(pool, 0, SamplerOptions{}).empty());
}

// All points identical: no dim varies, rdu and k-center still return distinct picks.
TEST(SampleEdges, ConstantPoolStillGivesDistinctPicks) {
  const std::vector<float> x(30 * 3, 2.5f);
  SamplePool pool{x, 3, {}, {}, {}};
  for (SampleMethod m : {SampleMethod::kRdu, SampleMethod::kKCenter}) {
    SampleReport rep;
    const auto p = select_samples(pool, 7, with_method(m), &rep);
    EXPECT_EQ(std::set<uint32_t>(p.begin(), p.end()).size(), 7u) << sample_method_name(m);
    EXPECT_EQ(rep.used_dims, 0);
  }
}

TEST(SampleErrors, BadInputsAreRefusedWithAClearMessage) {
  const auto x = uniform_points(10, 2, 12);
  auto msg = [](SamplePool p, SamplerOptions o = {}) {
    return error_of([&] { select_samples(p, 3, o); });
  };
  EXPECT_NE(msg({x, 0, {}, {}, {}}).find("dim is 0"), std::string::npos);
  EXPECT_NE(msg({x, 3, {}, {}, {}}).find("not a multiple of dim 3"), std::string::npos);
  auto bad = x;
  bad[7] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_NE(msg({bad, 2, {}, {}, {}}).find("point 3, dim 1 is not finite"), std::string::npos);
  std::vector<float> unc(10, 0.f);
  unc[4] = std::numeric_limits<float>::infinity();
  EXPECT_NE(msg({x, 2, unc, {}, {}}).find("uncertainty of point 4 is not finite"), std::string::npos);
  const std::vector<float> short_unc(9, 0.f);
  EXPECT_NE(msg({x, 2, short_unc, {}, {}}).find("uncertainty has 9 values for 10 points"),
            std::string::npos);
  const std::vector<uint32_t> out_of_range = {10}, twice = {2, 2};
  EXPECT_NE(msg({x, 2, {}, {}, out_of_range}).find("selected index 10 is out of range"),
            std::string::npos);
  EXPECT_NE(msg({x, 2, {}, {}, twice}).find("selected index 2 is listed twice"), std::string::npos);
  EXPECT_NE(msg({x, 2, {}, {}, {}}, with_method(SampleMethod::kUncertainty))
                .find("needs a per-point uncertainty"),
            std::string::npos);
  EXPECT_NE(msg({x, 2, {}, {}, {}}, with_method(SampleMethod::kBalto)).find("needs predicted scores"),
            std::string::npos);
  SamplerOptions o;
  o.prefilter_fraction = 0.0;
  EXPECT_NE(msg({x, 2, {}, {}, {}}, o).find("prefilter_fraction must be in (0, 1]"),
            std::string::npos);
  o = {};
  o.w_div = -1;
  EXPECT_NE(msg({x, 2, {}, {}, {}}, o).find("w_div must be finite and >= 0"), std::string::npos);
  o = {};
  o.w_fast = -0.5;
  EXPECT_NE(msg({x, 2, {}, {}, {}}, o).find("w_fast must be finite and >= 0"), std::string::npos);
  o = {};
  o.w_repr = o.w_div = o.w_unc = o.w_fast = 0;
  EXPECT_NE(msg({x, 2, {}, {}, {}}, o).find("all 0"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Per task: ceil(0.1 * size) (0.1 * 30 = 3 exactly, not 4), at least 2, at most the size.
TEST(PerTask, CountsAreCeilFractionClippedAndInsideTheTask) {
  const std::size_t n = 300, dim = 4;
  const auto x = uniform_points(n, dim, 13);
  std::vector<std::vector<uint32_t>> groups(6);
  const std::vector<std::size_t> sizes = {30, 7, 1, 0, 100, 41};
  uint32_t next = 0;
  for (std::size_t t = 0; t < sizes.size(); ++t)
    for (std::size_t i = 0; i < sizes[t]; ++i) groups[t].push_back(next++);
  std::reverse(groups[4].begin(), groups[4].end());  // order within a task does not matter
  SamplePool pool{x, dim, {}, {}, {}};
  for (SampleMethod m : {SampleMethod::kRdu, SampleMethod::kRandom, SampleMethod::kKCenter}) {
    const auto out = select_per_task(pool, groups, PerTaskOptions{0.1, 2}, with_method(m));
    ASSERT_EQ(out.size(), groups.size());
    const std::vector<std::size_t> expected = {3, 2, 1, 0, 10, 5};
    for (std::size_t t = 0; t < groups.size(); ++t) {
      EXPECT_EQ(out[t].size(), expected[t]) << sample_method_name(m) << " task " << t;
      std::set<uint32_t> g(groups[t].begin(), groups[t].end()), o(out[t].begin(), out[t].end());
      EXPECT_EQ(o.size(), out[t].size());
      for (uint32_t p : out[t]) EXPECT_EQ(g.count(p), 1u) << "task " << t << " picked row " << p;
    }
  }
  // earlier picks count towards the task's target: task 0 has 1 of its 3, task 4 already has 12
  std::vector<uint32_t> selected = {5};
  for (uint32_t i = 0; i < 12; ++i) selected.push_back(groups[4][i]);
  pool.selected = selected;
  const auto out = select_per_task(pool, groups, PerTaskOptions{0.1, 2}, SamplerOptions{});
  EXPECT_EQ(out[0].size(), 2u);
  EXPECT_EQ(std::count(out[0].begin(), out[0].end(), 5u), 0);
  EXPECT_EQ(out[4].size(), 0u);
  // min_per_task 0 and fraction 1
  EXPECT_EQ(select_per_task(pool, groups, PerTaskOptions{1.0, 0}, SamplerOptions{})[1].size(), 7u);
}

TEST(PerTask, BadGroupsAndOptionsAreRefused) {
  const auto x = uniform_points(10, 2, 14);
  SamplePool pool{x, 2, {}, {}, {}};
  EXPECT_NE(error_of([&] { select_per_task(pool, {{0, 1}, {1, 2}}, {}, {}); })
                .find("row 1 is in task 0 and task 1"),
            std::string::npos);
  EXPECT_NE(error_of([&] { select_per_task(pool, {{0, 10}}, {}, {}); }).find("lists row 10"),
            std::string::npos);
  EXPECT_NE(error_of([&] { select_per_task(pool, {{0, 1}}, PerTaskOptions{0.0, 2}, {}); })
                .find("fraction must be in (0, 1]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { select_per_task(pool, {{0, 1}}, PerTaskOptions{0.5, -1}, {}); })
                .find("min_per_task must be >= 0"),
            std::string::npos);
}

}  // namespace
}  // namespace tclm
