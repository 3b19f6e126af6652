// tools/scorer.h: how `tclm eval` and `tclm predict` load and run a model: the libtorch-free
// inference engine (Mamba models) or the libtorch model (every kind; parity checks).
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tclm/dataset.h"
#include "tclm/infer.h"
#include "tclm/weights.h"
#include "model/cost_model.h"

namespace tclm::cli {

/// --backend engine|torch.
void add_backend_option(CLI::App* cmd, std::string* backend);

/// -m/--model: a missing file that is the option's default gets a hint on how to make one.
WeightsFile load_model_option(const std::string& path, const CLI::App& cmd);

/// A loaded model that scores programs (higher = predicted faster).
class ModelScorer {
 public:
  /// backend "engine" or "torch"; the engine runs Mamba models only, so other kinds fall back to
  /// libtorch (with a note on stderr). Throws tclm::Error naming `name` for a model that cannot load.
  ModelScorer(const WeightsFile& w, const std::string& name, std::string backend, int threads);
  /// Programs longer than this keep their first max_steps steps.
  void set_max_steps(int max_steps);
  int max_steps() const { return max_steps_; }
  /// Scores programs of a dataset.
  std::vector<float> score(const Dataset& d, const std::vector<uint32_t>& programs);
  /// Scores programs given as their steps.
  std::vector<float> score(const std::vector<std::vector<TransformStep>>& programs);

 private:
  std::string backend_;
  int max_steps_ = kDefaultMaxSteps;
  std::optional<CostModelEngine> engine_;
  CostModel model_;
};

}  // namespace tclm::cli
