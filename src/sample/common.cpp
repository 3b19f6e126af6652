// Pieces shared by the samplers: seeds, OpenMP thread scoping, standardization, cluster quotas.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "sample/sample_internal.h"
#include "tclm/error.h"

namespace tclm::sample_detail {

uint64_t mix_seed(uint64_t seed, uint64_t purpose) {
  Rng r(seed ^ (purpose * 0xd1b54a32d192ed03ULL));
  r.next();
  return r.next();
}

OmpThreads::OmpThreads(int threads) {
  if (threads > 0) {
    saved_ = omp_get_max_threads();
    omp_set_num_threads(threads);
  }
}

OmpThreads::~OmpThreads() {
  if (saved_ > 0) omp_set_num_threads(saved_);
}

void Standardizer::apply(const float* row, float* out) const {
  const int u = used();
  for (int j = 0; j < u; ++j) out[j] = (row[dims[j]] - mean[j]) * inv_std[j];
}

Standardizer fit_standardizer(const Pool& pool) {
  const std::size_t n = pool.n, d = pool.dim;
  Standardizer st;
  if (n == 0) return st;
  // Sums of (x - shift) and (x - shift)^2 with shift = row 0: exact zero variance for a constant
  // dim and little cancellation otherwise. Fixed blocks, summed in block order: deterministic.
  constexpr std::size_t kBlock = 4096;
  const std::size_t n_blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> s1(n_blocks * d, 0.0), s2(n_blocks * d, 0.0);
  const float* shift = pool.points;
#pragma omp parallel for schedule(static)
  for (std::size_t b = 0; b < n_blocks; ++b) {
    double* a1 = &s1[b * d];
    double* a2 = &s2[b * d];
    const std::size_t r1 = std::min(n, (b + 1) * kBlock);
    for (std::size_t r = b * kBlock; r < r1; ++r) {
      const float* x = pool.points + r * d;
      for (std::size_t j = 0; j < d; ++j) {
        const double t = static_cast<double>(x[j]) - shift[j];
        a1[j] += t;
        a2[j] += t * t;
      }
    }
  }
  std::vector<double> t1(d, 0.0), t2(d, 0.0);
  for (std::size_t b = 0; b < n_blocks; ++b) {
    for (std::size_t j = 0; j < d; ++j) {
      t1[j] += s1[b * d + j];
      t2[j] += s2[b * d + j];
    }
  }
  for (std::size_t j = 0; j < d; ++j) {
    const double m = t1[j] / static_cast<double>(n);
    const double var = std::max(0.0, t2[j] / static_cast<double>(n) - m * m);
    const double sd = std::sqrt(var);
    const double mean = m + shift[j];
    if (!(sd > 0.0) || sd < 1e-7 * std::max(std::fabs(mean), 1e-30)) continue;
    st.dims.push_back(static_cast<int>(j));
    st.mean.push_back(static_cast<float>(mean));
    st.inv_std.push_back(static_cast<float>(1.0 / sd));
  }
  return st;
}

std::vector<float> standardize_rows(const Pool& pool, const Standardizer& st, const uint32_t* rows,
                                    std::size_t count) {
  const std::size_t u = static_cast<std::size_t>(st.used());
  std::vector<float> out(count * u);
  if (u == 0) return out;
#pragma omp parallel for schedule(static)
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t r = rows ? rows[i] : i;
    st.apply(pool.points + r * pool.dim, &out[i * u]);
  }
  return out;
}

std::vector<double> score_percentiles(std::span<const float> scores) {
  const std::size_t n = scores.size();
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return scores[a] < scores[b]; });
  std::vector<double> p(n);
  for (std::size_t r = 0; r < n; ++r)
    p[order[r]] = n > 1 ? static_cast<double>(r) / static_cast<double>(n - 1) : 1.0;
  return p;
}

std::vector<int64_t> cluster_quotas(const std::vector<int64_t>& size,
                                    const std::vector<int64_t>& already, int64_t budget) {
  const std::size_t k = size.size();
  std::vector<int64_t> q(k, 0), cap(k);
  int64_t n = 0, a = 0, avail_total = 0;
  for (std::size_t c = 0; c < k; ++c) {
    cap[c] = size[c] - already[c];
    n += size[c];
    a += already[c];
    avail_total += cap[c];
  }
  if (budget > avail_total) throw InternalError("quota budget exceeds the candidates");
  int64_t left = budget;
  // 1) coverage: one pick for every cluster with candidates and no earlier pick, largest first.
  std::vector<std::size_t> order(k);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t x, std::size_t y) { return size[x] > size[y]; });
  for (std::size_t c : order) {
    if (left == 0) break;
    if (already[c] == 0 && cap[c] > 0) {
      q[c] = 1;
      --left;
    }
  }
  // 2) the rest in proportion to each cluster's deficit against its share of the total
  //    (already + budget) * size / n, capped by its candidates; largest remainders.
  const double total = static_cast<double>(a + budget);
  while (left > 0) {
    std::vector<double> w(k, 0.0);
    double wsum = 0.0;
    for (std::size_t c = 0; c < k; ++c) {
      if (q[c] >= cap[c]) continue;
      w[c] = std::max(0.0, total * static_cast<double>(size[c]) / static_cast<double>(n) -
                               static_cast<double>(already[c] + q[c]));
      wsum += w[c];
    }
    if (!(wsum > 0.0)) {  // every deficit met (rounding): spread over what is left
      wsum = 0.0;
      for (std::size_t c = 0; c < k; ++c) {
        w[c] = static_cast<double>(cap[c] - q[c]);
        wsum += w[c];
      }
    }
    std::vector<double> frac(k, -1.0);
    const int64_t before = left;
    for (std::size_t c = 0; c < k; ++c) {
      if (w[c] <= 0.0) continue;
      const double x = static_cast<double>(before) * w[c] / wsum;
      const int64_t give = std::min<int64_t>(static_cast<int64_t>(std::floor(x)), cap[c] - q[c]);
      q[c] += give;
      left -= give;
      frac[c] = q[c] < cap[c] ? x - std::floor(x) : -1.0;
    }
    std::vector<std::size_t> rem;
    for (std::size_t c = 0; c < k; ++c)
      if (frac[c] >= 0.0) rem.push_back(c);
    std::stable_sort(rem.begin(), rem.end(), [&](std::size_t x, std::size_t y) {
      if (frac[x] != frac[y]) return frac[x] > frac[y];
      return size[x] > size[y];
    });
    for (std::size_t c : rem) {
      if (left == 0) break;
      ++q[c];
      --left;
    }
    if (left == before) throw InternalError("quota distribution made no progress");
  }
  return q;
}

}  // namespace tclm::sample_detail
