// tclm/infer.h: the libtorch-free inference engine of the Mamba cost model (TCL-SPEC §4).
//
// During tuning a search round scores ~10,000 candidate programs inside TVM's process; this engine does
// that in plain C++ (part of tclm_core: no libtorch, no BLAS) with the same math as the libtorch model
// in src/model/mamba.{h,cpp} (float32; scores agree to ~1e-6 relative, tested < 1e-4):
//
//   h = embed(x with padding rows zeroed)                       Linear F -> d_model
//   per layer: h = h + out_proj(scan(...) * SiLU(z))            pre-norm Mamba-1 mixer, LayerNorm eps 1e-5
//   p = mean over the real steps of LayerNorm_f(h)              masked mean pooling (zero if no real step)
//   score = head2(ReLU(head1(p)))                               higher = faster (the model's ranking score)
//
// How it runs. Programs are processed in blocks of about kBlockRows computed rows (the steps of several
// programs stacked as one matrix; a row per step up to a program's last real step, padding rows between
// real steps included, none after), so every Linear layer is one small GEMM on packed weights with a
// register-blocked micro-kernel, and the conv and the selective scan run per program over its steps,
// vectorised across channels. Steps after a program's last real step are never computed (the model is
// causal, so they cannot change a real step). Blocks are spread over threads.
//
// Repeated work. Candidates of a search round share most of their steps, and the model is causal, so
// two things are computed once instead of per program (both exact: scores are bitwise the same with and
// without them, see Options):
//   * step rows: the first layer up to its in_proj (embedding, LayerNorm, in_proj; ~half of the default
//     model's FLOPs) depends on one step's features only; 1-1.3% of the step rows of real batches are
//     distinct. Each worker keeps a step-row cache of those results for the call.
//   * prefixes: a program whose first l steps equal another's has the same activations and scan state
//     there. A call of 512 or more programs is scored in the order of their (hashed) steps, and each
//     program continues from its predecessor's state after their common prefix (measured: 58% of the
//     positions of 10,000 mixed real records are distinct prefixes, 24-47% within one task). In a
//     block, a program's shared steps are its predecessor's rows (read through a position -> row map)
//     and its scan starts from the state the predecessor saved there.
// ReuseCounters report how much each saved.
//
// Thread safety: all predict functions are const and keep their scratch memory per call and per
// worker thread, so one engine may be used from any number of threads at once. set_threads,
// set_max_steps and set_options are not const: do not call them while another thread predicts. A caller that already
// runs predictions on several threads of its own should set_threads(1) to avoid oversubscription.
//
// Determinism: every step row goes through the same sequence of float operations whatever else is in
// its block, and a row, cached layer-0 result or scan state reused from another program holds the very
// bits this program would have computed (same features, same prefix, same operations). So a program's
// score is bitwise identical alone or in any batch, in any order, for any thread count and Options (and
// identical between predict, predict_programs, predict_views and predict_record_lines).
// It may differ in the last bits between CPUs with and without AVX-512 (-march=native builds).
//
// Errors: tclm::Error for a bad weights file or argument (the message names the file); an exception
// thrown by a predict_views callback is rethrown to the caller; std::bad_alloc if memory runs out.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tclm/feature.h"
#include "tclm/model_config.h"
#include "tclm/record.h"
#include "tclm/weights.h"

namespace tclm {

class CostModelEngine {
 public:
  /// Computed rows per block (rows of the block matrices); a longer program forms a block of its own.
  static constexpr int kBlockRows = 256;

  /// Reads a weights file (tclm/weights.h) and builds the engine. Throws tclm::Error naming `path` when
  /// the file is unreadable, corrupt, of another format version, or refused by the constructor.
  static CostModelEngine load(const std::string& path);

  /// Builds the engine from a parsed weights file. Throws tclm::Error whose message starts with
  /// `name_for_errors` when: the model kind is not "mamba"; the feature version is neither
  /// kFeatureVersion nor kTraceFeatureVersion (the model would read features it was not trained on); the config JSON is invalid or its
  /// n_features != kStepFeatureDim; a tensor is missing, duplicated, unknown, or of the wrong shape (the
  /// names and shapes of tclm/model_schema.h).
  CostModelEngine(const WeightsFile& weights, const std::string& name_for_errors);

  CostModelEngine(const CostModelEngine&);
  CostModelEngine(CostModelEngine&&) noexcept;
  CostModelEngine& operator=(const CostModelEngine&);
  CostModelEngine& operator=(CostModelEngine&&) noexcept;
  ~CostModelEngine();

  const MambaConfig& config() const;
  /// The encoding the model was trained on: kFeatureVersion (Ansor steps) or kTraceFeatureVersion
  /// (MetaSchedule traces). Programs of the other family are refused (predict_views, predict_programs
  /// throw tclm::Error; predict_record_lines reports them per line).
  uint32_t feature_version() const;

  /// Worker threads per predict call: 0 (the default) = std::thread::hardware_concurrency(). A call uses
  /// at most one thread per 16 programs (a small call runs on the calling thread only); the calling
  /// thread is one of the workers. Threads are started per call (~50 us; twice when the call is sorted
  /// for prefix sharing), not kept in a pool.
  int threads() const { return threads_; }
  void set_threads(int threads);  // throws tclm::Error if threads < 0

  /// Programs longer than this keep their first max_steps steps (as Dataset::featurize does when
  /// training). Default kDefaultMaxSteps. Used by the functions that featurize (not by predict()).
  int max_steps() const { return max_steps_; }
  void set_max_steps(int max_steps);  // throws tclm::Error if max_steps < 1

  /// Work done by predict calls with Options::counters set: `positions` steps were scored (what the
  /// plain engine computes), `rows` of them computed after prefix sharing, and `layer0_rows` of those
  /// went through layer 0's embedding, LayerNorm and in_proj (step-row cache misses).
  struct ReuseCounters {
    std::atomic<int64_t> positions{0}, rows{0}, layer0_rows{0};
  };
  /// How the engine avoids repeated work (see "Repeated work" above). Both only change speed and memory.
  struct Options {
    /// Memory budget of each worker thread's step-row cache, in bytes: an entry takes
    /// 4 (F + Dp + 2 Ep) bytes with Dp, Ep = d_model, d_inner rounded up to 16 (1,756 B for the default
    /// model), plus 8-16 B of hash table; the arrays grow with the distinct rows actually seen, up to
    /// the budget (and 2^24 entries). 0 disables the cache; a budget below one block's rows disables it
    /// for that block. The calling thread keeps the memory (not the entries) between calls, until it
    /// exits; so does its block scratch (~1 MB plus Ep d_state 4 B per saved scan state).
    size_t step_cache_bytes = size_t{8} << 20;
    /// Score programs in prefix order and compute shared prefixes once. Costs one extra featurization
    /// pass over the call's programs (to sort them), so a predict_views callback or record-line parse
    /// runs twice per program.
    bool share_prefixes = true;
    /// If set, every call adds what it computed here (atomically; for benchmarks and tests).
    ReuseCounters* counters = nullptr;
  };
  const Options& options() const { return options_; }
  void set_options(const Options& options);

  /// Scores featurized programs.
  ///   x      [n, L, kStepFeatureDim] float32, row-major (featurize_program's layout)
  ///   mask   [n, L]: step t of program i is real if mask[i*L + t] > 0, padding otherwise
  ///   scores [n]: written, one per program
  /// As in the libtorch model, padding rows are ignored whatever they hold (NaN included): they are
  /// zeroed before the embedding and excluded from the mean; a program with no real step scores
  /// head(0). Padding is expected at the end (featurize_program's layout), where it costs nothing;
  /// padding between real steps is also handled exactly like the libtorch model does (as zero rows
  /// that the scan sees). Throws tclm::Error if n < 0, L < 0 or a pointer is null with n * L > 0.
  void predict(const float* x, const float* mask, int64_t n, int L, float* scores) const;

  /// Featurizes (tclm/feature.h, featurize_program) and scores programs given as transform steps:
  /// no JSON and no intermediate feature tensor. scores[i] belongs to programs[i].
  std::vector<float> predict_programs(const std::vector<std::vector<TransformStep>>& programs) const;
  void predict_programs(const std::vector<TransformStep>* programs, size_t n, float* scores) const;

  /// The same for programs given as step views, e.g. from a Dataset:
  ///   engine.predict_views(progs.size(), [&](size_t i, std::vector<StepView>* v) {
  ///     thread_local std::vector<int64_t> ints;
  ///     data.steps(progs[i], v, &ints);
  ///   }, out);
  /// `steps_of(i, out)` must fill `out` with program i's steps; the views must stay valid until the
  /// next call on the same thread (a worker featurizes program i before it asks for another). It is
  /// called from the worker threads (concurrently, for different i), so it must be thread-safe, and with Options::share_prefixes on a
  /// call of 512 or more programs twice per program (once to order them). An exception it throws is
  /// rethrown.
  void predict_views(size_t n, const std::function<void(size_t, std::vector<StepView>*)>& steps_of,
                     float* scores) const;

  /// Parses Ansor record lines (tclm/record.h, one JSON record per line; the measured costs are not
  /// used and may be anything the format allows) or MetaSchedule traces (a line that is a JSON array,
  /// Trace::AsJSON's `[[instructions], [decisions]]`, tclm/record.h parse_trace_json), featurizes and
  /// scores them, in parallel. A line that
  /// cannot be parsed (including a blank line) scores NaN; if `errors` is not null it is resized to
  /// lines.size() and errors[i] holds the reason for line i ("" when the line was scored).
  std::vector<float> predict_record_lines(const std::vector<std::string_view>& lines,
                                          std::vector<std::string>* errors = nullptr) const;

  /// Floating-point operations of the model's forward pass on a program with `n_steps` real steps, as
  /// the libtorch model computes it (dense; multiply-add = 2; exp, log, division, sqrt = 1 each), for
  /// throughput figures. Dominated by the Linear layers: per step 2 F D (embedding) plus, per layer,
  /// 2 (2 D E + E (R + 2N) + R E + E D) and the scan's ~7 E N; plus 2 D H + 4 H per program (head).
  /// The engine performs fewer: it skips the embedding's products with zero features (real steps
  /// have ~7 nonzero features of 55), about 9% of the default model's FLOPs.
  double flops_per_program(int n_steps) const;

  struct Model;  // the packed weights (internal, src/infer/model.h)

 private:
  std::shared_ptr<const Model> model_;  // immutable once built; shared by copies of the engine
  int threads_ = 0;
  int max_steps_ = kDefaultMaxSteps;
  Options options_;
};

}  // namespace tclm
