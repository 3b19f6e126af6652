// bench/bench_core.cpp: throughput of the core pipeline on the embedded real records.
//
//   BM_ParseFeaturize  records parsed (simdjson) and featurized per second, from gzip files
//   BM_TrainStep       training programs per second (LambdaRank, batch 1024, forward+backward+Adam)
//   BM_Predict         libtorch-eager predictions per second (batch 4096)
// Run: build/bench_core [--benchmark_format=json]. Figures go to docs/benchmarks.md.
#include <benchmark/benchmark.h>

#include <numeric>

#include "common/runtime_env.h"
#include "tclm/dataset.h"
#include "tclm/feature.h"
#include "train/losses.h"
#include "train/trainer.h"

using namespace tclm;

namespace {

const std::string kData = std::string(TCLM_SOURCE_DIR) + "/data/records/k80";

const Dataset& dataset() {
  static Dataset d = Dataset::load({DataSource::parse("k80=" + kData)}, LoadOptions{});
  return d;
}

// The default model (TCL-SPEC §4 defaults), freshly initialised.
MambaCostModel default_model() {
  MambaConfig cfg;
  cfg.n_features = kStepFeatureDim;
  MambaCostModel model(cfg);
  init_mamba_weights(model);
  return model;
}

void BM_ParseFeaturize(benchmark::State& state) {
  const auto files = list_record_files(kData);
  std::vector<float> x(kDefaultMaxSteps * kStepFeatureDim);
  int64_t n = 0;
  for (auto _ : state) {
    ReadStats stats;
    for (const auto& f : files) {
      read_record_file(f, [&](const MeasureRecord& r, const RecordOrigin&) {
        featurize_program(r.steps, kDefaultMaxSteps, x.data());
        ++n;
      }, &stats);
    }
  }
  state.SetItemsProcessed(n);
  state.counters["records/s"] = benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ParseFeaturize)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(3);

void BM_TrainStep(benchmark::State& state) {
  set_threads(static_cast<int>(state.range(0)));
  const Dataset& d = dataset();
  MambaCostModel model = default_model();
  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(7e-4));
  // 16 groups of 64 programs from the first tasks
  std::vector<uint32_t> progs;
  for (const auto& t : d.tasks()) {
    for (size_t i = 0; i < std::min<size_t>(64, t.programs.size()) && progs.size() < 1024; ++i) progs.push_back(t.programs[i]);
  }
  progs.resize(1024 / 64 * 64);
  std::vector<float> x, mask, labels;
  const int L = d.featurize(progs, &x, &mask);
  for (uint32_t p : progs) labels.push_back(d.label(p));
  const int64_t n = static_cast<int64_t>(progs.size());
  auto xt = torch::from_blob(x.data(), {n, L, kStepFeatureDim});
  auto mt = torch::from_blob(mask.data(), {n, L});
  auto yt = torch::from_blob(labels.data(), {n / 64, 64});
  auto lm = torch::ones({n / 64, 64});
  for (auto _ : state) {
    auto s = model->forward(xt, mt).view({n / 64, 64});
    auto loss = lambdarank_loss(s, yt, lm);
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  state.counters["programs/s"] = benchmark::Counter(static_cast<double>(n * state.iterations()), benchmark::Counter::kIsRate);
  state.counters["steps"] = L;
}
BENCHMARK(BM_TrainStep)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(3.0);

void BM_Predict(benchmark::State& state) {
  set_threads(static_cast<int>(state.range(0)));
  const Dataset& d = dataset();
  MambaCostModel model = default_model();
  std::vector<uint32_t> progs(std::min<size_t>(4096, d.num_programs()));
  std::iota(progs.begin(), progs.end(), 0);
  for (auto _ : state) {
    auto s = predict_programs(model, d, progs, 4096);
    benchmark::DoNotOptimize(s.data());
  }
  state.counters["programs/s"] =
      benchmark::Counter(static_cast<double>(progs.size() * state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Predict)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(3.0);

}  // namespace

// BENCHMARK_MAIN with the CLI's runtime settings (common/runtime_env.h).
int main(int argc, char** argv) {
  tclm::reexec_with_runtime_env(argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
