// tclm/sample.h: active sampling — which unmeasured programs to measure next (TCL-SPEC §6).
//
// The input is a dense matrix of points, row-major float [n, dim]: pooled program features
// (Dataset::pooled_features, kPooledFeatureDim = 111 floats per program) or model embeddings. The
// output is a list of row indices to measure. No libtorch: the caller computes the per-point
// uncertainty (disagreement of a committee of cost models, or MC-dropout variance) and the predicted
// scores with whatever model it has, and passes them in.
//
// Methods (docs/sampler.md has the details, the decisions and the measured cost):
//   rdu          TCL's sampler (TCL-SPEC §6, seed-tcl-framework §2.2): k-means on standardized
//                points; a cheap pass keeps the most representative `prefilter_fraction` of every
//                cluster; the budget is spread over clusters (quota ∝ size, every cluster covered);
//                inside each cluster a greedy pick maximizes w_repr*R + w_div*D + w_unc*U + w_fast*F
//                (F: the percentile of the predicted score, when scores are given).
//   random       uniform sample without replacement.
//   uncertainty  the `budget` most uncertain points.
//   kcenter      k-center greedy core-set (Sener & Savarese, ICLR 2018): farthest point first.
//   balto        BALTO-style biased diversity (Bi et al., ICLR 2023): k-center greedy where each
//                point's distance is multiplied by 1 + balto_bias * (percentile of its predicted score).
//
// Every method returns exactly min(budget, n - |selected|) distinct indices, none of them in
// `selected`, and the same indices for the same input, options and seed, whatever the thread count
// (fixed blocks and ordered reductions; tested for 1 and 2 threads on one machine and BLAS).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tclm {

enum class SampleMethod { kRdu, kRandom, kUncertainty, kKCenter, kBalto };

/// "rdu", "random", "uncertainty", "kcenter", "balto" (case-sensitive). Throws tclm::Error naming
/// the valid names on anything else.
SampleMethod parse_sample_method(std::string_view name);
/// The name parse_sample_method accepts for `method`.
const char* sample_method_name(SampleMethod method);

struct SamplerOptions {
  SampleMethod method = SampleMethod::kRdu;
  // rdu: weights of representativeness R, diversity D and uncertainty U in the greedy score.
  // Each term lies in [0, 1]; finite and >= 0, not all three 0. U is dropped when no uncertainty
  // is given (cold start: R + D).
  double w_repr = 1.0;
  double w_div = 1.0;
  double w_unc = 1.0;
  // rdu: weight of F, the percentile of a candidate's predicted score over the pool (0 = predicted
  // slowest, 1 = predicted fastest), finite and >= 0. With it the representativeness pass keeps the
  // candidates of highest w_repr*R + w_fast*F (R alone without it) and the greedy score adds
  // w_fast*F: inside every cluster the picks lean towards programs the model predicts fast, while the
  // clusters still spread them over the pool. Dropped when no scores are given (cold start). Default 1,
  // chosen on the tuning split of a random-pool platform over 0 and 3 (docs/sampler.md).
  double w_fast = 1.0;
  // rdu: fraction of every cluster's candidates kept by the representativeness pass, in (0, 1].
  double prefilter_fraction = 0.3;
  // rdu: number of k-means clusters; 0 = auto = clamp(ceil(budget / picks_per_cluster), 1, 1024).
  // Clipped to the number of points.
  int n_clusters = 0;
  // rdu, auto k only: budget per cluster, finite and >= 1. Default 1: one cluster per pick, so a
  // cold-start round picks the most representative point of each of `budget` clusters (diversity
  // acts between clusters through k-means, and inside a cluster only against earlier rounds' picks).
  // Chosen on the K80's tuning split over 4 (the earlier default), 2 and 1 (docs/experiments/sampler.md,
  // "RDU options chosen on a tuning split").
  double picks_per_cluster = 1.0;
  int kmeans_iterations = 20;  // Lloyd iterations (faiss), >= 1
  // rdu: k-means is trained on a seeded subsample of max(kmeans_train_points, 16 * k) points (all
  // of them when the pool is smaller); every point is then assigned to its nearest centre. >= 1.
  int kmeans_train_points = 65536;
  // balto: bias towards predicted-good programs, >= 0 (0 = plain k-center).
  double balto_bias = 1.0;
  uint64_t seed = 0;
  // OpenMP threads for rdu / kcenter / balto and faiss; 0 = OpenMP's default (OMP_NUM_THREADS or
  // all cores), except that pools of fewer than 2^18 floats run on one thread. OpenBLAS, used by
  // faiss's k-means, keeps its own setting (OPENBLAS_NUM_THREADS). >= 0.
  int threads = 0;
};

/// The unlabeled pool. Spans are views: they must outlive the call.
struct SamplePool {
  std::span<const float> points;     // [n, dim] row-major, finite; n = points.size() / dim
  std::size_t dim = 0;               // >= 1
  std::span<const float> uncertainty;  // [n] finite, larger = model less sure; empty = none
  std::span<const float> scores;       // [n] finite predicted score, higher = predicted faster;
                                       // empty = none (balto needs them; rdu uses them with w_fast)
  std::span<const uint32_t> selected;  // rows already measured in earlier rounds (distinct, < n)
};

/// What rdu did (filled only when asked for; the other methods set `n` and `used_dims` only).
struct SampleReport {
  std::size_t n = 0;        // points in the pool
  int used_dims = 0;        // dims left after dropping constant ones (rdu, kcenter, balto)
  int n_clusters = 0;       // k actually used
  std::vector<int64_t> cluster_size;    // [k] points in each cluster, selected ones included
  std::vector<int64_t> cluster_quota;   // [k] new picks given to each cluster
  std::vector<int64_t> cluster_kept;    // [k] candidates kept by the representativeness pass
  std::vector<int32_t> cluster_of;      // [n] cluster of every point
  double seconds_standardize = 0;       // mean and std of every dim
  double seconds_seed = 0;              // k-means++ seeding on the training subsample
  double seconds_kmeans = 0;            // Lloyd iterations (faiss) on the training subsample
  double seconds_assign = 0;            // nearest centre of every point, representativeness
  double seconds_select = 0;            // quotas, prefilter, greedy picks
};

/// Chooses min(budget, n - |selected|) new rows of `pool` to measure, with `options.method`.
/// Order of the result: rdu round-robin over clusters (the first pick of every cluster, then the
/// second, ...), so any prefix is spread over clusters; random in draw order; uncertainty by
/// decreasing uncertainty (ties by index); kcenter / balto in greedy order.
/// Empty pool or budget 0: empty result. Throws tclm::Error if dim is 0, points.size() is not a
/// multiple of dim, n >= 2^32, a point / uncertainty / score is not finite, uncertainty or scores
/// are non-empty with a size other than n, `selected` has an index >= n or a repeated index, an
/// option is out of range, uncertainty is empty for the `uncertainty` method, or scores are empty
/// for `balto`. Cost: docs/sampler.md ("Complexity").
std::vector<uint32_t> select_samples(const SamplePool& pool, std::size_t budget,
                                     const SamplerOptions& options, SampleReport* report = nullptr);

struct PerTaskOptions {
  double fraction = 0.1;  // picks per task, earlier ones included = ceil(fraction * size), (0, 1]
  int min_per_task = 2;   // ... but at least this many (>= 0), capped at the task's size
};

/// Selects in every task (group of rows) independently: task t gets
///   min(max(ceil(fraction * size_t), min_per_task), size_t) - |selected in t|  new picks (>= 0),
/// chosen by select_samples on the task's rows only (its own standardization, clusters and
/// uncertainty normalisation), with seed options.seed mixed with t. `groups[t]` lists row indices
/// of pool.points; a row may belong to one group at most. ceil is computed as ceil(fraction * size
/// - 1e-9) so that e.g. 0.1 * 30 gives 3, not 4. Returns one list per task, in task order, with the
/// rows' pool indices. Tasks run one after the other (a task of fewer than 2^18 floats runs on one
/// thread unless options.threads is set, like any small pool).
/// Throws tclm::Error on the conditions of select_samples, a row index >= n, a row in two groups,
/// fraction outside (0, 1] or min_per_task < 0.
std::vector<std::vector<uint32_t>> select_per_task(const SamplePool& pool,
                                                   const std::vector<std::vector<uint32_t>>& groups,
                                                   const PerTaskOptions& per_task,
                                                   const SamplerOptions& options);

}  // namespace tclm
