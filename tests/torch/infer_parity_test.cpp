// Parity of the libtorch-free inference engine (tclm/infer.h) with the libtorch model it reimplements
// (src/model/mamba.cpp), on real Ansor records (data/records/k80):
//   * randomly initialised models (Mamba's official initialisation, init_mamba_weights) and models
//     trained for a few Adam steps (so that A_log, D, the norms and every bias have moved away from
//     their initial values), for the default config, n_layers 2 / expand 2 / d_state 16, and odd sizes;
//   * the engine's scores from steps (predict_views on the dataset), from the dense features
//     (predict) and through a weights file on disk, against the trainer's predict_programs.
// Tolerance: max |engine - torch| / max |torch| < 1e-4. Both sides compute in float32 with different
// summation orders (blocked GEMMs vs BLAS, a polynomial exp vs libm's); the measured difference is
// ~1e-6 (printed), so the bound leaves a large margin and still catches any wrong term.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "model/mamba.h"
#include "tclm/dataset.h"
#include "tclm/infer.h"
#include "test_util.h"
#include "train/losses.h"
#include "train/trainer.h"

namespace tclm {
namespace {

const Dataset& k80() {
  static const Dataset d =
      Dataset::load({DataSource::parse("k80=" + test::source_dir() + "/data/records/k80")}, LoadOptions{});
  return d;
}

/// Every 12th program of the dataset (~2,300 programs of all 36 tasks, 3 to 70 steps).
std::vector<uint32_t> sample_programs() {
  std::vector<uint32_t> progs;
  for (uint32_t p = 0; p < k80().num_programs(); p += 12) progs.push_back(p);
  return progs;
}

template <typename... Args>
MambaConfig config(Args... args) {
  return test::make_config(args...);
}

MambaCostModel initialised_model(const MambaConfig& cfg, uint64_t seed) {
  torch::manual_seed(seed);
  MambaCostModel model(cfg);
  init_mamba_weights(model);
  return model;
}

/// A few LambdaRank steps with Adam on groups of programs of one task, with a large learning rate so
/// that every parameter moves.
void train_briefly(MambaCostModel& model, int steps) {
  const Dataset& d = k80();
  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(1e-2));
  model->train();
  for (int step = 0; step < steps; ++step) {
    std::vector<uint32_t> progs;
    std::vector<float> labels;
    const int groups = 8, group = 32;
    for (int g = 0; g < groups; ++g) {
      const Task& t = d.tasks()[(step * groups + g) % d.tasks().size()];
      for (int j = 0; j < group; ++j) {
        const uint32_t p = t.programs[(step * 7 + j) % t.programs.size()];
        progs.push_back(p);
        labels.push_back(d.label(p));
      }
    }
    std::vector<float> x, mask;
    const int L = d.featurize(progs, &x, &mask);
    const int64_t n = static_cast<int64_t>(progs.size());
    const auto xt = torch::from_blob(x.data(), {n, L, kStepFeatureDim});
    const auto mt = torch::from_blob(mask.data(), {n, L});
    const auto yt = torch::from_blob(labels.data(), {groups, group});
    const auto s = model->forward(xt, mt).view({groups, group});
    const auto loss = lambdarank_loss(s, yt, torch::ones({groups, group}));
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  model->eval();
}

WeightsFile to_weights(MambaCostModel& model) {
  WeightsFile w;
  export_to_weights(model, &w);
  w.feature_version = kFeatureVersion;
  w.metadata_json = "{}";
  return w;
}

struct Diff {
  double rel = 0;       // max |a - b| / max |b|
  double max_abs = 0;   // max |a - b|
  double scale = 0;     // max |b|
};

Diff diff(const std::vector<float>& a, const std::vector<float>& b) {
  Diff d;
  for (size_t i = 0; i < a.size(); ++i) {
    d.max_abs = std::max(d.max_abs, static_cast<double>(std::fabs(a[i] - b[i])));
    d.scale = std::max(d.scale, static_cast<double>(std::fabs(b[i])));
  }
  d.rel = d.max_abs / std::max(d.scale, 1e-30);
  return d;
}

void expect_parity(MambaCostModel& model, const std::string& what) {
  const Dataset& d = k80();
  const std::vector<uint32_t> progs = sample_programs();
  const std::vector<float> want = predict_programs(model, d, progs, 1024);

  const CostModelEngine engine(to_weights(model), what);
  std::vector<float> from_steps(progs.size());
  engine.predict_views(progs.size(), [&](size_t i, std::vector<StepView>* v) {
        thread_local std::vector<int64_t> ints;
        d.steps(progs[i], v, &ints);
      },
                       from_steps.data());
  std::vector<float> x, mask;
  const int L = d.featurize(progs, &x, &mask);
  std::vector<float> from_features(progs.size());
  engine.predict(x.data(), mask.data(), static_cast<int64_t>(progs.size()), L, from_features.data());

  const Diff a = diff(from_steps, want), b = diff(from_features, want);
  std::printf("[  parity  ] %-40s %zu programs: max|diff| %.3g, scale %.3g, rel %.3g (features: rel %.3g)\n",
              what.c_str(), progs.size(), a.max_abs, a.scale, a.rel, b.rel);
  EXPECT_LT(a.rel, 1e-4) << what;
  EXPECT_LT(b.rel, 1e-4) << what;
  EXPECT_GT(a.scale, 0.0) << what;  // a model that scores everything 0 would prove nothing
  // The ranking within each task is what a search uses: no pair of clearly different scores may flip.
  int flips = 0;
  for (size_t i = 1; i < progs.size(); ++i) {
    if (std::fabs(want[i] - want[i - 1]) > 1e-3 * a.scale &&
        (want[i] > want[i - 1]) != (from_steps[i] > from_steps[i - 1])) {
      ++flips;
    }
  }
  EXPECT_EQ(flips, 0) << what;
}

TEST(InferParity, InitialisedModels) {
  const MambaConfig configs[] = {config(128, 1, 8, 4, 1), config(128, 2, 16, 4, 2), config(40, 2, 5, 3, 3, 3, 24)};
  uint64_t seed = 100;
  for (const MambaConfig& cfg : configs) {
    MambaCostModel model = initialised_model(cfg, seed++);
    expect_parity(model, "init " + cfg.to_json());
  }
}

TEST(InferParity, BrieflyTrainedModels) {
  const MambaConfig configs[] = {config(128, 1, 8, 4, 1), config(128, 2, 16, 4, 2)};
  uint64_t seed = 200;
  for (const MambaConfig& cfg : configs) {
    MambaCostModel model = initialised_model(cfg, seed++);
    const auto before = to_weights(model);
    train_briefly(model, 8);
    const auto after = to_weights(model);
    // The parameters that the initialisation fixes have moved (a ranking loss leaves head2.bias alone).
    for (const char* name : {"mixers.0.A_log", "mixers.0.D", "norms.0.weight", "norm_f.bias",
                             "mixers.0.dt_proj.bias", "mixers.0.conv1d.bias", "embed.bias", "head1.bias"}) {
      EXPECT_NE(after.find(name)->data, before.find(name)->data) << name;
    }
    expect_parity(model, "trained " + cfg.to_json());
  }
}

TEST(InferParity, ThroughAWeightsFileOnDisk) {
  MambaCostModel model = initialised_model(config(128, 1, 8, 4, 1), 300);
  train_briefly(model, 3);
  test::TempDir dir;
  save_weights(to_weights(model), dir.file("m.tclm"));
  const CostModelEngine engine = CostModelEngine::load(dir.file("m.tclm"));
  // And the libtorch model loaded from the same file (the CLI's path).
  CostModel loaded = load_cost_model(load_weights(dir.file("m.tclm")), "m.tclm");
  const Dataset& d = k80();
  const std::vector<uint32_t> progs = sample_programs();
  const std::vector<float> want = predict_programs(loaded, d, progs);
  std::vector<float> got(progs.size());
  engine.predict_views(progs.size(), [&](size_t i, std::vector<StepView>* v) {
        thread_local std::vector<int64_t> ints;
        d.steps(progs[i], v, &ints);
      }, got.data());
  EXPECT_LT(diff(got, want).rel, 1e-4);
}

}  // namespace
}  // namespace tclm
