// k-center greedy (core-set, Sener & Savarese, ICLR 2018) and its BALTO-style biased variant.
//
// Every point keeps md = squared distance to the nearest chosen point (earlier rounds' picks
// included); each step picks argmax md * w over the candidates and updates md with the new pick:
// O(n * u) per pick, O(n * u * (budget + |selected|)) in all, on a standardized copy of the pool.
// kcenter: w = 1, the first pick (when nothing is selected yet) is a seeded uniform candidate.
// balto:   w = 1 + balto_bias * p, p = percentile of the point's predicted score over the pool
//          (0 = worst, 1 = best; ties by index), the first pick is the best-predicted candidate.
#include <algorithm>
#include <limits>
#include <numeric>

#include "sample/sample_internal.h"
#include "tclm/error.h"

namespace tclm::sample_detail {

std::vector<uint32_t> select_kcenter(const Pool& pool, std::size_t budget, const SamplerOptions& o,
                                     bool balto, SampleReport* report) {
  const std::size_t n = pool.n;
  const Standardizer st = fit_standardizer(pool);
  const int u = st.used();
  const std::size_t uu = static_cast<std::size_t>(u);
  if (report) report->used_dims = u;
  const std::vector<float> z = standardize_rows(pool, st, nullptr, n);

  std::vector<float> w(n, 1.f);
  if (balto) {
    const std::vector<double> p = score_percentiles(pool.scores);
    for (std::size_t i = 0; i < n; ++i) w[i] = static_cast<float>(1.0 + o.balto_bias * p[i]);
  }

  // md < 0 marks a point that is chosen (earlier rounds or this one)
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> md(n, inf);
  for (uint32_t s : pool.selected) md[s] = -1.f;
  constexpr std::size_t kChunk = 4096;
  const std::size_t n_chunks = (n + kChunk - 1) / kChunk;
  std::vector<float> chunk_key(n_chunks);
  std::vector<std::size_t> chunk_arg(n_chunks);

  // Updates md with the pick p (or, p == n, with every earlier pick) and returns argmax md * w over
  // the candidates; ties go to the lowest index whatever the thread count (fixed chunks).
  const bool parallel = n * uu >= kParallelPassFloats;
  auto update_and_argmax = [&](std::size_t p) {
#pragma omp parallel for schedule(static) if (parallel)
    for (std::size_t ch = 0; ch < n_chunks; ++ch) {
      float best_key = -0.5f;
      std::size_t best = n;
      const std::size_t e = std::min(n, (ch + 1) * kChunk);
      for (std::size_t i = ch * kChunk; i < e; ++i) {
        if (md[i] < 0.f) continue;
        if (p < n) {
          md[i] = std::min(md[i], sq_dist(z.data() + i * uu, z.data() + p * uu, u));
        } else {
          for (uint32_t s : pool.selected)
            md[i] = std::min(md[i], sq_dist(z.data() + i * uu, z.data() + s * uu, u));
        }
        const float key = md[i] * w[i];
        if (key > best_key) {
          best_key = key;
          best = i;
        }
      }
      chunk_key[ch] = best_key;
      chunk_arg[ch] = best;
    }
    float best_key = -0.5f;
    std::size_t best = n;
    for (std::size_t ch = 0; ch < n_chunks; ++ch) {
      if (chunk_key[ch] > best_key) {
        best_key = chunk_key[ch];
        best = chunk_arg[ch];
      }
    }
    if (best >= n) throw InternalError("k-center found no candidate left");
    return best;
  };

  std::size_t next = n;
  if (!pool.selected.empty()) {
    next = update_and_argmax(n);
  } else if (balto) {
    for (std::size_t i = 0; i < n; ++i)
      if (next == n || pool.scores[i] > pool.scores[next]) next = i;
  } else {
    next = Rng(mix_seed(o.seed, 5)).bounded(n);
  }
  std::vector<uint32_t> picks;
  picks.reserve(budget);
  while (true) {
    picks.push_back(static_cast<uint32_t>(next));
    md[next] = -1.f;
    if (picks.size() == budget) break;
    next = update_and_argmax(next);
  }
  return picks;
}

}  // namespace tclm::sample_detail
