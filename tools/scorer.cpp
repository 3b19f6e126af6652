// tools/scorer.cpp: ModelScorer (tools/scorer.h).
#include "scorer.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>

#include "tclm/error.h"
#include "tclm/feature.h"
#include "train/trainer.h"

namespace tclm::cli {

void add_backend_option(CLI::App* cmd, std::string* backend) {
  cmd->add_option("--backend", *backend,
                  "engine: the libtorch-free inference engine (Mamba models); torch: the libtorch model (every kind; "
                  "parity checks)")
      ->check(CLI::IsMember({"engine", "torch"}));
}

WeightsFile load_model_option(const std::string& path, const CLI::App& cmd) {
  std::error_code ec;
  if (cmd.count("--model") == 0 && !std::filesystem::exists(path, ec)) {
    throw Error(fmt::format("no model at '{}' (the default of -m/--model); give -m PATH, or train one with "
                            "'tclm train -o out/model'", path));
  }
  return load_weights(path);
}

ModelScorer::ModelScorer(const WeightsFile& w, const std::string& name, std::string backend, int threads)
    : backend_(std::move(backend)) {
  if (w.model_kind != kMambaModelKind && backend_ == "engine") {
    std::fprintf(stderr, "note: the inference engine runs Mamba models only; scoring this %s model with libtorch\n",
                 w.model_kind.c_str());
    backend_ = "torch";
  }
  if (backend_ == "torch") {
    model_ = load_cost_model(w, name);  // refuses another feature version
  } else {
    engine_.emplace(w, name);  // refuses another kind or feature version
    engine_->set_threads(threads);
  }
}

void ModelScorer::set_max_steps(int max_steps) {
  max_steps_ = max_steps;
  if (engine_) engine_->set_max_steps(max_steps);
}

std::vector<float> ModelScorer::score(const Dataset& d, const std::vector<uint32_t>& p) {
  if (!engine_) return predict_programs(model_, d, p);
  std::vector<float> scores(p.size());
  engine_->predict_views(p.size(), [&](size_t i, std::vector<StepView>* v) {
        thread_local std::vector<int64_t> ints;
        d.steps(p[i], v, &ints);
      }, scores.data());
  return scores;
}

std::vector<float> ModelScorer::score(const std::vector<std::vector<TransformStep>>& programs) {
  if (engine_) return engine_->predict_programs(programs);
  std::vector<float> scores(programs.size());
  torch::NoGradGuard no_grad;
  model_->eval();
  const size_t B = 4096;
  for (size_t i = 0; i < programs.size(); i += B) {
    const size_t n = std::min(programs.size(), i + B) - i;
    int L = 1;
    for (size_t j = 0; j < n; ++j) L = std::max(L, std::min<int>(programs[i + j].size(), max_steps_));
    std::vector<float> x(n * L * kStepFeatureDim), mask(n * L, 0.0f);
    for (size_t j = 0; j < n; ++j) {
      const int used = featurize_program(programs[i + j], L, x.data() + j * L * kStepFeatureDim);
      std::fill(mask.begin() + j * L, mask.begin() + j * L + used, 1.0f);
    }
    auto s = model_->forward(torch::from_blob(x.data(), {(int64_t)n, L, kStepFeatureDim}),
                             torch::from_blob(mask.data(), {(int64_t)n, L}))
                 .contiguous();
    std::copy(s.data_ptr<float>(), s.data_ptr<float>() + n, scores.begin() + i);
  }
  return scores;
}

}  // namespace tclm::cli
