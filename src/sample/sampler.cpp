// select_samples: validation and dispatch; the random and uncertainty baselines; per-task selection.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>

#include "sample/sample_internal.h"
#include "tclm/error.h"
#include "tclm/sample.h"

namespace tclm {

namespace {

using sample_detail::Pool;
using sample_detail::Rng;

// Pools with fewer floats than this run single-threaded unless SamplerOptions::threads says otherwise.
constexpr std::size_t kSmallPoolFloats = std::size_t{1} << 18;

constexpr const char* kMethodNames = "rdu, random, uncertainty, kcenter, balto";

void check_option(bool ok, const std::string& what) {
  if (!ok) throw Error("sampler option " + what);
}

void validate_options(const SamplerOptions& o) {
  auto weight_ok = [](double w) { return std::isfinite(w) && w >= 0.0; };
  check_option(weight_ok(o.w_repr), "w_repr must be finite and >= 0, got " + std::to_string(o.w_repr));
  check_option(weight_ok(o.w_div), "w_div must be finite and >= 0, got " + std::to_string(o.w_div));
  check_option(weight_ok(o.w_unc), "w_unc must be finite and >= 0, got " + std::to_string(o.w_unc));
  check_option(weight_ok(o.w_fast), "w_fast must be finite and >= 0, got " + std::to_string(o.w_fast));
  check_option(o.w_repr + o.w_div + o.w_unc + o.w_fast > 0.0,
               "weights w_repr, w_div, w_unc and w_fast are all 0: give at least one a positive weight");
  check_option(std::isfinite(o.prefilter_fraction) && o.prefilter_fraction > 0.0 &&
                   o.prefilter_fraction <= 1.0,
               "prefilter_fraction must be in (0, 1], got " + std::to_string(o.prefilter_fraction));
  check_option(o.n_clusters >= 0, "n_clusters must be >= 0 (0 = auto), got " +
                                      std::to_string(o.n_clusters));
  check_option(std::isfinite(o.picks_per_cluster) && o.picks_per_cluster >= 1.0,
               "picks_per_cluster must be finite and >= 1, got " + std::to_string(o.picks_per_cluster));
  check_option(o.kmeans_iterations >= 1,
               "kmeans_iterations must be >= 1, got " + std::to_string(o.kmeans_iterations));
  check_option(o.kmeans_train_points >= 1, "kmeans_train_points must be >= 1, got " +
                                               std::to_string(o.kmeans_train_points));
  check_option(std::isfinite(o.balto_bias) && o.balto_bias >= 0.0,
               "balto_bias must be finite and >= 0, got " + std::to_string(o.balto_bias));
  check_option(o.threads >= 0, "threads must be >= 0 (0 = default), got " + std::to_string(o.threads));
}

// The first non-finite value of v (index), or -1. Parallel, but the answer is the lowest index.
int64_t first_non_finite(const float* v, std::size_t count) {
  constexpr std::size_t kBlock = 1 << 16;
  const std::size_t n_blocks = (count + kBlock - 1) / kBlock;
  int64_t first = -1;
  std::vector<int64_t> hit(n_blocks, -1);
#pragma omp parallel for schedule(static)
  for (std::size_t b = 0; b < n_blocks; ++b) {
    const std::size_t e = std::min(count, (b + 1) * kBlock);
    for (std::size_t i = b * kBlock; i < e; ++i) {
      if (!std::isfinite(v[i])) {
        hit[b] = static_cast<int64_t>(i);
        break;
      }
    }
  }
  for (int64_t h : hit) {
    if (h >= 0) {
      first = h;
      break;
    }
  }
  return first;
}

Pool validate_pool(const SamplePool& p) {
  if (p.dim == 0) {
    throw Error("sampler: dim is 0; points must be a row-major [n, dim] matrix with dim >= 1");
  }
  if (p.points.size() % p.dim != 0) {
    throw Error("sampler: points has " + std::to_string(p.points.size()) +
                " floats, not a multiple of dim " + std::to_string(p.dim) +
                "; pass a row-major [n, dim] matrix");
  }
  Pool pool;
  pool.points = p.points.data();
  pool.dim = p.dim;
  pool.n = p.points.size() / p.dim;
  if (pool.n > std::numeric_limits<uint32_t>::max()) {
    throw Error("sampler: " + std::to_string(pool.n) +
                " points; at most 2^32 - 1 are supported (indices are uint32): split the pool");
  }
  if (int64_t bad = first_non_finite(p.points.data(), p.points.size()); bad >= 0) {
    throw Error("sampler: point " + std::to_string(bad / static_cast<int64_t>(p.dim)) + ", dim " +
                std::to_string(bad % static_cast<int64_t>(p.dim)) +
                " is not finite (NaN or inf); clean or impute the features before sampling");
  }
  auto check_vec = [&](std::span<const float> v, const char* name) {
    if (v.empty()) return;
    if (v.size() != pool.n) {
      throw Error(std::string("sampler: ") + name + " has " + std::to_string(v.size()) +
                  " values for " + std::to_string(pool.n) + " points; give one per point or none");
    }
    if (int64_t bad = first_non_finite(v.data(), v.size()); bad >= 0) {
      throw Error(std::string("sampler: ") + name + " of point " + std::to_string(bad) +
                  " is not finite (NaN or inf)");
    }
  };
  check_vec(p.uncertainty, "uncertainty");
  check_vec(p.scores, "scores");
  pool.uncertainty = p.uncertainty;
  pool.scores = p.scores;
  pool.selected = p.selected;
  pool.is_selected.assign(pool.n, 0);
  for (uint32_t s : p.selected) {
    if (s >= pool.n) {
      throw Error("sampler: selected index " + std::to_string(s) + " is out of range for " +
                  std::to_string(pool.n) + " points");
    }
    if (pool.is_selected[s]) {
      throw Error("sampler: selected index " + std::to_string(s) +
                  " is listed twice; pass each earlier pick once");
    }
    pool.is_selected[s] = 1;
  }
  return pool;
}

std::vector<uint32_t> select_random(const Pool& pool, std::size_t budget, uint64_t seed) {
  std::vector<uint32_t> cand;
  cand.reserve(pool.n - pool.selected.size());
  for (std::size_t i = 0; i < pool.n; ++i)
    if (!pool.is_selected[i]) cand.push_back(static_cast<uint32_t>(i));
  Rng rng(sample_detail::mix_seed(seed, 1));
  for (std::size_t i = 0; i < budget; ++i) {  // partial Fisher-Yates
    const std::size_t j = i + rng.bounded(cand.size() - i);
    std::swap(cand[i], cand[j]);
  }
  cand.resize(budget);
  return cand;
}

std::vector<uint32_t> select_uncertainty(const Pool& pool, std::size_t budget) {
  std::vector<uint32_t> cand;
  cand.reserve(pool.n - pool.selected.size());
  for (std::size_t i = 0; i < pool.n; ++i)
    if (!pool.is_selected[i]) cand.push_back(static_cast<uint32_t>(i));
  const auto& u = pool.uncertainty;
  auto more_uncertain = [&](uint32_t a, uint32_t b) {
    if (u[a] != u[b]) return u[a] > u[b];
    return a < b;
  };
  std::partial_sort(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(budget), cand.end(),
                    more_uncertain);
  cand.resize(budget);
  return cand;
}

}  // namespace

SampleMethod parse_sample_method(std::string_view name) {
  if (name == "rdu") return SampleMethod::kRdu;
  if (name == "random") return SampleMethod::kRandom;
  if (name == "uncertainty") return SampleMethod::kUncertainty;
  if (name == "kcenter") return SampleMethod::kKCenter;
  if (name == "balto") return SampleMethod::kBalto;
  throw Error("unknown sampling method '" + std::string(name) + "'; valid methods: " + kMethodNames);
}

const char* sample_method_name(SampleMethod method) {
  switch (method) {
    case SampleMethod::kRdu: return "rdu";
    case SampleMethod::kRandom: return "random";
    case SampleMethod::kUncertainty: return "uncertainty";
    case SampleMethod::kKCenter: return "kcenter";
    case SampleMethod::kBalto: return "balto";
  }
  throw InternalError("bad SampleMethod value");
}

std::vector<uint32_t> select_samples(const SamplePool& pool_in, std::size_t budget,
                                     const SamplerOptions& options, SampleReport* report) {
  validate_options(options);
  // Small pools run on one thread: a parallel region costs more than the work, and far more when
  // the cores are busy (a spinning barrier waits for a descheduled thread). Results do not depend
  // on the thread count.
  const bool small = pool_in.points.size() < kSmallPoolFloats;
  sample_detail::OmpThreads threads(options.threads == 0 && small ? 1 : options.threads);
  const Pool pool = validate_pool(pool_in);
  if (report) {
    *report = SampleReport{};
    report->n = pool.n;
  }
  if (options.method == SampleMethod::kUncertainty && pool.uncertainty.empty()) {
    throw Error("sampler: method 'uncertainty' needs a per-point uncertainty (committee "
                "disagreement or MC-dropout variance); pass SamplePool::uncertainty or use rdu");
  }
  if (options.method == SampleMethod::kBalto && pool.scores.empty()) {
    throw Error("sampler: method 'balto' needs predicted scores (higher = predicted faster) to bias "
                "towards good programs; pass SamplePool::scores, or use kcenter for unbiased "
                "diversity");
  }
  const std::size_t candidates = pool.n - pool.selected.size();
  const std::size_t take = std::min(budget, candidates);
  if (take == 0) return {};
  if (take == candidates) {  // everything left: no choice to make
    std::vector<uint32_t> all;
    all.reserve(candidates);
    for (std::size_t i = 0; i < pool.n; ++i)
      if (!pool.is_selected[i]) all.push_back(static_cast<uint32_t>(i));
    if (options.method == SampleMethod::kUncertainty) return select_uncertainty(pool, take);
    return all;
  }
  switch (options.method) {
    case SampleMethod::kRdu: return sample_detail::select_rdu(pool, take, options, report);
    case SampleMethod::kRandom: return select_random(pool, take, options.seed);
    case SampleMethod::kUncertainty: return select_uncertainty(pool, take);
    case SampleMethod::kKCenter:
      return sample_detail::select_kcenter(pool, take, options, /*balto=*/false, report);
    case SampleMethod::kBalto:
      return sample_detail::select_kcenter(pool, take, options, /*balto=*/true, report);
  }
  throw InternalError("bad SampleMethod value");
}

std::vector<std::vector<uint32_t>> select_per_task(const SamplePool& pool_in,
                                                   const std::vector<std::vector<uint32_t>>& groups,
                                                   const PerTaskOptions& per_task,
                                                   const SamplerOptions& options) {
  validate_options(options);
  if (!(std::isfinite(per_task.fraction) && per_task.fraction > 0.0 && per_task.fraction <= 1.0)) {
    throw Error("per-task sampling: fraction must be in (0, 1], got " +
                std::to_string(per_task.fraction));
  }
  if (per_task.min_per_task < 0) {
    throw Error("per-task sampling: min_per_task must be >= 0, got " +
                std::to_string(per_task.min_per_task));
  }
  const Pool pool = validate_pool(pool_in);
  std::vector<int32_t> owner(pool.n, -1);
  for (std::size_t t = 0; t < groups.size(); ++t) {
    for (uint32_t r : groups[t]) {
      if (r >= pool.n) {
        throw Error("per-task sampling: task " + std::to_string(t) + " lists row " +
                    std::to_string(r) + ", out of range for " + std::to_string(pool.n) + " points");
      }
      if (owner[r] >= 0) {
        throw Error("per-task sampling: row " + std::to_string(r) + " is in task " +
                    std::to_string(owner[r]) + " and task " + std::to_string(t) +
                    "; every row belongs to one task at most");
      }
      owner[r] = static_cast<int32_t>(t);
    }
  }
  const std::size_t d = pool.dim;
  std::vector<std::vector<uint32_t>> out(groups.size());
  std::vector<float> x, u, s;
  std::vector<uint32_t> sel;
  for (std::size_t t = 0; t < groups.size(); ++t) {
    const auto& g = groups[t];
    const std::size_t size = g.size();
    if (size == 0) continue;
    const auto want = static_cast<std::size_t>(std::max<double>(
        std::ceil(per_task.fraction * static_cast<double>(size) - 1e-9), 0.0));
    const std::size_t target =
        std::min(size, std::max(want, static_cast<std::size_t>(per_task.min_per_task)));
    x.resize(size * d);
    sel.clear();
    u.clear();
    s.clear();
    for (std::size_t i = 0; i < size; ++i) {
      std::memcpy(&x[i * d], pool.points + static_cast<std::size_t>(g[i]) * d, d * sizeof(float));
      if (pool.is_selected[g[i]]) sel.push_back(static_cast<uint32_t>(i));
      if (!pool.uncertainty.empty()) u.push_back(pool.uncertainty[g[i]]);
      if (!pool.scores.empty()) s.push_back(pool.scores[g[i]]);
    }
    if (sel.size() >= target) continue;
    SamplePool sub;
    sub.points = x;
    sub.dim = d;
    sub.uncertainty = u;
    sub.scores = s;
    sub.selected = sel;
    SamplerOptions o = options;
    o.seed = sample_detail::mix_seed(options.seed, 1000 + t);
    std::vector<uint32_t> picks = select_samples(sub, target - sel.size(), o);
    for (uint32_t& p : picks) p = g[p];
    out[t] = std::move(picks);
  }
  return out;
}

}  // namespace tclm
