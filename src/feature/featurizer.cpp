// feature/featurizer.cpp: the step encoding, version 1 (docs/feature-encoding.md).
#include <algorithm>
#include <cmath>
#include <cstring>

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
  double a = std::fabs(x);
  double v = std::log2(1.0 + a) / 8.0;
  return static_cast<float>(x < 0 ? -v : v);
}

void featurize_step(const StepView& st, float* out) {
  std::memset(out, 0, sizeof(float) * kStepFeatureDim);
  const int kind = static_cast<int>(st.kind);
  if (kind < 0 || kind >= kNumStepKinds) return;
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

int featurize_program(const StepView* steps, size_t n_steps, int max_steps, float* out) {
  const int used = static_cast<int>(std::min<size_t>(n_steps, static_cast<size_t>(std::max(max_steps, 0))));
  for (int t = 0; t < used; ++t) featurize_step(steps[t], out + static_cast<size_t>(t) * kStepFeatureDim);
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
