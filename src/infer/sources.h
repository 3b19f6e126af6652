// infer/sources.h: the inputs of a predict call as Sources for run_workers (internal; the interface is
// in infer/workers.h): featurized arrays, step views featurized in the worker, record lines parsed and
// featurized in the worker.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tclm/feature.h"
#include "tclm/record.h"
#include "tclm/weights.h"

namespace tclm::infer {

/// Featurized input [n, L, F] with a mask: rows up to the last real step, padding rows zeroed.
struct DenseSource {
  const float* x;
  const float* mask;
  int L;
  int F;
  int64_t prepare(size_t i) const {
    const float* mk = mask + i * static_cast<size_t>(L);
    int64_t last = L - 1;
    while (last >= 0 && !(mk[last] > 0.0f)) --last;
    return last + 1;
  }
  void fill(size_t i, float* out, uint8_t* real) const {
    const int64_t rows = prepare(i);
    const float* mk = mask + i * static_cast<size_t>(L);
    const float* xi = x + i * static_cast<size_t>(L) * F;
    for (int64_t t = 0; t < rows; ++t) {
      real[t] = mk[t] > 0.0f;
      if (real[t]) {
        std::copy(xi + t * F, xi + (t + 1) * F, out + t * F);
      } else {
        std::fill(out + t * F, out + (t + 1) * F, 0.0f);
      }
    }
  }
};

/// Step views of each program, featurized in the worker.
template <class GetViews>
struct ViewSource {
  GetViews get;  // (size_t i, std::vector<StepView>* out)
  int max_steps;
  uint32_t feature_version;
  std::vector<StepView> views;
  int64_t prepare(size_t i) {
    views.clear();
    get(i, &views);
    if (!views.empty() && feature_version_of(views[0].kind) != feature_version) {
      check_feature_family(feature_version, feature_version_of(views[0].kind), fmt::format("program {}", i));
    }
    return std::min<int64_t>(static_cast<int64_t>(views.size()), max_steps);
  }
  void fill(size_t, float* out, uint8_t* real) {
    const int used = featurize_program(views.data(), views.size(), static_cast<int>(prepare_rows()), out);
    std::fill(real, real + used, uint8_t{1});
  }
  int64_t prepare_rows() const { return std::min<int64_t>(static_cast<int64_t>(views.size()), max_steps); }
};

template <class GetViews>
ViewSource<GetViews> make_view_source(GetViews get, int max_steps, uint32_t feature_version) {
  ViewSource<GetViews> s{std::move(get), max_steps, feature_version, {}};
  return s;
}

/// Record lines (Ansor records or MetaSchedule traces), parsed and featurized in the worker; a line
/// that cannot be parsed, or holds a program of the other encoding family, scores NaN with its reason
/// in errors[i] (if errors is not null).
struct LineSource {
  const std::vector<std::string_view>* lines;
  std::vector<std::string>* errors;
  int max_steps;
  uint32_t feature_version;
  std::unique_ptr<RecordParser> parser = std::make_unique<RecordParser>();
  MeasureRecord record;
  std::vector<StepView> views;
  LineSource(const std::vector<std::string_view>* l, std::vector<std::string>* e, int ms, uint32_t fv)
      : lines(l), errors(e), max_steps(ms), feature_version(fv) {}
  int64_t prepare(size_t i) {
    std::string why = parse_program_line((*lines)[i], *parser, &record);
    if (why.empty() && !record.steps.empty() && feature_version_of(record.steps[0].kind) != feature_version) {
      why = fmt::format("a {} program, but the model was trained on {}",
                        is_trace_kind(record.steps[0].kind) ? "MetaSchedule trace" : "Ansor record",
                        feature_version_name(feature_version));
    }
    if (!why.empty()) {
      if (errors) (*errors)[i] = std::move(why);
      return -1;
    }
    views.clear();
    for (const TransformStep& s : record.steps) views.push_back(view_of(s));
    return std::min<int64_t>(static_cast<int64_t>(views.size()), max_steps);
  }
  void fill(size_t, float* out, uint8_t* real) {
    const int rows = static_cast<int>(std::min<int64_t>(static_cast<int64_t>(views.size()), max_steps));
    const int used = featurize_program(views.data(), views.size(), rows, out);
    std::fill(real, real + used, uint8_t{1});
  }
};

}  // namespace tclm::infer
