// The RDU sampler (TCL-SPEC §6): representativeness, diversity, uncertainty, staged.
//
//  1. standardize every dim over the pool (constant dims dropped);
//  2. k-means: k-means++ seeding on a seeded subsample, Lloyd iterations with faiss, then every
//     point is assigned to its nearest centre (faiss IndexFlatL2, BLAS);
//  3. R(i) = exp(-d2(i) / mean d2 of i's cluster), d2 = squared distance to the centre;
//  4. quotas per cluster (cluster_quotas: every cluster covered, the rest ∝ size);
//  5. prefilter: in every cluster keep the max(ceil(f * candidates), quota) most representative
//     candidates;
//  6. in every cluster, quota greedy picks of argmax w_r R + w_d D + w_u U + w_f F over the kept
//     candidates, D = min distance to the cluster's picks (this round's and earlier rounds') / its
//     current max, F = percentile of the predicted score (with scores and w_f > 0; then step 5 keeps
//     the candidates of highest w_r R + w_f F).
// docs/sampler.md explains the choices.
#include <faiss/Clustering.h>
#include <faiss/IndexFlat.h>
#include <faiss/impl/FaissException.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "sample/sample_internal.h"
#include "tclm/error.h"

namespace tclm::sample_detail {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

constexpr std::size_t kMaxAutoClusters = 1024;
// ceil(budget / picks_per_cluster), exact for integer ratios (ceil(x - 1e-9) as in the quotas).
std::size_t auto_clusters(std::size_t budget, double picks_per_cluster) {
  return static_cast<std::size_t>(std::ceil(static_cast<double>(budget) / picks_per_cluster - 1e-9));
}
constexpr std::size_t kAssignBlock = 16384;
constexpr std::size_t kSeedPoints = 16384;  // k-means++ seeding sample: max(this, 16 k) points

// k-means++ seeding (Arthur & Vassilvitskii 2007) of k centres from x[nt, u]: the first centre is
// uniform, each next one drawn with probability ∝ squared distance to the nearest centre so far.
// Far-away small groups of points get a centre early, which plain random seeding (faiss's default)
// would usually miss.
std::vector<float> kmeans_pp(const float* x, std::size_t nt, int u, std::size_t k, Rng& rng) {
  std::vector<float> c(k * static_cast<std::size_t>(u));
  std::vector<float> dist(nt, std::numeric_limits<float>::infinity());
  const std::size_t uu = static_cast<std::size_t>(u);
  const bool parallel = nt * uu >= kParallelPassFloats;
  for (std::size_t j = 0; j < k; ++j) {
    std::size_t pick = 0;
    if (j == 0) {
      pick = rng.bounded(nt);
    } else {
      double total = 0.0;
      for (std::size_t i = 0; i < nt; ++i) total += dist[i];
      if (total > 0.0) {
        const double r = rng.uniform() * total;
        double cum = 0.0;
        pick = nt;
        std::size_t last_positive = 0;
        for (std::size_t i = 0; i < nt; ++i) {
          if (dist[i] <= 0.f) continue;
          last_positive = i;
          cum += dist[i];
          if (cum > r) {
            pick = i;
            break;
          }
        }
        if (pick == nt) pick = last_positive;  // rounding at the very end of the sum
      } else {
        pick = rng.bounded(nt);  // fewer distinct points than centres: faiss splits empty ones
      }
    }
    std::copy_n(x + pick * uu, uu, &c[j * uu]);
    if (j + 1 < k) {
      const float* cj = &c[j * uu];
#pragma omp parallel for schedule(static) if (parallel)
      for (std::size_t i = 0; i < nt; ++i) {
        dist[i] = std::min(dist[i], sq_dist(x + i * uu, cj, u));
      }
    }
  }
  return c;
}

}  // namespace

std::vector<uint32_t> select_rdu(const Pool& pool, std::size_t budget, const SamplerOptions& o,
                                 SampleReport* report) {
  auto t0 = Clock::now();
  const std::size_t n = pool.n;
  const Standardizer st = fit_standardizer(pool);
  const int u = st.used();
  const std::size_t uu = static_cast<std::size_t>(u);
  if (report) {
    report->used_dims = u;
    report->seconds_standardize = seconds_since(t0);
  }

  // ---- k-means
  t0 = Clock::now();
  std::size_t k = o.n_clusters > 0 ? static_cast<std::size_t>(o.n_clusters)
                                   : std::clamp<std::size_t>(auto_clusters(budget, o.picks_per_cluster), 1,
                                                             kMaxAutoClusters);
  k = std::min(k, n);
  if (u == 0) k = 1;  // every point is the same point
  const std::size_t n_train = std::min<std::size_t>(
      n, std::max<std::size_t>(static_cast<std::size_t>(o.kmeans_train_points), 16 * k));
  std::vector<uint32_t> train_rows;
  if (n_train < n) {
    train_rows.resize(n);
    std::iota(train_rows.begin(), train_rows.end(), 0u);
    Rng rng(mix_seed(o.seed, 2));
    for (std::size_t i = 0; i < n_train; ++i)
      std::swap(train_rows[i], train_rows[i + rng.bounded(n - i)]);
    train_rows.resize(n_train);
    std::sort(train_rows.begin(), train_rows.end());
  }
  std::vector<float> centroids;
  faiss::IndexFlatL2 index(std::max(u, 1));
  if (u > 0) {
    const std::vector<float> xt =
        standardize_rows(pool, st, train_rows.empty() ? nullptr : train_rows.data(), n_train);
    // k-means++ seeds from a random part of the training sample (it makes k passes over it)
    Rng rng(mix_seed(o.seed, 3));
    const std::size_t n_seed = std::min(n_train, std::max<std::size_t>(kSeedPoints, 16 * k));
    if (n_seed < n_train) {
      std::vector<uint32_t> pick(n_train);
      std::iota(pick.begin(), pick.end(), 0u);
      for (std::size_t i = 0; i < n_seed; ++i) std::swap(pick[i], pick[i + rng.bounded(n_train - i)]);
      std::vector<float> xs(n_seed * uu);
      for (std::size_t i = 0; i < n_seed; ++i)
        std::copy_n(&xt[static_cast<std::size_t>(pick[i]) * uu], uu, &xs[i * uu]);
      centroids = kmeans_pp(xs.data(), n_seed, u, k, rng);
    } else {
      centroids = kmeans_pp(xt.data(), n_train, u, k, rng);
    }
    if (report) report->seconds_seed = seconds_since(t0);
    t0 = Clock::now();
    try {
      if (n_train > k) {  // (k = 1 too: one iteration gives the mean)
        faiss::ClusteringParameters cp;
        cp.niter = o.kmeans_iterations;
        cp.seed = static_cast<int>(mix_seed(o.seed, 4) & 0x7fffffff);
        cp.verbose = false;
        cp.min_points_per_centroid = 1;  // no "please provide more points" warnings
        cp.max_points_per_centroid = std::numeric_limits<int>::max();  // we subsample ourselves
        faiss::Clustering clus(u, static_cast<int>(k), cp);
        clus.centroids = centroids;
        clus.train(static_cast<faiss::Index::idx_t>(n_train), xt.data(), index);
        centroids = clus.centroids;
      }
      index.reset();
      index.add(static_cast<faiss::Index::idx_t>(k), centroids.data());
    } catch (const faiss::FaissException& e) {
      throw InternalError(std::string("faiss k-means failed: ") + e.what());
    }
  }
  if (report) report->seconds_kmeans = seconds_since(t0);

  // ---- nearest centre and squared distance of every point
  t0 = Clock::now();
  std::vector<int32_t> label(n, 0);
  std::vector<float> d2(n, 0.f);
  if (u > 0) {
    std::vector<float> zb(kAssignBlock * uu), dis(kAssignBlock);
    std::vector<faiss::Index::idx_t> lab(kAssignBlock);
    for (std::size_t b0 = 0; b0 < n; b0 += kAssignBlock) {
      const std::size_t nb = std::min(kAssignBlock, n - b0);
#pragma omp parallel for schedule(static)
      for (std::size_t i = 0; i < nb; ++i) st.apply(pool.points + (b0 + i) * pool.dim, &zb[i * uu]);
      if (k > 1) {
        try {
          index.search(static_cast<faiss::Index::idx_t>(nb), zb.data(), 1, dis.data(), lab.data());
        } catch (const faiss::FaissException& e) {
          throw InternalError(std::string("faiss search failed: ") + e.what());
        }
      } else {
        std::fill_n(lab.begin(), nb, 0);
      }
      bool bad = false;
#pragma omp parallel for schedule(static) reduction(|| : bad)
      for (std::size_t i = 0; i < nb; ++i) {
        const auto c = lab[i];
        if (c < 0 || static_cast<std::size_t>(c) >= k) {
          bad = true;
          continue;
        }
        label[b0 + i] = static_cast<int32_t>(c);
        d2[b0 + i] = sq_dist(&zb[i * uu], &centroids[static_cast<std::size_t>(c) * uu], u);
      }
      if (bad) throw InternalError("faiss returned no nearest centre for a point");
    }
  }
  std::vector<int64_t> size(k, 0), already(k, 0);
  std::vector<double> sum_d2(k, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    ++size[label[i]];
    sum_d2[label[i]] += d2[i];
    if (pool.is_selected[i]) ++already[label[i]];
  }
  if (report) report->seconds_assign = seconds_since(t0);

  // ---- quotas, prefilter, greedy picks
  t0 = Clock::now();
  const std::vector<int64_t> quota = cluster_quotas(size, already, static_cast<int64_t>(budget));
  // candidates and earlier picks of every cluster (CSR, in index order)
  std::vector<std::size_t> cbeg(k + 1, 0), sbeg(k + 1, 0);
  for (std::size_t c = 0; c < k; ++c) {
    cbeg[c + 1] = cbeg[c] + static_cast<std::size_t>(size[c] - already[c]);
    sbeg[c + 1] = sbeg[c] + static_cast<std::size_t>(already[c]);
  }
  std::vector<uint32_t> cand(cbeg[k]), sel(sbeg[k]);
  {
    std::vector<std::size_t> cpos(cbeg.begin(), cbeg.end() - 1), spos(sbeg.begin(), sbeg.end() - 1);
    for (std::size_t i = 0; i < n; ++i) {
      if (pool.is_selected[i]) {
        sel[spos[label[i]]++] = static_cast<uint32_t>(i);
      } else {
        cand[cpos[label[i]]++] = static_cast<uint32_t>(i);
      }
    }
  }
  std::vector<int64_t> kept(k, 0);
  for (std::size_t c = 0; c < k; ++c) {
    const int64_t avail = size[c] - already[c];
    const auto pre = static_cast<int64_t>(
        std::ceil(o.prefilter_fraction * static_cast<double>(avail) - 1e-9));
    kept[c] = std::min(avail, std::max(pre, quota[c]));
  }
  // uncertainty normalised to [0, 1] over all candidates (min-max; constant -> 0)
  const bool has_unc = !pool.uncertainty.empty() && o.w_unc > 0.0;
  float umin = std::numeric_limits<float>::infinity(), umax = -umin;
  if (has_unc) {
    for (std::size_t i = 0; i < n; ++i) {
      if (pool.is_selected[i]) continue;
      umin = std::min(umin, pool.uncertainty[i]);
      umax = std::max(umax, pool.uncertainty[i]);
    }
  }
  const double urange = static_cast<double>(umax) - static_cast<double>(umin);
  // predicted speed: percentile of the predicted score over the pool
  const bool has_fast = !pool.scores.empty() && o.w_fast > 0.0;
  const std::vector<double> fast = has_fast ? score_percentiles(pool.scores) : std::vector<double>{};

  // clusters with picks to make, the most work first (dynamic schedule balances them)
  std::vector<std::size_t> work;
  for (std::size_t c = 0; c < k; ++c)
    if (quota[c] > 0) work.push_back(c);
  std::stable_sort(work.begin(), work.end(), [&](std::size_t a, std::size_t b) {
    return kept[a] * (quota[a] + already[a]) > kept[b] * (quota[b] + already[b]);
  });
  std::vector<std::vector<uint32_t>> picks(k);
  const double wr = o.w_repr, wd = o.w_div, wu = has_unc ? o.w_unc : 0.0, wf = has_fast ? o.w_fast : 0.0;
  const float inf = std::numeric_limits<float>::infinity();
#pragma omp parallel
  {
    std::vector<float> z, zs, md, rep, unc, fst;
    std::vector<std::pair<double, uint32_t>> keyed;  // (w_r R + w_f F, row) of a cluster's candidates
    std::vector<uint8_t> picked;
#pragma omp for schedule(dynamic, 1)
    for (std::size_t w = 0; w < work.size(); ++w) {
      const std::size_t c = work[w];
      uint32_t* cb = cand.data() + cbeg[c];
      const std::size_t avail = cbeg[c + 1] - cbeg[c];
      const auto m = static_cast<std::size_t>(kept[c]);
      const double mean_d2 = size[c] > 0 ? sum_d2[c] / static_cast<double>(size[c]) : 0.0;
      auto repr = [&](uint32_t r) {
        return mean_d2 > 0.0 ? std::exp(-static_cast<double>(d2[r]) / mean_d2) : 1.0;
      };
      // the cheap pass keeps the most representative first (smallest d2, ties by index), or, with
      // predicted speed, the highest w_r R + w_f F (each candidate's key computed once; ties by index)
      auto keep_first = [&](auto* first, auto less) {
        if (m < avail) {
          std::partial_sort(first, first + m, first + avail, less);
        } else {
          std::sort(first, first + avail, less);
        }
      };
      if (has_fast) {
        keyed.resize(avail);
        for (std::size_t i = 0; i < avail; ++i) keyed[i] = {wr * repr(cb[i]) + wf * fast[cb[i]], cb[i]};
        keep_first(keyed.data(), [](const auto& a, const auto& b) {
          return a.first != b.first ? a.first > b.first : a.second < b.second;
        });
        for (std::size_t i = 0; i < avail; ++i) cb[i] = keyed[i].second;
      } else {
        keep_first(cb, [&](uint32_t a, uint32_t b) { return d2[a] != d2[b] ? d2[a] < d2[b] : a < b; });
      }
      z.resize(m * uu);
      rep.resize(m);
      unc.resize(m);
      fst.assign(m, 0.f);
      md.assign(m, inf);
      picked.assign(m, 0);
      for (std::size_t i = 0; i < m; ++i) {
        const uint32_t r = cb[i];
        if (u > 0) st.apply(pool.points + static_cast<std::size_t>(r) * pool.dim, &z[i * uu]);
        rep[i] = static_cast<float>(repr(r));
        unc[i] = has_unc && urange > 0.0
                     ? static_cast<float>((static_cast<double>(pool.uncertainty[r]) - umin) / urange)
                     : 0.f;
        if (has_fast) fst[i] = static_cast<float>(fast[r]);
      }
      if (wd > 0.0 && already[c] > 0) {  // distances to earlier rounds' picks in this cluster
        zs.resize(uu);
        for (std::size_t s = sbeg[c]; s < sbeg[c + 1]; ++s) {
          if (u > 0) st.apply(pool.points + static_cast<std::size_t>(sel[s]) * pool.dim, zs.data());
          for (std::size_t i = 0; i < m; ++i)
            md[i] = std::min(md[i], sq_dist(z.data() + i * uu, zs.data(), u));
        }
      }
      auto& out = picks[c];
      out.reserve(static_cast<std::size_t>(quota[c]));
      for (int64_t step = 0; step < quota[c]; ++step) {
        float maxmd = 0.f;
        for (std::size_t i = 0; i < m; ++i)
          if (!picked[i]) maxmd = std::max(maxmd, md[i]);
        std::size_t best = m;
        double best_score = -std::numeric_limits<double>::infinity();
        for (std::size_t i = 0; i < m; ++i) {
          if (picked[i]) continue;
          double div = 0.0;
          if (maxmd == inf) {
            div = 1.0;  // nothing chosen in this cluster yet: no preference
          } else if (maxmd > 0.f) {
            div = std::sqrt(static_cast<double>(md[i]) / static_cast<double>(maxmd));
          }
          const double score = wr * rep[i] + wd * div + wu * unc[i] + wf * fst[i];
          if (score > best_score) {  // strict: ties go to the more representative candidate
            best_score = score;
            best = i;
          }
        }
        picked[best] = 1;
        out.push_back(cb[best]);
        if (wd > 0.0) {
          const float* zb = z.data() + best * uu;
          for (std::size_t i = 0; i < m; ++i) {
            if (!picked[i]) md[i] = std::min(md[i], sq_dist(z.data() + i * uu, zb, u));
          }
        }
      }
    }
  }

  // round-robin over clusters, so that any prefix of the result is spread over clusters
  std::vector<uint32_t> result;
  result.reserve(budget);
  const int64_t max_quota = *std::max_element(quota.begin(), quota.end());
  for (int64_t rank = 0; rank < max_quota; ++rank) {
    for (std::size_t c = 0; c < k; ++c)
      if (rank < quota[c]) result.push_back(picks[c][static_cast<std::size_t>(rank)]);
  }
  if (result.size() != budget) throw InternalError("rdu picked a wrong number of points");
  if (report) {
    report->n_clusters = static_cast<int>(k);
    report->cluster_size = size;
    report->cluster_quota = quota;
    report->cluster_kept = kept;
    report->cluster_of = std::move(label);
    report->seconds_select = seconds_since(t0);
  }
  return result;
}

}  // namespace tclm::sample_detail
