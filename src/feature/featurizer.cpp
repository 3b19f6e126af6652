// feature/featurizer.cpp: the step encoding, version 2 (docs/feature-encoding.md).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <string>
#include <vector>

#include "tclm/feature.h"

namespace tclm {

namespace {

// Identifiers (stage, iterator, step ids) are small integers whose value is an identity, not a size:
// scaled linearly and clipped so that a corrupt record cannot produce a huge input.
inline float id_value(int64_t x) {
  return static_cast<float>(std::clamp<double>(static_cast<double>(x) / 32.0, -8.0, 8.0));
}

bool has_iter_id(StepKind k) {
  switch (k) {
    case StepKind::kAnnotation:
    case StepKind::kPragma:
    case StepKind::kSplit:
    case StepKind::kFollowSplit:
    case StepKind::kFollowFusedSplit:
    case StepKind::kStorageAlign:
    case StepKind::kRfactor:
      return true;
    default:
      return false;
  }
}

// Parses the value of "auto_unroll_max_step$512"; returns false for any other pragma.
bool unroll_value(std::string_view s, double* v) {
  constexpr std::string_view kPrefix = "auto_unroll_max_step$";
  if (s.substr(0, kPrefix.size()) != kPrefix) return false;
  double x = 0;
  bool any = false;
  for (char c : s.substr(kPrefix.size())) {
    if (c < '0' || c > '9') return false;
    x = x * 10 + (c - '0');
    any = true;
  }
  *v = x;
  return any;
}

int scope_index(std::string_view s) {
  if (s == "local") return 0;
  if (s == "shared") return 1;
  if (s == "global") return 2;
  return 3;
}

}  // namespace

float log_magnitude(double x) {
  // Products of hostile split lengths overflow to inf (and inf * 0 is NaN): saturate at the value of
  // the largest double (log2(2^1024) / 8 = 128) instead of feeding inf or NaN to a model.
  if (std::isnan(x)) return 0.0f;
  if (std::isinf(x)) return x < 0 ? -128.0f : 128.0f;
  double a = std::fabs(x);
  double v = std::log2(1.0 + a) / 8.0;
  return static_cast<float>(x < 0 ? -v : v);
}

void pool_step_features(const float* x, int n_steps, float* out) {
  constexpr int F = kStepFeatureDim;
  std::fill(out, out + kPooledFeatureDim, 0.0f);
  if (n_steps <= 0) return;
  float* mean = out;
  float* max = out + F;
  std::copy(x, x + F, max);
  for (int t = 0; t < n_steps; ++t) {
    const float* row = x + static_cast<size_t>(t) * F;
    for (int f = 0; f < F; ++f) {
      mean[f] += row[f];
      max[f] = std::max(max[f], row[f]);
    }
  }
  for (int f = 0; f < F; ++f) mean[f] /= static_cast<float>(n_steps);
  out[2 * F] = static_cast<float>(std::log2(1.0 + n_steps));
}

std::string feature_version_name(uint32_t version) {
  if (version == kFeatureVersion) return "Ansor step encoding v" + std::to_string(version);
  if (version == kTraceFeatureVersion) return "MetaSchedule trace encoding v" + std::to_string(version & 0xffff);
  if ((version >> 16) == 1) return "MetaSchedule trace encoding v" + std::to_string(version & 0xffff);
  if ((version >> 16) == 0) return "Ansor step encoding v" + std::to_string(version);
  return fmt::format("unknown feature encoding 0x{:x}", version);
}

namespace {

int annotation_key_index(std::string_view k) {
  if (k == "meta_schedule.parallel") return 0;
  if (k == "meta_schedule.vectorize") return 1;
  if (k == "meta_schedule.unroll_explicit") return 2;
  if (k == "meta_schedule.unroll_implicit") return 3;
  if (k == "pragma_auto_unroll_max_step") return 4;
  if (k == "pragma_unroll_explicit") return 5;
  if (k.substr(0, 14) == "meta_schedule.") return 6;
  return 7;
}

int scope_or_thread_index(std::string_view s) {
  if (s.substr(0, 6) == "shared") return 0;
  if (s.substr(0, 5) == "local") return 1;
  if (s.substr(0, 8) == "blockIdx" || s.substr(0, 6) == "vthread") return 2;
  if (s.substr(0, 9) == "threadIdx") return 3;
  return -1;  // global and others
}

// One trace instruction (the resolved layout of tclm/record.h, trace_slot) -> trace_feature slots.
void featurize_trace_step(const StepView& st, float* out) {
  namespace tf = trace_feature;
  namespace ts = trace_slot;
  out[tf::kKind + static_cast<int>(st.kind) - kFirstTraceKind] = 1.0f;
  const int64_t* a = st.ints;
  const int n = st.n_ints;
  auto at = [&](int i) { return i < n ? static_cast<double>(a[i]) : 0.0; };
  out[tf::kNumInputs] = log_magnitude(at(ts::kNumInputs));
  out[tf::kNumOutputs] = log_magnitude(at(ts::kNumOutputs));
  if (at(ts::kValueKnown) != 0) {
    out[tf::kValue] = log_magnitude(at(ts::kValue));
    out[tf::kValueKnown] = 1.0f;
  }
  out[tf::kInPostproc] = at(ts::kInPostproc) != 0 ? 1.0f : 0.0f;
  if (st.list_pos >= 0 && st.n_list > 0 && st.list_pos + st.n_list <= n) {
    double prod = 1;
    for (int i = 0; i < st.n_list; ++i) {
      const double v = static_cast<double>(a[st.list_pos + i]);
      if (i < 4) out[tf::kList + i] = log_magnitude(v);
      prod *= std::max(v, 0.0);
    }
    out[tf::kListProduct] = log_magnitude(prod);
    out[tf::kListSize] = static_cast<float>(st.n_list) / 4.0f;
  }
  if (st.kind == StepKind::kTraceAnnotate || st.kind == StepKind::kTraceUnannotate) {
    out[tf::kAnnotationKey + annotation_key_index(st.str)] = 1.0f;
  } else if (!st.str.empty() && st.kind != StepKind::kTraceOther) {
    const int i = scope_or_thread_index(st.str);
    if (i >= 0) out[tf::kScope + i] = 1.0f;
  }
}

}  // namespace

void featurize_step(const StepView& st, float* out) {
  std::memset(out, 0, sizeof(float) * kStepFeatureDim);
  const int kind = static_cast<int>(st.kind);
  if (kind < 0 || kind >= kNumStepKinds) return;
  if (is_trace_kind(st.kind)) {
    featurize_trace_step(st, out);
    return;
  }
  out[slot::kKind + kind] = 1.0f;
  const int64_t* a = st.ints;
  const int n = st.n_ints;
  if (n > 0) out[slot::kStage] = id_value(a[0]);
  int next = 1;  // first argument not yet encoded
  if (has_iter_id(st.kind) && n > 1) {
    out[slot::kIter] = id_value(a[1]);
    next = 2;
  }
  if (st.n_list >= 0) out[slot::kListSize] = log_magnitude(st.n_list);

  switch (st.kind) {
    case StepKind::kAnnotation:
      // stage_id, iter_id, annotation: 0 for .. 11 tensorize (Ansor's IteratorAnnotation).
      if (n > 2 && a[2] >= 0 && a[2] < 12) out[slot::kAnnotation + a[2]] = 1.0f;
      next = n;
      break;
    case StepKind::kPragma: {
      double v;
      if (unroll_value(st.str, &v)) {
        out[slot::kUnroll] = log_magnitude(v);
      } else if (!st.str.empty()) {
        out[slot::kOtherPragma] = 1.0f;
      }
      next = n;
      break;
    }
    case StepKind::kCacheRead:
    case StepKind::kCacheWrite:
      if (!st.str.empty()) out[slot::kScope + scope_index(st.str)] = 1.0f;
      break;
    case StepKind::kSplit: {
      // stage_id, iter_id, extent, [lengths...], inner_to_outer
      if (n > 2) out[slot::kExtent] = log_magnitude(static_cast<double>(a[2]));
      if (st.list_pos >= 0 && st.n_list >= 0) {
        out[slot::kNumLengths] = static_cast<float>(st.n_list) / 4.0f;
        double prod = 1;
        for (int i = 0; i < st.n_list; ++i) {
          double len = static_cast<double>(a[st.list_pos + i]);
          if (i < 4) out[slot::kLengths + i] = log_magnitude(len);
          prod *= std::max(len, 0.0);
        }
        out[slot::kLengthProduct] = log_magnitude(prod);
        int after = st.list_pos + st.n_list;
        if (after < n) out[slot::kInnerToOuter] = a[after] != 0 ? 1.0f : 0.0f;
      }
      next = n;
      break;
    }
    default:
      break;
  }
  for (int i = next, g = 0; i < n && g < slot::kNumGeneric; ++i, ++g) {
    out[slot::kGeneric + g] = id_value(a[i]);
  }
}

namespace {

// Replays transform steps on the loop structure that the record itself reveals. The compute DAG is
// not in a record, so a stage starts with iterators of unknown extent; a split (SP) names the extent
// of the iterator it splits and so determines the extents of its parts, and the other steps move
// them around as Ansor does (src/auto_scheduler/transform_step.cc): FSP/FFSP split by another step's
// lengths, FU fuses consecutive iterators (extent = product), RE permutes, CHR/CHW/RF insert stages.
// Unknown extents are -1. Ids beyond kMaxStages / kMaxIters (only in corrupt input) are ignored so
// that no input can make the tracker allocate much.
class LoopTracker {
 public:
  explicit LoopTracker(const StepView* steps) : steps_(steps) {}

  /// Applies step `index`; returns the extent of the loop it annotates (AN) or creates (FU), or -1.
  double apply(int index) {
    const StepView& st = steps_[index];
    const int64_t* a = st.ints;
    const int n = st.n_ints;
    if (n < 1 || a[0] < 0 || a[0] >= kMaxStages) return -1;
    const auto s = static_cast<size_t>(a[0]);
    switch (st.kind) {
      case StepKind::kSplit: {
        if (n < 3 || st.list_pos < 0) return -1;
        std::vector<double> lengths;
        for (int i = 0; i < st.n_list; ++i) lengths.push_back(static_cast<double>(a[st.list_pos + i]));
        const int after = st.list_pos + st.n_list;
        const bool inner_to_outer = after < n ? a[after] != 0 : true;
        split(s, a[1], a[2] > 0 ? static_cast<double>(a[2]) : -1, lengths, inner_to_outer);
        return -1;
      }
      case StepKind::kFollowSplit: {  // stage, iter, src_step_id, n_split
        if (n < 4) return -1;
        const StepView* src = source_split(a[2], index);
        if (src == nullptr) return -1;
        // the first n_split-1 lengths of the source, then the product of the rest
        std::vector<double> lengths;
        int j = 0;
        for (; j + int64_t{1} < a[3] && j < src->n_list; ++j) lengths.push_back(static_cast<double>(src->ints[src->list_pos + j]));
        if (j < src->n_list) {
          double prod = 1;
          for (; j < src->n_list; ++j) prod *= static_cast<double>(src->ints[src->list_pos + j]);
          lengths.push_back(prod);
        }
        split(s, a[1], -1, lengths, true);
        return -1;
      }
      case StepKind::kFollowFusedSplit: {  // stage, iter, [src_step_ids], level, factor_or_nparts
        if (st.list_pos < 0 || st.list_pos + st.n_list + 2 > n) return -1;
        const int64_t level = a[st.list_pos + st.n_list];
        double len = 1;
        for (int i = 0; i < st.n_list; ++i) {
          const StepView* src = source_split(a[st.list_pos + i], index);
          if (src == nullptr || level < 0 || level >= src->n_list) return -1;
          len *= static_cast<double>(src->ints[src->list_pos + level]);
        }
        split(s, a[1], -1, {len}, a[st.list_pos + st.n_list + 1] != 0);
        return -1;
      }
      case StepKind::kFuse: {  // stage, [ids]
        if (st.list_pos < 0 || st.n_list < 1) return -1;
        const int64_t first = a[st.list_pos];
        if (first < 0 || first > kMaxIters - st.n_list) return -1;  // (first + n_list could overflow)
        auto& it = iters(s, static_cast<size_t>(first + st.n_list));
        double prod = 1;
        for (int i = 0; i < st.n_list; ++i) {
          const double e = it[static_cast<size_t>(first + i)];
          prod = (prod < 0 || e < 0) ? -1 : prod * e;
        }
        it.erase(it.begin() + first + 1, it.begin() + first + st.n_list);
        it[static_cast<size_t>(first)] = prod;
        return prod;
      }
      case StepKind::kReorder: {  // stage, [order]
        if (st.list_pos < 0 || st.n_list > kMaxIters) return -1;
        auto& it = iters(s, static_cast<size_t>(st.n_list));
        std::vector<double> re;
        for (int i = 0; i < st.n_list; ++i) {
          const int64_t k = a[st.list_pos + i];
          re.push_back(k >= 0 && k < static_cast<int64_t>(it.size()) ? it[static_cast<size_t>(k)] : -1);
        }
        std::copy(re.begin(), re.end(), it.begin());
        return -1;
      }
      case StepKind::kAnnotation: {  // stage, iter, annotation
        if (n < 2 || a[1] < 0 || a[1] >= kMaxIters) return -1;
        return iters(s, static_cast<size_t>(a[1] + 1))[static_cast<size_t>(a[1])];
      }
      case StepKind::kCacheRead:  // the cache stage is added after the read stage
        insert_stage(s + 1, {});
        return -1;
      case StepKind::kCacheWrite: {  // the cache stage takes the stage's place and its loops
        std::vector<double> copy = s < stages_.size() ? stages_[s] : std::vector<double>();
        insert_stage(s, std::move(copy));
        return -1;
      }
      case StepKind::kRfactor:  // the rfactor stage is added before the stage
        insert_stage(s, {});
        return -1;
      default:
        return -1;
    }
  }

 private:
  static constexpr int64_t kMaxStages = 512;
  static constexpr int64_t kMaxIters = 512;

  std::vector<double>& iters(size_t stage, size_t min_size) {
    if (stages_.size() <= stage) stages_.resize(stage + 1);
    auto& it = stages_[stage];
    if (it.size() < min_size) it.resize(min_size, -1.0);
    return it;
  }

  void insert_stage(size_t at, std::vector<double> loops) {
    if (stages_.size() < at) stages_.resize(at);
    if (static_cast<int64_t>(stages_.size()) >= kMaxStages) return;
    stages_.insert(stages_.begin() + static_cast<std::ptrdiff_t>(at), std::move(loops));
  }

  // The SP step at `id`, if it is an earlier step of this program.
  const StepView* source_split(int64_t id, int index) const {
    if (id < 0 || id >= index || steps_[id].kind != StepKind::kSplit || steps_[id].list_pos < 0) return nullptr;
    return &steps_[id];
  }

  // Replaces iterator `iter` by its parts, outermost first: [extent / prod, l_0 .. l_k-1] when
  // inner_to_outer (lengths are inner factors), else [l_0 .. l_k-1, extent / prod] (lengths are
  // outer part counts).
  void split(size_t stage, int64_t iter, double extent, const std::vector<double>& lengths, bool inner_to_outer) {
    if (iter < 0 || iter >= kMaxIters || lengths.size() > static_cast<size_t>(kMaxIters)) return;
    auto& it = iters(stage, static_cast<size_t>(iter + 1));
    if (extent < 0) extent = it[static_cast<size_t>(iter)];
    double prod = 1;
    for (double l : lengths) prod = (prod < 0 || l <= 0) ? -1 : prod * l;
    const double rest = (extent > 0 && prod > 0) ? std::ceil(extent / prod) : -1;
    std::vector<double> parts;
    if (inner_to_outer) parts.push_back(rest);
    for (double l : lengths) parts.push_back(l > 0 ? l : -1);
    if (!inner_to_outer) parts.push_back(rest);
    it.erase(it.begin() + iter);
    it.insert(it.begin() + iter, parts.begin(), parts.end());
  }

  const StepView* steps_;
  std::vector<std::vector<double>> stages_;
};

}  // namespace

int featurize_program(const StepView* steps, size_t n_steps, int max_steps, float* out) {
  const int used = static_cast<int>(std::min<size_t>(n_steps, static_cast<size_t>(std::max(max_steps, 0))));
  if (n_steps > 0 && is_trace_kind(steps[0].kind)) {  // a MetaSchedule trace: values resolved when parsed
    for (int t = 0; t < used; ++t) featurize_step(steps[t], out + static_cast<size_t>(t) * kStepFeatureDim);
  } else {
    LoopTracker tracker(steps);
  for (int t = 0; t < used; ++t) {
    float* row = out + static_cast<size_t>(t) * kStepFeatureDim;
    featurize_step(steps[t], row);
    const double extent = tracker.apply(t);
    if (extent > 0) {
      row[slot::kLoopExtent] = log_magnitude(extent);
      row[slot::kExtentKnown] = 1.0f;
    }
  }
  }
  if (used < max_steps) {
    std::memset(out + static_cast<size_t>(used) * kStepFeatureDim, 0,
                sizeof(float) * static_cast<size_t>(max_steps - used) * kStepFeatureDim);
  }
  return used;
}

int featurize_program(const std::vector<TransformStep>& steps, int max_steps, float* out) {
  std::vector<StepView> views;
  views.reserve(steps.size());
  for (const auto& s : steps) views.push_back(view_of(s));
  return featurize_program(views.data(), views.size(), max_steps, out);
}

}  // namespace tclm
