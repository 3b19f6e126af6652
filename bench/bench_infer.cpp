// bench/bench_infer.cpp: scoring throughput of the libtorch-free inference engine (tclm/infer.h) against
// the libtorch model and XGBoost, and its arithmetic rate against the machine's measured fp32 peak.
//
// Inputs: n (default 10,000) record lines drawn at random (fixed seed) from data/records (real Ansor logs
// of three GPUs), their programs (transform steps) and dense features [n, L, 55] + mask. Model: the
// default config (d_model 128, 1 layer, d_state 8, expand 1) with Mamba's initialisation (speed does not
// depend on the values). Every figure is the median over --reps runs of the whole batch (min in the JSON).
//
//   libtorch eager      MambaCostModel::forward on the dense batch (NoGrad, eval), all cores; also in
//                       batches of 1,000 (less memory traffic; faster)
//   engine              CostModelEngine::predict on the dense batch, 1 thread and all cores; also without
//                       the step-row cache and prefix sharing (Options{0, false}: every row through the model)
//   engine from steps   predict_programs: featurize + score, all cores
//   one task            predict_programs on every program of the task with the most records (what a
//                       search round scores), with and without the reuse; ReuseCounters of both batches
//   engine from lines   predict_record_lines: parse JSON + featurize + score, all cores
//   featurize           featurize_program from steps / RecordParser + featurize_program from lines
//   XGBoost             a rank:pairwise booster (max_depth 10, eta 0.2, gamma 0.001, min_child_weight 0,
//                       --xgb-rounds trees, default 200) trained on a third of data/records, on 111 features
//                       (mean and max of the step features, and the step count), grouped by task;
//                       XGBoosterPredictFromDense (in place) and DMatrix + XGBoosterPredict, all cores
//   GFLOP/s             sum of flops_per_program(steps) over the batch / time (see tclm/infer.h): the
//                       arithmetic rate without the cache, an effective rate with it
//   peak                best of 3 OpenBLAS sgemm 2048^3 (all cores, and 1 core); for reference also a
//                       register-only FMA loop (the cores' FMA throughput, which no kernel can pass)
//   GEMM shapes         the engine's micro-kernel vs OpenBLAS cblas_sgemm (1 thread) on the Linear layers of
//                       one block (M = 256 rows)
//   latency             predict_programs on 1 program (the calling thread alone) and on 64 (all cores)
// Prints a table and one JSON line (prefix "JSON "). Options: --n N --reps R --xgb-rounds T --threads T
// --engine-only 1 (only the engine rows, for tuning).
#include <cblas.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/line_reader.h"
#include "common/runtime_env.h"
#include "common/simd.h"
#include "infer/gemm.h"
#include "model/mamba.h"
#include "tclm/dataset.h"
#include "tclm/feature.h"
#include "tclm/infer.h"
#include "tclm/record.h"
#include "train/trainer.h"

#if TCLM_HAVE_XGBOOST
#include <xgboost/c_api.h>
#endif

extern "C" {
void openblas_set_num_threads(int);
char* openblas_get_config(void);
char* openblas_get_corename(void);
}

using namespace tclm;

namespace {

using Clock = std::chrono::steady_clock;

struct Stat {
  double median = 0, min = 0;
};

/// Runs fn once to warm up, then `reps` times; seconds per run.
Stat measure(int reps, const std::function<void()>& fn) {
  fn();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return Stat{t[t.size() / 2], t.front()};
}

void pause_for_idle_threads() {
  // OpenBLAS's and OpenMP's worker threads spin for a while after a call; let them go to sleep before
  // timing something else on the same cores.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
}

/// Runs fn(begin, end) on `threads` threads over [0, n).
void parallel_for(size_t n, int threads, const std::function<void(size_t, size_t)>& fn) {
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    const size_t b = n * t / threads, e = n * (t + 1) / threads;
    pool.emplace_back(fn, b, e);
  }
  for (auto& th : pool) th.join();
}

struct Inputs {
  std::vector<std::string> lines;
  std::vector<std::vector<TransformStep>> task_programs;  // every program of the task with the most records
  std::string task_key;
  std::vector<std::vector<TransformStep>> programs;
  std::vector<float> x, mask;
  int L = 0;
  double total_steps = 0;
};

Inputs load_inputs(const std::string& dir, size_t n) {
  std::vector<std::string> all;
  std::map<std::string, std::vector<std::vector<TransformStep>>> by_task;  // (workload key, target)
  RecordParser parser;
  MeasureRecord rec;
  for (const std::string& f : list_record_files(dir)) {
    LineReader reader(f);
    std::string_view line;
    while (reader.next(&line)) {
      if (parser.parse(line, &rec).empty() && rec.valid()) {
        all.emplace_back(line);
        by_task[rec.workload_key + " " + rec.target].push_back(rec.steps);
      }
    }
  }
  std::mt19937_64 rng(1);
  std::shuffle(all.begin(), all.end(), rng);
  if (all.size() > n) all.resize(n);
  Inputs in;
  for (auto& [key, progs] : by_task) {
    if (progs.size() > in.task_programs.size()) {
      in.task_key = key;
      in.task_programs = std::move(progs);
    }
  }
  in.lines = std::move(all);
  for (const std::string& l : in.lines) {
    parser.parse(l, &rec);
    in.programs.push_back(rec.steps);
  }
  for (const auto& p : in.programs) in.L = std::max(in.L, std::min(static_cast<int>(p.size()), kDefaultMaxSteps));
  const size_t row = static_cast<size_t>(in.L) * kStepFeatureDim;
  in.x.assign(in.programs.size() * row, 0.0f);
  in.mask.assign(in.programs.size() * static_cast<size_t>(in.L), 0.0f);
  for (size_t i = 0; i < in.programs.size(); ++i) {
    const int used = featurize_program(in.programs[i], in.L, in.x.data() + i * row);
    std::fill(in.mask.begin() + i * in.L, in.mask.begin() + i * in.L + used, 1.0f);
    in.total_steps += used;
  }
  return in;
}

/// Per-program features for XGBoost: the pooled step features (tclm/feature.h).
constexpr int kXgbFeatures = kPooledFeatureDim;

double gemm_gflops_own(int M, int K, int N, int iters) {
  std::vector<float> w(static_cast<size_t>(N) * K), a(static_cast<size_t>(M) * K);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& v : w) v = u(rng);
  for (float& v : a) v = u(rng);
  infer::PackedLinear p;
  p.pack(w.data(), N, K, nullptr);
  infer::AlignedFloats c(static_cast<size_t>(M) * p.padded_n());
  const Stat s = measure(5, [&] {
    for (int i = 0; i < iters; ++i) infer::gemm(a.data(), K, M, p, c.data(), p.padded_n(), infer::Epilogue::kStore);
  });
  return 2.0 * M * K * N * iters / s.median / 1e9;
}

double gemm_gflops_blas(int M, int K, int N, int iters) {
  std::vector<float> w(static_cast<size_t>(N) * K), a(static_cast<size_t>(M) * K), c(static_cast<size_t>(M) * N);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& v : w) v = u(rng);
  for (float& v : a) v = u(rng);
  const Stat s = measure(5, [&] {
    for (int i = 0; i < iters; ++i) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a.data(), K, w.data(), K, 0.0f, c.data(), N);
    }
  });
  return 2.0 * M * K * N * iters / s.median / 1e9;
}

double peak_gflops(int threads) {
  openblas_set_num_threads(threads);
  const int n = 2048;
  std::vector<float> a(static_cast<size_t>(n) * n, 1.0f), b(static_cast<size_t>(n) * n, 0.5f), c(static_cast<size_t>(n) * n);
  double best = 0;
  for (int r = 0; r < 4; ++r) {
    const auto t0 = Clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (r > 0) best = std::max(best, 2.0 * n * n * n / s / 1e9);
  }
  return best;
}

/// The FMA throughput of the cores: `threads` threads each run 16 independent vector FMA chains in
/// registers (no memory traffic), the upper bound no kernel can pass.
double fma_loop_gflops(int threads) {
  constexpr int kChains = 16;
  const int64_t iters = 20'000'000;
  auto body = [&] {
    simd::V acc[kChains];
    for (int c = 0; c < kChains; ++c) acc[c] = simd::splat(1.0f + c * 1e-3f);
    const simd::V a = simd::splat(0.999999f), b = simd::splat(1e-7f);
    for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
      for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * a + b;
    }
    float s = 0;
    for (int c = 0; c < kChains; ++c) s += acc[c][0];
    if (s == 12345.0f) std::printf(" ");  // keep the result alive
  };
  double best = 0;
  for (int r = 0; r < 3; ++r) {
    const auto t0 = Clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(body);
    for (auto& th : pool) th.join();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, 2.0 * simd::kLanes * kChains * iters * threads / s / 1e9);
  }
  return best;
}

#if TCLM_HAVE_XGBOOST
#define XGB_CHECK(call)                                                             \
  do {                                                                              \
    if ((call) != 0) {                                                              \
      std::fprintf(stderr, "xgboost: %s: %s\n", #call, XGBGetLastError());          \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)
#endif

}  // namespace

int main(int argc, char** argv) {
  tclm::reexec_with_runtime_env(argv);  // as the CLI: passive OpenMP waiters, OpenBLAS's own kernels
  size_t n = 10000;
  int reps = 5, xgb_rounds = 200;
  bool engine_only = false;  // --engine-only 1: just the engine rows (for tuning)
  int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--n") n = std::stoul(argv[i + 1]);
    else if (a == "--reps") reps = std::stoi(argv[i + 1]);
    else if (a == "--xgb-rounds") xgb_rounds = std::stoi(argv[i + 1]);
    else if (a == "--threads") cores = std::stoi(argv[i + 1]);
    else if (a == "--engine-only") engine_only = std::stoi(argv[i + 1]) != 0;
    else {
      std::fprintf(stderr, "usage: bench_infer [--n N] [--reps R] [--xgb-rounds T] [--threads T] [--engine-only 0|1]\n");
      return 2;
    }
  }
  const std::string data_dir = std::string(TCLM_SOURCE_DIR) + "/data/records";
  const Inputs in = load_inputs(data_dir, n);
  n = in.programs.size();
  const int64_t nn = static_cast<int64_t>(n);
  std::printf("inputs: %zu programs from %s, %.1f steps on average, L = %d; %d cores; OpenBLAS %s (%s)\n", n,
              data_dir.c_str(), in.total_steps / n, in.L, cores, openblas_get_config(), openblas_get_corename());

  // ---- the model: libtorch and engine
  set_threads(cores);
  MambaConfig cfg;
  cfg.n_features = kStepFeatureDim;
  torch::manual_seed(0);
  MambaCostModel model(cfg);
  init_mamba_weights(model);
  model->eval();
  WeightsFile w;
  export_to_weights(model, &w);
  w.feature_version = kFeatureVersion;
  CostModelEngine engine(w, "bench");
  engine.set_threads(cores);
  CostModelEngine engine1 = engine;
  engine1.set_threads(1);

  std::vector<float> s_engine(n), s_torch(n);
  const auto xt = torch::from_blob(const_cast<float*>(in.x.data()), {nn, in.L, kStepFeatureDim});
  const auto mt = torch::from_blob(const_cast<float*>(in.mask.data()), {nn, in.L});
  auto torch_forward = [&] {
    torch::NoGradGuard ng;
    const auto s = model->forward(xt, mt).contiguous();
    std::memcpy(s_torch.data(), s.data_ptr<float>(), n * sizeof(float));
  };

  std::map<std::string, Stat> t;
  if (engine_only) {
    torch_forward();
  } else {
    t["torch"] = measure(reps, torch_forward);
    t["torch_b1000"] = measure(reps, [&] {  // the same in batches of 1,000 (less memory traffic)
      torch::NoGradGuard ng;
      for (int64_t b = 0; b < nn; b += 1000) {
        const int64_t len = std::min<int64_t>(1000, nn - b);
        const auto s = model->forward(xt.narrow(0, b, len), mt.narrow(0, b, len)).contiguous();
        std::memcpy(s_torch.data() + b, s.data_ptr<float>(), len * sizeof(float));
      }
    });
    pause_for_idle_threads();
  }
  t["engine_1t"] = measure(reps, [&] { engine1.predict(in.x.data(), in.mask.data(), nn, in.L, s_engine.data()); });
  t["engine"] = measure(reps, [&] { engine.predict(in.x.data(), in.mask.data(), nn, in.L, s_engine.data()); });
  // Without the step-row cache: every row through the whole model (the engine's arithmetic rate).
  CostModelEngine engine_nc = engine, engine_nc1 = engine1;
  CostModelEngine::Options plain;
  plain.step_cache_bytes = 0;
  plain.share_prefixes = false;
  engine_nc.set_options(plain);
  engine_nc1.set_options(plain);
  std::vector<float> s_nocache(n);
  t["engine_nocache_1t"] = measure(reps, [&] { engine_nc1.predict(in.x.data(), in.mask.data(), nn, in.L, s_nocache.data()); });
  t["engine_nocache"] = measure(reps, [&] { engine_nc.predict(in.x.data(), in.mask.data(), nn, in.L, s_nocache.data()); });
  const bool cache_exact = s_nocache == s_engine;
  // One task's programs (what a search round scores): the repeated work is larger than in the mixed batch.
  const auto& tp = in.task_programs;
  std::vector<float> s_task, s_task_plain;
  t["task_engine"] = measure(reps, [&] { s_task = engine.predict_programs(tp); });
  t["task_plain"] = measure(reps, [&] { s_task_plain = engine_nc.predict_programs(tp); });
  const bool task_exact = s_task == s_task_plain;
  // What the reuse saved on each batch (one more call each, with counters).
  auto reuse_of = [&](const std::function<void(const CostModelEngine&)>& call) {
    CostModelEngine::ReuseCounters c;
    CostModelEngine e = engine;
    CostModelEngine::Options o = e.options();
    o.counters = &c;
    e.set_options(o);
    call(e);
    return std::array<double, 2>{static_cast<double>(c.rows) / c.positions, static_cast<double>(c.layer0_rows) / c.positions};
  };
  const auto reuse_mixed = reuse_of([&](const CostModelEngine& e) { e.predict(in.x.data(), in.mask.data(), nn, in.L, s_nocache.data()); });
  const auto reuse_task = reuse_of([&](const CostModelEngine& e) { e.predict_programs(tp); });
  double max_abs = 0, scale = 0;
  for (size_t i = 0; i < n; ++i) {
    max_abs = std::max(max_abs, static_cast<double>(std::fabs(s_engine[i] - s_torch[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(s_torch[i])));
  }
  std::vector<float> s_steps;
  t["engine_steps"] = measure(reps, [&] { s_steps = engine.predict_programs(in.programs); });
  std::vector<std::string_view> views(in.lines.begin(), in.lines.end());
  std::vector<float> s_lines;
  t["engine_lines"] = measure(reps, [&] { s_lines = engine.predict_record_lines(views); });
  const bool paths_agree = s_steps == s_engine && s_lines == s_engine;

  // Latency of small calls (the calling thread only): one program, and 64 programs.
  const std::vector<std::vector<TransformStep>> one(in.programs.begin(), in.programs.begin() + 1),
      few(in.programs.begin(), in.programs.begin() + std::min<size_t>(64, n));
  const Stat lat1 = measure(reps, [&] {
    for (int i = 0; i < 1000; ++i) engine.predict_programs(one);
  });
  const Stat lat64 = measure(reps, [&] {
    for (int i = 0; i < 20; ++i) engine.predict_programs(few);
  });
  const double lat1_us = lat1.median / 1000 * 1e6, lat64_us = lat64.median / 20 * 1e6;

  if (engine_only) {
    std::printf("latency: 1 program %.1f us, 64 programs %.1f us\n", lat1_us, lat64_us);
    std::printf("step-row cache on/off scores identical: %s (one task: %s)\n", cache_exact ? "yes" : "NO",
                task_exact ? "yes" : "NO");
    std::printf("one task (%zu programs): %.0f programs/s, without cache and prefix sharing %.0f\n", tp.size(),
                tp.size() / t["task_engine"].median, tp.size() / t["task_plain"].median);
    for (const char* k : {"engine_1t", "engine", "engine_nocache_1t", "engine_nocache", "engine_steps", "engine_lines"}) {
      std::printf("%-14s %8.0f programs/s  (%.1f ms)\n", k, n / t[k].median, t[k].median * 1e3);
    }
    return 0;
  }

  // ---- featurization alone
  const size_t row = static_cast<size_t>(kDefaultMaxSteps) * kStepFeatureDim;
  auto featurize_steps = [&](size_t b, size_t e) {
    std::vector<float> buf(row);
    for (size_t i = b; i < e; ++i) featurize_program(in.programs[i], kDefaultMaxSteps, buf.data());
  };
  auto featurize_lines = [&](size_t b, size_t e) {
    std::vector<float> buf(row);
    RecordParser parser;
    MeasureRecord rec;
    for (size_t i = b; i < e; ++i) {
      parser.parse(in.lines[i], &rec);
      featurize_program(rec.steps, kDefaultMaxSteps, buf.data());
    }
  };
  t["feat_steps_1t"] = measure(reps, [&] { featurize_steps(0, n); });
  t["feat_steps"] = measure(reps, [&] { parallel_for(n, cores, featurize_steps); });
  t["feat_lines_1t"] = measure(reps, [&] { featurize_lines(0, n); });
  t["feat_lines"] = measure(reps, [&] { parallel_for(n, cores, featurize_lines); });

  // ---- XGBoost on per-program summaries
  double xgb_trees = 0;
#if TCLM_HAVE_XGBOOST
  {
    Dataset d = Dataset::load({DataSource::parse("k80=" + data_dir + "/k80"), DataSource::parse("v100=" + data_dir + "/v100"),
                               DataSource::parse("mi50=" + data_dir + "/mi50")},
                              LoadOptions{});
    std::vector<float> feats, labels;
    std::vector<unsigned> groups;
    std::vector<StepView> sv;
    std::vector<int64_t> sv_ints;
    std::vector<float> buf(row);
    for (const Task& task : d.tasks()) {
      unsigned g = 0;
      for (size_t j = 0; j < task.programs.size(); j += 3) {  // a third of the programs: ~23k rows
        const uint32_t p = task.programs[j];
        d.steps(p, &sv, &sv_ints);
        const int used = featurize_program(sv.data(), sv.size(), kDefaultMaxSteps, buf.data());
        feats.resize(feats.size() + kXgbFeatures);
        pool_step_features(buf.data(), used, feats.data() + feats.size() - kXgbFeatures);
        labels.push_back(d.label(p));
        ++g;
      }
      if (g > 0) groups.push_back(g);
    }
    DMatrixHandle dtrain;
    XGB_CHECK(XGDMatrixCreateFromMat(feats.data(), labels.size(), kXgbFeatures, NAN, &dtrain));
    XGB_CHECK(XGDMatrixSetFloatInfo(dtrain, "label", labels.data(), labels.size()));
    XGB_CHECK(XGDMatrixSetUIntInfo(dtrain, "group", groups.data(), groups.size()));
    BoosterHandle booster;
    XGB_CHECK(XGBoosterCreate(&dtrain, 1, &booster));
    const std::string nthread = std::to_string(cores);
    for (auto [k, v] : std::vector<std::pair<const char*, const char*>>{
             {"objective", "rank:pairwise"}, {"max_depth", "10"}, {"eta", "0.2"}, {"gamma", "0.001"},
             {"min_child_weight", "0"}, {"seed", "43"}, {"verbosity", "0"}, {"nthread", nthread.c_str()}}) {
      XGB_CHECK(XGBoosterSetParam(booster, k, v));
    }
    const auto t0 = Clock::now();
    for (int it = 0; it < xgb_rounds; ++it) XGB_CHECK(XGBoosterUpdateOneIter(booster, it, dtrain));
    std::printf("XGBoost: trained %d rounds on %zu programs of %zu tasks in %.1f s\n", xgb_rounds, labels.size(),
                groups.size(), std::chrono::duration<double>(Clock::now() - t0).count());
    int rounds = 0;
    XGB_CHECK(XGBoosterBoostedRounds(booster, &rounds));
    xgb_trees = rounds;

    // The candidates' summaries (computing them is timed separately: the engine's rows include featurizing).
    std::vector<float> cand(n * kXgbFeatures);
    auto summarize = [&] {
      for (size_t i = 0; i < n; ++i) {
        const float* xi = in.x.data() + i * static_cast<size_t>(in.L) * kStepFeatureDim;
        int used = 0;
        while (used < in.L && in.mask[i * in.L + used] > 0) ++used;
        pool_step_features(xi, used, cand.data() + i * kXgbFeatures);
      }
    };
    t["xgb_summary"] = measure(reps, summarize);
    const std::string array = fmt::format(
        "{{\"data\": [{}, true], \"shape\": [{}, {}], \"typestr\": \"<f4\", \"version\": 3}}",
        reinterpret_cast<uintptr_t>(cand.data()), n, kXgbFeatures);
    const char* config = "{\"type\": 0, \"training\": false, \"iteration_begin\": 0, \"iteration_end\": 0, "
                         "\"strict_shape\": false, \"missing\": NaN, \"cache_id\": 0}";
    std::vector<float> s_xgb(n);
    t["xgb_inplace"] = measure(reps, [&] {
      const bst_ulong* shape;
      bst_ulong dim;
      const float* out;
      XGB_CHECK(XGBoosterPredictFromDense(booster, array.c_str(), config, nullptr, &shape, &dim, &out));
      std::memcpy(s_xgb.data(), out, n * sizeof(float));
    });
    t["xgb_dmatrix"] = measure(reps, [&] {
      DMatrixHandle dm;  // a new matrix each time: XGBoost caches predictions per DMatrix
      XGB_CHECK(XGDMatrixCreateFromMat(cand.data(), n, kXgbFeatures, NAN, &dm));
      bst_ulong len;
      const float* out;
      XGB_CHECK(XGBoosterPredict(booster, dm, 0, 0, 0, &len, &out));
      std::memcpy(s_xgb.data(), out, n * sizeof(float));
      XGB_CHECK(XGDMatrixFree(dm));
    });
    XGB_CHECK(XGBoosterFree(booster));
    XGB_CHECK(XGDMatrixFree(dtrain));
  }
#endif
  pause_for_idle_threads();

  // ---- GEMM shapes of one block: own micro-kernel vs OpenBLAS, 1 thread
  openblas_set_num_threads(1);
  struct Shape {
    const char* name;
    int K, N;
  };
  const Shape shapes[] = {{"embed", 55, 128}, {"in_proj", 128, 256}, {"x_proj", 128, 24},
                          {"dt_proj", 8, 128}, {"out_proj", 128, 128}, {"head1", 128, 128}};
  std::vector<std::pair<double, double>> gemm_rates;
  double own_time = 0, blas_time = 0;
  for (const Shape& s : shapes) {
    const int M = CostModelEngine::kBlockRows;
    const int iters = std::max(20, static_cast<int>(2e8 / (2.0 * M * s.K * s.N)));
    const double own = gemm_gflops_own(M, s.K, s.N, iters), blas = gemm_gflops_blas(M, s.K, s.N, iters);
    gemm_rates.emplace_back(own, blas);
    own_time += 2.0 * M * s.K * s.N / own;
    blas_time += 2.0 * M * s.K * s.N / blas;
  }

  // ---- the machine's fp32 peak through OpenBLAS
  const double peak1 = peak_gflops(1);
  const double peak = peak_gflops(cores);
  openblas_set_num_threads(cores);
  const double fma_peak = fma_loop_gflops(cores);

  // ---- report
  double flops = 0;
  for (size_t i = 0; i < n; ++i) {
    flops += engine.flops_per_program(static_cast<int>(std::min<size_t>(in.programs[i].size(), kDefaultMaxSteps)));
  }
  auto cps = [&](const char* k) { return t.count(k) ? n / t[k].median : 0.0; };
  auto gflops = [&](const char* k) { return flops / t[k].median / 1e9; };
  std::printf("\nparity: engine vs libtorch max |diff| %.3g (scale %.3g, rel %.3g); steps/lines paths identical: %s; "
              "step-row cache on/off identical: %s\n",
              max_abs, scale, max_abs / scale, paths_agree ? "yes" : "NO", cache_exact ? "yes" : "NO");
  std::printf("model: %.3g MFLOP per program on average (%.0f FLOP per step + head)\n\n", flops / n / 1e6,
              (engine.flops_per_program(100) - engine.flops_per_program(0)) / 100);
  std::printf("%-44s %12s %10s %9s %10s\n", "path (batch of n programs)", "programs/s", "ms/batch", "GFLOP/s", "% of peak");
  auto line = [&](const char* label, const char* k, bool with_flops) {
    if (!t.count(k)) return;
    if (with_flops) {
      std::printf("%-44s %12.0f %10.1f %9.1f %9.1f%%\n", label, cps(k), t[k].median * 1e3, gflops(k),
                  100 * gflops(k) / peak);
    } else {
      std::printf("%-44s %12.0f %10.1f %9s %10s\n", label, cps(k), t[k].median * 1e3, "", "");
    }
  };
  line("libtorch eager forward (all cores)", "torch", true);
  line("libtorch eager, batches of 1,000", "torch_b1000", true);
  line("engine predict, 1 thread", "engine_1t", true);
  line("engine predict, all cores", "engine", true);
  line("engine plain (no row cache/prefixes), 1 thr", "engine_nocache_1t", true);
  line("engine plain (no row cache/prefixes), all", "engine_nocache", true);
  line("engine from steps (featurize+score)", "engine_steps", true);
  line("engine from record lines (parse+feat+score)", "engine_lines", true);
  line("featurize from steps, 1 thread", "feat_steps_1t", false);
  line("featurize from steps, all cores", "feat_steps", false);
  line("parse + featurize record lines, 1 thread", "feat_lines_1t", false);
  line("parse + featurize record lines, all cores", "feat_lines", false);
  line("XGBoost per-program summaries (1 thread)", "xgb_summary", false);
  line("XGBoost predict in place (all cores)", "xgb_inplace", false);
  line("XGBoost DMatrix + predict (all cores)", "xgb_dmatrix", false);
  const double task_cps = tp.size() / t["task_engine"].median, task_plain_cps = tp.size() / t["task_plain"].median;
  std::printf("\none task's %zu programs (%s), predict_programs, all cores: %.0f programs/s; plain %.0f (%.2fx); "
              "identical: %s\n", tp.size(), in.task_key.substr(0, 60).c_str(), task_cps, task_plain_cps,
              task_cps / task_plain_cps, task_exact ? "yes" : "NO");
  std::printf("rows computed after prefix sharing / through layer 0 (step-row cache misses), of all steps: mixed "
              "batch %.1f%% / %.2f%%, one task %.1f%% / %.2f%%\n", 100 * reuse_mixed[0], 100 * reuse_mixed[1],
              100 * reuse_task[0], 100 * reuse_task[1]);
  std::printf("\nlatency of small calls (predict_programs): 1 program %.1f us (%zu steps), 64 programs %.1f us\n",
              lat1_us, one[0].size(), lat64_us);
  std::printf("GFLOP/s = the model's FLOPs (flops_per_program) / time. Without the step-row cache that is the "
              "engine's arithmetic rate; with it, an effective rate (the cache skips layer 0's embedding, LayerNorm and "
              "in_proj of repeated steps), which can exceed the peak.\n");
  std::printf("fp32 peak (OpenBLAS sgemm 2048^3): %.1f GFLOP/s on %d cores, %.1f on 1 core; register FMA loop: %.1f "
              "(engine without the cache at %.1f%% of it)\n", peak, cores, peak1, fma_peak,
              100 * gflops("engine_nocache") / fma_peak);
  std::printf("engine / libtorch eager: %.1fx (%.1fx against batches of 1,000); engine / XGBoost in-place predict: %.2fx (%g trees)\n",
              cps("engine") / cps("torch"), cps("engine") / cps("torch_b1000"), t.count("xgb_inplace") ? cps("engine") / cps("xgb_inplace") : 0.0,
              xgb_trees);
  std::printf("\nGEMM of one block (M = %d rows), 1 thread, GFLOP/s: own micro-kernel vs OpenBLAS\n",
              CostModelEngine::kBlockRows);
  for (size_t i = 0; i < std::size(shapes); ++i) {
    std::printf("  %-9s K %3d N %3d   %7.1f   %7.1f\n", shapes[i].name, shapes[i].K, shapes[i].N, gemm_rates[i].first,
                gemm_rates[i].second);
  }
  std::printf("  all six layers: own %.1f us, OpenBLAS %.1f us per block\n", own_time * 1e-3, blas_time * 1e-3);

  std::string json = fmt::format(
      "{{\"bench\": \"infer\", \"n\": {}, \"mean_steps\": {:.2f}, \"cores\": {}, \"reps\": {}, \"peak_gflops\": {:.1f}, "
      "\"peak_gflops_1core\": {:.1f}, \"engine_gflops\": {:.1f}, \"engine_gflops_1t\": {:.1f}, \"peak_fraction\": {:.3f}, "
      "\"parity_rel\": {:.3g}, \"xgb_trees\": {}, \"fma_loop_gflops\": {:.1f}, \"latency_1_us\": {:.1f}, "
      "\"latency_64_us\": {:.1f}, \"engine_nocache_gflops\": {:.1f}, \"nocache_peak_fraction\": {:.3f}, "
      "\"cache_exact\": {}",
      n, in.total_steps / n, cores, reps, peak, peak1, gflops("engine"), gflops("engine_1t"), gflops("engine") / peak,
      max_abs / scale, xgb_trees, fma_peak, lat1_us, lat64_us, gflops("engine_nocache"),
      gflops("engine_nocache") / peak, cache_exact);
  for (const auto& [k, s] : t) {
    const size_t count = k.rfind("task_", 0) == 0 ? tp.size() : n;
    json += fmt::format(", \"{}_per_s\": {:.0f}, \"{}_min_s\": {:.5f}", k, count / s.median, k, s.min);
  }
  json += fmt::format(", \"task_programs\": {}, \"task_exact\": {}, \"rows_fraction_mixed\": {:.4f}, "
                      "\"layer0_fraction_mixed\": {:.4f}, \"rows_fraction_task\": {:.4f}, \"layer0_fraction_task\": {:.4f}",
                      tp.size(), task_exact, reuse_mixed[0], reuse_mixed[1], reuse_task[0], reuse_task[1]);
  json += fmt::format(", \"gemm_block_us_own\": {:.1f}, \"gemm_block_us_openblas\": {:.1f}}}", own_time * 1e-3,
                      blas_time * 1e-3);
  std::printf("\nJSON %s\n", json.c_str());
  return 0;
}
