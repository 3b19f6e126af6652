// infer/engine.cpp: CostModelEngine (tclm/infer.h), its public entry points. The parts are in src/infer:
//   pack.cpp           weights file -> packed model (model.h), checked against tclm/model_schema.h
//   step_cache.*       the step-row cache of layer 0's results
//   block.*            blocks of programs, prefix sharing, the scan-state plan
//   kernels.*          embedding, LayerNorm, conv + SiLU, selective scan (gemm.* for the Linear layers)
//   forward.cpp        the forward pass of one block
//   workers.*          the worker threads; sources.h: the inputs (features, step views, record lines)
#include "tclm/infer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "infer/model.h"
#include "infer/sources.h"
#include "infer/workers.h"
#include "tclm/error.h"

namespace tclm {

using infer::DenseSource;
using infer::LineSource;
using infer::make_view_source;
using infer::run_workers;

CostModelEngine::CostModelEngine(const WeightsFile& w, const std::string& name) : model_(infer::pack_model(w, name)) {}

CostModelEngine CostModelEngine::load(const std::string& path) {
  return CostModelEngine(load_weights(path), path);
}

CostModelEngine::CostModelEngine(const CostModelEngine&) = default;
CostModelEngine::CostModelEngine(CostModelEngine&&) noexcept = default;
CostModelEngine& CostModelEngine::operator=(const CostModelEngine&) = default;
CostModelEngine& CostModelEngine::operator=(CostModelEngine&&) noexcept = default;
CostModelEngine::~CostModelEngine() = default;

const MambaConfig& CostModelEngine::config() const { return model_->cfg; }
uint32_t CostModelEngine::feature_version() const { return model_->feature_version; }

void CostModelEngine::set_threads(int threads) {
  if (threads < 0) throw Error(fmt::format("CostModelEngine: threads must be >= 0 (0 = all cores), got {}", threads));
  threads_ = threads;
}

void CostModelEngine::set_options(const CostModelEngine::Options& options) { options_ = options; }

void CostModelEngine::set_max_steps(int max_steps) {
  if (max_steps < 1) throw Error(fmt::format("CostModelEngine: max_steps must be >= 1, got {}", max_steps));
  max_steps_ = max_steps;
}

double CostModelEngine::flops_per_program(int n_steps) const {
  const Model& m = *model_;
  const double F = m.F, D = m.D, E = m.E, N = m.N, R = m.R, K = m.K, H = m.H;
  const double per_layer = 8 * D                      // LayerNorm (mean, var, normalise, affine)
                           + 2 * D * 2 * E            // in_proj
                           + 2 * K * E + E + 4 * E    // conv taps, bias, SiLU (exp, add, div, neg)
                           + 2 * E * (R + 2 * N)      // x_proj
                           + 2 * R * E + E + 6 * E    // dt_proj, bias, softplus (exp, log1p, max, add, ...)
                           + 3 * E + 7 * E * N        // scan: dt*u, D*u, acc; per state dt*A, exp, a*h, dtu*B, +, C*h, +
                           + 5 * E                    // y * SiLU(z)
                           + 2 * E * D + D;           // out_proj, residual
  const double per_step = 2 * F * D + D + m.layers.size() * per_layer + 8 * D + D;  // embed, final LN, pooling
  const double head = D + 2 * D * H + 2 * H + 2 * H + 1;  // mean, head1 + ReLU, head2
  return std::max(n_steps, 0) * per_step + head;
}

// ---------------------------------------------------------------------------------------------------
// Public entry points

void CostModelEngine::predict(const float* x, const float* mask, int64_t n, int L, float* scores) const {
  if (n < 0 || L < 0) throw Error(fmt::format("CostModelEngine::predict: n = {} and L = {} must be >= 0", n, L));
  if (n == 0) return;
  if (scores == nullptr || (L > 0 && (x == nullptr || mask == nullptr))) {
    throw Error("CostModelEngine::predict: null pointer");
  }
  // Features come from the caller here (not from the featurizer): a NaN or infinity in a real step
  // would silently give a NaN score, so it is refused, naming where it is. Padding rows may hold anything.
  const int64_t F = model_->F;
  for (int64_t i = 0; i < n; ++i) {
    for (int t = 0; t < L; ++t) {
      if (!(mask[i * L + t] > 0)) continue;
      const float* row = x + (i * L + t) * F;
      for (int64_t f = 0; f < F; ++f) {
        if (!std::isfinite(row[f])) {
          throw Error(fmt::format("CostModelEngine::predict: feature {} of step {} of program {} is {} (real steps "
                                  "must be finite; featurize_program never produces that)",
                                  f, t, i, row[f]));
        }
      }
    }
  }
  const Model& m = *model_;
  run_workers(m, static_cast<size_t>(n), scores, threads_, options_, [&] { return DenseSource{x, mask, L, m.F}; });
}

void CostModelEngine::predict_programs(const std::vector<TransformStep>* programs, size_t n, float* scores) const {
  if (n == 0) return;
  if (programs == nullptr || scores == nullptr) throw Error("CostModelEngine::predict_programs: null pointer");
  run_workers(*model_, n, scores, threads_, options_, [&] {
    return make_view_source(
        [programs](size_t i, std::vector<StepView>* out) {
          for (const TransformStep& s : programs[i]) out->push_back(view_of(s));
        },
        max_steps_, model_->feature_version);
  });
}

std::vector<float> CostModelEngine::predict_programs(const std::vector<std::vector<TransformStep>>& programs) const {
  std::vector<float> scores(programs.size());
  predict_programs(programs.data(), programs.size(), scores.data());
  return scores;
}

void CostModelEngine::predict_views(size_t n, const std::function<void(size_t, std::vector<StepView>*)>& steps_of,
                                    float* scores) const {
  if (n == 0) return;
  if (!steps_of || scores == nullptr) throw Error("CostModelEngine::predict_views: null callback or pointer");
  run_workers(*model_, n, scores, threads_, options_, [&] { return make_view_source(std::cref(steps_of), max_steps_, model_->feature_version); });
}

std::vector<float> CostModelEngine::predict_record_lines(const std::vector<std::string_view>& lines,
                                                         std::vector<std::string>* errors) const {
  std::vector<float> scores(lines.size());
  if (errors) errors->assign(lines.size(), std::string());
  run_workers(*model_, lines.size(), scores.data(), threads_, options_,
              [&] { return LineSource{&lines, errors, max_steps_, model_->feature_version}; });
  return scores;
}

}  // namespace tclm
