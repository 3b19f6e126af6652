// Internals shared by the samplers (src/sample/*.cpp). Not part of the public API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/simd.h"
#include "tclm/sample.h"

namespace tclm::sample_detail {

/// splitmix64: small, fast, and the same stream on every platform (std::uniform_int_distribution
/// is not specified exactly, so it would make picks depend on the standard library).
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, n), n >= 1 (multiply-shift; bias < n / 2^64).
  uint64_t bounded(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }
  /// Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t s_;
};

/// A seed derived from the user's seed for one purpose (so streams do not overlap).
uint64_t mix_seed(uint64_t seed, uint64_t purpose);

/// Sets OpenMP's thread count for the calling thread while alive (threads <= 0: no change).
class OmpThreads {
 public:
  explicit OmpThreads(int threads);
  ~OmpThreads();
  OmpThreads(const OmpThreads&) = delete;
  OmpThreads& operator=(const OmpThreads&) = delete;

 private:
  int saved_ = 0;
};

/// Loops repeated once per pick or per centre (k-center, k-means++ seeding) only go parallel when
/// one pass touches at least this many floats: below it a parallel region's barrier costs more than
/// the work, and much more when the cores are shared (a spinning barrier waits for a descheduled
/// thread).
constexpr std::size_t kParallelPassFloats = std::size_t{1} << 22;

/// A validated pool: the public SamplePool plus derived facts.
struct Pool {
  const float* points = nullptr;
  std::size_t n = 0;
  std::size_t dim = 0;
  std::span<const float> uncertainty;  // empty or [n]
  std::span<const float> scores;       // empty or [n]
  std::span<const uint32_t> selected;
  std::vector<uint8_t> is_selected;    // [n]
};

/// Per-dimension standardization: z_j = (x_j - mean_j) * inv_std_j over the kept dims only.
/// A dim is dropped when its std is below 1e-7 * max(|mean|, 1e-30) (constant in float precision)
/// or exactly 0.
struct Standardizer {
  std::vector<int> dims;         // original indices of the kept dims
  std::vector<float> mean;       // [dims.size()]
  std::vector<float> inv_std;    // [dims.size()]
  int used() const { return static_cast<int>(dims.size()); }
  /// out[used()] = standardized row `row` of the pool.
  void apply(const float* row, float* out) const;
};

/// Mean and std of every dim over all n rows (double accumulation, fixed blocks: the result does
/// not depend on the thread count).
Standardizer fit_standardizer(const Pool& pool);

/// Standardized copy of the given rows (rows == nullptr: all n rows), [count, used()].
std::vector<float> standardize_rows(const Pool& pool, const Standardizer& st, const uint32_t* rows,
                                    std::size_t count);

/// Squared L2 distance of two rows of length d (common/simd.h).
using simd::sq_dist;

/// Quotas: how many of `budget` new picks each cluster gets (docs/sampler.md, "Quotas").
/// size[c] = points in c (selected included), already[c] = selected points in c.
/// Requires budget <= sum(size - already).
std::vector<int64_t> cluster_quotas(const std::vector<int64_t>& size,
                                    const std::vector<int64_t>& already, int64_t budget);

/// p[i] = the percentile of scores[i] over all n points: 0 for the lowest score, 1 for the highest,
/// rank / (n - 1), equal scores ranked by index (1 for a single point). rdu's F and balto's bias.
std::vector<double> score_percentiles(std::span<const float> scores);

std::vector<uint32_t> select_rdu(const Pool& pool, std::size_t budget, const SamplerOptions& o,
                                 SampleReport* report);
/// kcenter (bias == 0 or no scores) and balto (bias > 0, scores given).
std::vector<uint32_t> select_kcenter(const Pool& pool, std::size_t budget, const SamplerOptions& o,
                                     bool balto, SampleReport* report);

}  // namespace tclm::sample_detail
