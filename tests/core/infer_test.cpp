// Tests of the libtorch-free inference engine (tclm/infer.h), without libtorch:
//   (1) the engine against a plain double-precision forward pass written here from the model's definition
//       (src/model/mamba.h), on real records and on odd sizes that exercise every padding path;
//   (2) padding invariance, padding holes, and independence of batch composition and thread count;
//   (3) the input paths (features, steps, step views, record lines) agree;
//   (4) 8 threads predicting at once on one engine give the serial results;
//   (5) weights of another kind or feature version, corrupt files, missing or misshapen tensors are
//       refused with a message naming the file.
// Parity with the libtorch model itself: tests/torch/infer_parity_test.cpp.
#include "tclm/infer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/line_reader.h"
#include "tclm/error.h"
#include "tclm/record.h"
#include "test_util.h"

namespace tclm {
namespace {

// ---- a random model as a weights file (the libtorch model's parameter names and shapes)

WeightsFile random_weights(const MambaConfig& cfg, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const int64_t F = cfg.n_features, D = cfg.d_model, E = cfg.d_inner(), N = cfg.d_state,
                R = cfg.resolved_dt_rank(), K = cfg.d_conv, H = cfg.resolved_head_hidden();
  WeightsFile w;
  w.model_kind = "mamba";
  w.feature_version = kFeatureVersion;
  w.config_json = cfg.to_json();
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float scale, float offset = 0.0f) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = offset + scale * uni(rng);
    w.tensors.push_back(NamedTensor{name, std::move(shape), std::move(v)});
  };
  // Scales like a trained model's: Linear weights ~ 1/sqrt(fan_in), delta mostly 0.01..1, A_log ~ log(1..N).
  add("embed.weight", {D, F}, 1.0f / std::sqrt(static_cast<float>(F)));
  add("embed.bias", {D}, 0.1f);
  for (int i = 0; i < cfg.n_layers; ++i) {
    const std::string n = "norms." + std::to_string(i) + ".", m = "mixers." + std::to_string(i) + ".";
    add(n + "weight", {D}, 0.2f, 1.0f);
    add(n + "bias", {D}, 0.1f);
    add(m + "A_log", {E, N}, 1.0f, 1.0f);
    add(m + "D", {E}, 0.5f, 1.0f);
    add(m + "in_proj.weight", {2 * E, D}, 1.0f / std::sqrt(static_cast<float>(D)));
    add(m + "conv1d.weight", {E, 1, K}, 1.0f / std::sqrt(static_cast<float>(K)));
    add(m + "conv1d.bias", {E}, 0.1f);
    add(m + "x_proj.weight", {R + 2 * N, E}, 1.0f / std::sqrt(static_cast<float>(E)));
    add(m + "dt_proj.weight", {E, R}, 1.0f / std::sqrt(static_cast<float>(R)));
    add(m + "dt_proj.bias", {E}, 2.0f, -3.0f);
    add(m + "out_proj.weight", {D, E}, 1.0f / std::sqrt(static_cast<float>(E)));
  }
  add("norm_f.weight", {D}, 0.2f, 1.0f);
  add("norm_f.bias", {D}, 0.1f);
  add("head1.weight", {H, D}, 1.0f / std::sqrt(static_cast<float>(D)));
  add("head1.bias", {H}, 0.1f);
  add("head2.weight", {1, H}, 1.0f / std::sqrt(static_cast<float>(H)));
  add("head2.bias", {1}, 0.1f);
  return w;
}

template <typename... Args>
MambaConfig config(Args... args) {
  return test::make_config(args...);
}

// ---- the reference: the model's forward pass in double precision, one program at a time, written
// from src/model/mamba.h with nothing shared with the engine.

struct Reference {
  MambaConfig cfg;
  const WeightsFile* w;
  const std::vector<float>& t(const std::string& name) const { return w->find(name)->data; }

  // y[o] = sum_i W[o, i] x[i] (+ b[o])
  std::vector<double> linear(const std::string& name, const std::vector<double>& x, bool bias) const {
    const auto& W = t(name + ".weight");
    const size_t in = x.size(), out = W.size() / in;
    std::vector<double> y(out, 0.0);
    for (size_t o = 0; o < out; ++o) {
      double s = bias ? t(name + ".bias")[o] : 0.0;
      for (size_t i = 0; i < in; ++i) s += static_cast<double>(W[o * in + i]) * x[i];
      y[o] = s;
    }
    return y;
  }
  std::vector<double> layer_norm(const std::string& name, const std::vector<double>& x) const {
    double mean = 0, var = 0;
    for (double v : x) mean += v;
    mean /= static_cast<double>(x.size());
    for (double v : x) var += (v - mean) * (v - mean);
    var /= static_cast<double>(x.size());
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      y[i] = (x[i] - mean) / std::sqrt(var + 1e-5) * t(name + ".weight")[i] + t(name + ".bias")[i];
    }
    return y;
  }
  static double silu(double v) { return v / (1.0 + std::exp(-v)); }
  static double softplus(double v) { return v > 20 ? v : std::log1p(std::exp(v)); }

  /// x: [L, F] rows; mask: [L] (real if > 0).
  double score(const float* x, const float* mask, int L) const {
    const int D = cfg.d_model, E = cfg.d_inner(), N = cfg.d_state, R = cfg.resolved_dt_rank(), K = cfg.d_conv,
              F = cfg.n_features;
    std::vector<std::vector<double>> h(static_cast<size_t>(L));
    for (int s = 0; s < L; ++s) {
      std::vector<double> in(static_cast<size_t>(F), 0.0);
      if (mask[s] > 0) {
        for (int f = 0; f < F; ++f) in[f] = x[s * F + f];
      }
      h[s] = linear("embed", in, true);
    }
    for (int layer = 0; layer < cfg.n_layers; ++layer) {
      const std::string m = "mixers." + std::to_string(layer) + ".";
      std::vector<std::vector<double>> xs(L), zs(L), xc(L);
      for (int s = 0; s < L; ++s) {
        const auto xz = linear(m + "in_proj", layer_norm("norms." + std::to_string(layer), h[s]), false);
        xs[s].assign(xz.begin(), xz.begin() + E);
        zs[s].assign(xz.begin() + E, xz.end());
      }
      const auto& cw = t(m + "conv1d.weight");
      const auto& cb = t(m + "conv1d.bias");
      for (int s = 0; s < L; ++s) {
        xc[s].resize(E);
        for (int e = 0; e < E; ++e) {
          double acc = cb[e];
          for (int k = 0; k < K; ++k) {
            const int src = s - K + 1 + k;
            if (src >= 0) acc += cw[e * K + k] * xs[src][e];
          }
          xc[s][e] = silu(acc);
        }
      }
      std::vector<double> state(static_cast<size_t>(E) * N, 0.0);
      const auto& A_log = t(m + "A_log");
      const auto& Dv = t(m + "D");
      for (int s = 0; s < L; ++s) {
        const auto dbc = linear(m + "x_proj", xc[s], false);
        const std::vector<double> dt_raw(dbc.begin(), dbc.begin() + R);
        auto delta = linear(m + "dt_proj", dt_raw, true);
        for (double& d : delta) d = softplus(d);
        std::vector<double> y(E);
        for (int e = 0; e < E; ++e) {
          double acc = Dv[e] * xc[s][e];
          for (int n = 0; n < N; ++n) {
            double& st = state[static_cast<size_t>(e) * N + n];
            st = std::exp(delta[e] * -std::exp(static_cast<double>(A_log[e * N + n]))) * st +
                 delta[e] * dbc[R + n] * xc[s][e];
            acc += dbc[R + N + n] * st;
          }
          y[e] = acc * silu(zs[s][e]);
        }
        const auto o = linear(m + "out_proj", y, false);
        for (int d = 0; d < D; ++d) h[s][d] += o[d];
      }
    }
    std::vector<double> pooled(D, 0.0);
    int n_real = 0;
    for (int s = 0; s < L; ++s) {
      if (!(mask[s] > 0)) continue;
      ++n_real;
      const auto y = layer_norm("norm_f", h[s]);
      for (int d = 0; d < D; ++d) pooled[d] += y[d];
    }
    for (double& v : pooled) v /= std::max(n_real, 1);
    auto hid = linear("head1", pooled, true);
    for (double& v : hid) v = std::max(v, 0.0);
    return linear("head2", hid, true)[0];
  }
};

// ---- real programs

const std::vector<std::vector<TransformStep>>& real_programs() {
  static const std::vector<std::vector<TransformStep>> progs = [] {
    std::vector<std::vector<TransformStep>> out;
    ReadStats stats;
    const std::string dir = test::source_dir() + "/data/records/k80";
    for (const std::string& f : list_record_files(dir)) {
      int i = 0;
      read_record_file(f, [&](const MeasureRecord& r, const RecordOrigin&) {
        if (i++ % 50 == 0) out.push_back(r.steps);  // ~20 programs per file, all kinds of operators
      }, &stats);
    }
    return out;
  }();
  return progs;
}

/// Dense features [n, L, F] and mask [n, L] of programs (featurize_program's layout).
int featurize_all(const std::vector<std::vector<TransformStep>>& progs, int L, std::vector<float>* x,
                  std::vector<float>* mask) {
  const size_t row = static_cast<size_t>(L) * kStepFeatureDim;
  x->assign(progs.size() * row, 0.0f);
  mask->assign(progs.size() * static_cast<size_t>(L), 0.0f);
  for (size_t i = 0; i < progs.size(); ++i) {
    const int used = featurize_program(progs[i], L, x->data() + i * row);
    std::fill(mask->begin() + i * L, mask->begin() + i * L + used, 1.0f);
  }
  return L;
}

/// max |a - b| / max |b|.
double rel_diff(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::fabs(a[i] - b[i]));
    den = std::max(den, std::fabs(b[i]));
  }
  return num / den;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

/// The programs as Ansor record lines (one task, one measured cost each).
std::vector<std::string> as_record_lines(const std::vector<std::vector<TransformStep>>& progs) {
  std::vector<std::string> text;
  for (const auto& p : progs) {
    MeasureRecord r;
    r.workload_key = "[\"k\"]";
    r.target = "cuda";
    r.steps = p;
    r.costs = {1e-3};
    r.version = "v0.6";
    text.push_back(record_to_json(r));
  }
  return text;
}

using test::error_of;

// ---- (1) against the double-precision reference

TEST(InferEngine, MatchesDoublePrecisionReferenceOnRealRecords) {
  const auto& progs = real_programs();
  ASSERT_GT(progs.size(), 500u);
  // Default size; 2 layers, expand 2, d_state 16; and odd sizes (d_model 40, E 120, N 5, K 3, R 3, H 24)
  // whose padding columns and partial vectors the engine must keep out of the result.
  const MambaConfig configs[] = {config(), config(128, 2, 16, 4, 2), config(40, 2, 5, 3, 3, 3, 24),
                                 config(16, 1, 1, 1, 1, 1, 1)};
  // Every third program (~190): the double-precision reference is slow.
  std::vector<std::vector<TransformStep>> some;
  for (size_t i = 0; i < progs.size(); i += 3) some.push_back(progs[i]);
  for (const MambaConfig& cfg : configs) {
    const WeightsFile w = random_weights(cfg, 42);
    const CostModelEngine engine(w, "random");
    std::vector<float> x, mask;
    const int L = featurize_all(some, kDefaultMaxSteps, &x, &mask);
    std::vector<float> got(some.size());
    engine.predict(x.data(), mask.data(), static_cast<int64_t>(some.size()), L, got.data());
    std::vector<double> want(some.size());
    const Reference ref{cfg, &w};
    for (size_t i = 0; i < some.size(); ++i) {
      want[i] = ref.score(x.data() + i * L * kStepFeatureDim, mask.data() + i * L, L);
    }
    const double rd = rel_diff(got, want);
    std::printf("[ reference] %s: %zu programs, max rel diff %.3g\n", cfg.to_json().c_str(), some.size(), rd);
    EXPECT_LT(rd, 1e-5) << cfg.to_json();
  }
}

TEST(InferEngine, ProgramWithoutStepsScoresTheHeadOfZero) {
  const MambaConfig cfg = config();
  const WeightsFile w = random_weights(cfg, 3);
  const CostModelEngine engine(w, "random");
  std::vector<float> x(5 * kStepFeatureDim, std::nanf("")), mask(5, 0.0f);
  float got = 0;
  engine.predict(x.data(), mask.data(), 1, 5, &got);
  const double want = Reference{cfg, &w}.score(x.data(), mask.data(), 5);
  EXPECT_NEAR(got, want, 1e-5 * std::max(1.0, std::fabs(want)));
  EXPECT_EQ(engine.predict_programs({{}}), std::vector<float>{got});
  // L = 0 is allowed too.
  float got0 = 0;
  engine.predict(nullptr, nullptr, 1, 0, &got0);
  EXPECT_EQ(got0, got);
}

// ---- (2) padding and batching

TEST(InferEngine, PaddingDoesNotChangeTheScore) {
  const MambaConfig cfg = config(128, 2, 16, 4, 2);
  const CostModelEngine engine(random_weights(cfg, 5), "random");
  const auto& all = real_programs();
  const std::vector<std::vector<TransformStep>> progs(all.begin(), all.begin() + 40);
  int longest = 0;
  for (const auto& p : progs) longest = std::max(longest, static_cast<int>(p.size()));
  std::vector<float> x1, m1, x2, m2;
  featurize_all(progs, longest, &x1, &m1);
  featurize_all(progs, longest + 37, &x2, &m2);
  // Garbage, NaN and infinities in the padding rows of the wider batch.
  for (size_t i = 0; i < progs.size(); ++i) {
    for (int s = 0; s < longest + 37; ++s) {
      if (m2[i * (longest + 37) + s] > 0) continue;
      float* row = x2.data() + (i * (longest + 37) + s) * kStepFeatureDim;
      for (int f = 0; f < kStepFeatureDim; ++f) {
        row[f] = f % 3 == 0 ? std::nanf("") : f % 3 == 1 ? 1e30f : -std::numeric_limits<float>::infinity();
      }
    }
  }
  std::vector<float> s1(progs.size()), s2(progs.size());
  engine.predict(x1.data(), m1.data(), static_cast<int64_t>(progs.size()), longest, s1.data());
  engine.predict(x2.data(), m2.data(), static_cast<int64_t>(progs.size()), longest + 37, s2.data());
  // Padding is never computed: the scores are bitwise identical.
  EXPECT_TRUE(bitwise_equal(s1, s2));
  for (float s : s1) EXPECT_TRUE(std::isfinite(s));
}

TEST(InferEngine, PaddingBetweenRealStepsMatchesTheModel) {
  // The libtorch model zeroes padding rows and the scan runs over them; the engine must do the same
  // for a mask with holes (not produced by the featurizer, but allowed by the interface).
  const MambaConfig cfg = config(40, 1, 5, 3, 3, 3, 24);
  const WeightsFile w = random_weights(cfg, 6);
  const CostModelEngine engine(w, "random");
  const auto& prog = real_programs()[7];
  const int L = static_cast<int>(prog.size()) + 3;
  std::vector<float> x(static_cast<size_t>(L) * kStepFeatureDim), mask(L, 0.0f);
  const int used = featurize_program(prog, L, x.data());
  std::fill(mask.begin(), mask.begin() + used, 1.0f);
  mask[1] = 0.0f;
  mask[used / 2] = -1.0f;
  x[1 * kStepFeatureDim] = std::nanf("");
  float got = 0;
  engine.predict(x.data(), mask.data(), 1, L, &got);
  const double want = Reference{cfg, &w}.score(x.data(), mask.data(), L);
  EXPECT_NEAR(got, want, 1e-5 * std::max(1.0, std::fabs(want)));
}

TEST(InferEngine, ScoresDoNotDependOnBatchOrThreads) {
  const CostModelEngine base(random_weights(config(), 8), "random");
  const auto& progs = real_programs();
  CostModelEngine one = base;
  one.set_threads(1);
  const std::vector<float> serial = one.predict_programs(progs);
  for (int threads : {2, 3, 8}) {
    CostModelEngine e = base;
    e.set_threads(threads);
    EXPECT_TRUE(bitwise_equal(e.predict_programs(progs), serial)) << threads << " threads";
  }
  // Each program alone, and the batch in reverse order: every row is computed the same way whatever
  // shares its block, so the scores are bitwise identical.
  for (size_t i = 0; i < progs.size(); i += 37) {
    EXPECT_EQ(one.predict_programs({progs[i]})[0], serial[i]) << i;
  }
  std::vector<std::vector<TransformStep>> reversed(progs.rbegin(), progs.rend());
  std::vector<float> rev = base.predict_programs(reversed);
  std::reverse(rev.begin(), rev.end());
  EXPECT_TRUE(bitwise_equal(rev, serial));
}

/// Every program of one real record file (one operator's tuning log: the candidates share most of their
/// steps, as in a search round), plus programs built to share prefixes: each one's copy with one step
/// changed at position p (so exactly p steps are common), exact duplicates, and each one's first p steps.
std::vector<std::vector<TransformStep>> programs_with_shared_prefixes() {
  std::vector<std::vector<TransformStep>> out;
  const auto files = list_record_files(test::source_dir() + "/data/records/k80/matmul");
  ReadStats stats;
  read_record_file(files.at(0), [&](const MeasureRecord& r, const RecordOrigin&) {
    if (out.size() < 700) out.push_back(r.steps);
  }, &stats);
  const size_t n = out.size();
  for (size_t i = 0; i < n; i += 7) {
    const auto& base = out[i];
    if (base.size() < 4) continue;
    const size_t p = 1 + i % (base.size() - 2);
    auto changed = base;
    changed[p] = base[(p + 1) % base.size()];
    out.push_back(changed);
    out.push_back(base);
    out.push_back(std::vector<TransformStep>(base.begin(), base.begin() + p));
  }
  return out;
}

CostModelEngine::Options plain_options() {
  CostModelEngine::Options off;
  off.step_cache_bytes = 0;
  off.share_prefixes = false;
  return off;
}

TEST(InferEngine, StepCacheAndPrefixSharingAreExact) {
  auto progs = programs_with_shared_prefixes();
  progs.insert(progs.begin() + 100, std::vector<TransformStep>{});  // programs without steps, in the sorted call
  progs.push_back({});
  ASSERT_GT(progs.size(), 800u);  // over the 512 programs from which a call is sorted by prefix
  const std::vector<std::vector<TransformStep>> few(progs.begin(), progs.begin() + 300);  // unsorted call
  // Default; 2 layers with expand 2 and d_state 16 (states handed on per layer); odd sizes with the
  // generic scan (d_state 5) and d_conv 3 (the conv reads across the shared prefix).
  for (const MambaConfig& cfg : {config(), config(128, 2, 16, 4, 2), config(40, 2, 5, 3, 3, 3, 24)}) {
    CostModelEngine plain(random_weights(cfg, 13), "random");
    plain.set_options(plain_options());
    const std::vector<float> want = plain.predict_programs(progs), want_few = plain.predict_programs(few);
    for (float s : want) ASSERT_TRUE(std::isfinite(s));
    // Cache budgets: the default; ~300 entries (about one block's rows: emptied between blocks); 100
    // entries (fewer than a block's rows: off for most blocks); too small for one entry.
    auto padded = [](int v) { return static_cast<size_t>((v + 15) / 16 * 16); };
    const size_t entry = sizeof(float) * (kStepFeatureDim + padded(cfg.d_model) + 2 * padded(cfg.d_inner()));
    for (size_t cache : {CostModelEngine::Options{}.step_cache_bytes, 300 * entry, 100 * entry, entry - 1}) {
      for (bool share : {false, true}) {
        for (int threads : {1, 3}) {
          CostModelEngine e = plain;
          CostModelEngine::Options o;
          o.step_cache_bytes = cache;
          o.share_prefixes = share;
          e.set_options(o);
          e.set_threads(threads);
          const std::string what = cfg.to_json() + " cache " + std::to_string(cache) + " share " +
                                   std::to_string(share) + " threads " + std::to_string(threads);
          EXPECT_TRUE(bitwise_equal(e.predict_programs(progs), want)) << what;
          EXPECT_TRUE(bitwise_equal(e.predict_programs(few), want_few)) << what;
        }
      }
    }
    // The dense path, with padding rows between real steps (rows the scan sees and the pooling skips)
    // in some programs: at the first step, at step 2, and two at once; a hole in a shared prefix is
    // shared, a hole after it ends the sharing.
    std::vector<float> x, mask;
    const int L = featurize_all(progs, kDefaultMaxSteps, &x, &mask);
    for (size_t i = 0; i < progs.size(); i += 5) {
      if (progs[i].size() <= 4) continue;
      mask[i * L + (i % 3 == 0 ? 0 : 2)] = 0.0f;
      if (i % 7 == 0) mask[i * L + 3] = 0.0f;
    }
    const int64_t n = static_cast<int64_t>(progs.size());
    std::vector<float> dense_want(progs.size()), dense_got(progs.size());
    plain.predict(x.data(), mask.data(), n, L, dense_want.data());
    for (int threads : {1, 2}) {
      CostModelEngine fast(random_weights(cfg, 13), "random");
      fast.set_threads(threads);
      fast.predict(x.data(), mask.data(), n, L, dense_got.data());
      EXPECT_TRUE(bitwise_equal(dense_got, dense_want)) << cfg.to_json() << " threads " << threads;
    }
    // Against the double-precision reference too, for a few programs that shared a prefix.
    const WeightsFile w = random_weights(cfg, 13);
    const Reference ref{cfg, &w};
    for (size_t i = 700; i < progs.size(); i += 23) {
      const double r = ref.score(x.data() + i * L * kStepFeatureDim, mask.data() + i * L, L);
      EXPECT_NEAR(dense_got[i], r, 1e-5 * std::max(1.0, std::fabs(r))) << i;
    }
  }
}

TEST(InferEngine, ReuseCountersShowTheWorkSaved) {
  const auto progs = programs_with_shared_prefixes();
  CostModelEngine engine(random_weights(config(), 14), "random");
  CostModelEngine::ReuseCounters counters;
  CostModelEngine::Options o;
  o.counters = &counters;
  engine.set_options(o);
  engine.predict_programs(progs);
  int64_t steps = 0;
  for (const auto& p : progs) steps += std::min<int64_t>(static_cast<int64_t>(p.size()), kDefaultMaxSteps);
  EXPECT_EQ(counters.positions.load(), steps);
  // One operator's tuning log: most of a program's steps are another's prefix, and few rows are distinct.
  EXPECT_LT(counters.rows.load(), steps * 6 / 10) << counters.rows.load() << " of " << steps;
  EXPECT_LT(counters.layer0_rows.load(), counters.rows.load() / 10) << counters.layer0_rows.load();
  EXPECT_GT(counters.layer0_rows.load(), 0);
  // The plain engine computes every position, and every row through layer 0.
  CostModelEngine::ReuseCounters plain_counters;
  CostModelEngine::Options off = plain_options();
  off.counters = &plain_counters;
  engine.set_options(off);
  engine.predict_programs(progs);
  EXPECT_EQ(plain_counters.rows.load(), steps);
  EXPECT_EQ(plain_counters.layer0_rows.load(), steps);
}

TEST(InferEngine, PrefixSharingComparesPaddingFlags) {
  // Two programs whose step 2 has the same (zero) features, real in one and padding in the other: the
  // model computes the same row, but only the real one is pooled, so the second must not borrow it.
  const MambaConfig cfg = config();
  const CostModelEngine fast(random_weights(cfg, 15), "random");
  CostModelEngine plain = fast;
  plain.set_options(plain_options());
  const auto& prog = real_programs()[3];
  const int L = static_cast<int>(prog.size());
  ASSERT_GT(L, 4);
  std::vector<float> one(static_cast<size_t>(L) * kStepFeatureDim);
  featurize_program(prog, L, one.data());
  std::fill(one.begin() + 2 * kStepFeatureDim, one.begin() + 3 * kStepFeatureDim, 0.0f);
  std::vector<float> x, mask;
  for (int copy = 0; copy < 2; ++copy) {
    x.insert(x.end(), one.begin(), one.end());
    for (int t = 0; t < L; ++t) mask.push_back(copy == 1 && t == 2 ? 0.0f : 1.0f);
  }
  for (bool reversed : {false, true}) {
    std::vector<float> xs = x, ms = mask;
    if (reversed) {
      std::rotate(xs.begin(), xs.begin() + static_cast<int64_t>(one.size()), xs.end());
      std::rotate(ms.begin(), ms.begin() + L, ms.end());
    }
    float got[2], want[2];
    fast.predict(xs.data(), ms.data(), 2, L, got);
    plain.predict(xs.data(), ms.data(), 2, L, want);
    EXPECT_EQ(got[0], want[0]);
    EXPECT_EQ(got[1], want[1]);
    EXPECT_NE(want[0], want[1]);
  }
}

TEST(InferEngine, PrefixSharingHandlesProgramsLongerThanABlock) {
  // Programs of 300 rows (more than kBlockRows): one, its duplicate, its first 280 steps, and a copy
  // with step 290 changed, mixed with short ones; every row a real step of some real program.
  const auto& progs = real_programs();
  std::vector<float> rows;
  for (const auto& p : progs) {
    std::vector<float> f(p.size() * kStepFeatureDim);
    featurize_program(p, static_cast<int>(p.size()), f.data());
    rows.insert(rows.end(), f.begin(), f.end());
    if (rows.size() >= 400 * kStepFeatureDim) break;
  }
  const int L = 300;
  ASSERT_GT(L, CostModelEngine::kBlockRows);
  const size_t row = kStepFeatureDim, prog = static_cast<size_t>(L) * row;
  std::vector<float> x(8 * prog, 0.0f), mask(8 * static_cast<size_t>(L), 0.0f);
  auto set = [&](int i, int len, size_t offset) {
    std::copy(rows.begin() + offset * row, rows.begin() + (offset + len) * row, x.begin() + i * prog);
    std::fill(mask.begin() + i * L, mask.begin() + i * L + len, 1.0f);
  };
  set(0, 300, 0);
  set(1, 30, 7);
  set(2, 300, 0);
  set(3, 280, 0);
  set(4, 300, 0);
  size_t other = 300;  // a row that differs from row 290
  while (std::equal(rows.begin() + other * row, rows.begin() + (other + 1) * row, rows.begin() + 290 * row)) ++other;
  std::copy(rows.begin() + other * row, rows.begin() + (other + 1) * row, x.begin() + 4 * prog + 290 * row);
  set(5, 12, 100);
  set(6, 300, 0);
  mask[6 * L + 150] = 0.0f;  // a hole past the first block's worth of rows
  set(7, 256, 0);
  for (const MambaConfig& cfg : {config(), config(40, 2, 5, 3, 3, 3, 24)}) {
    const CostModelEngine fast(random_weights(cfg, 16), "random");
    CostModelEngine plain = fast;
    plain.set_options(plain_options());
    std::vector<float> got(8), want(8);
    fast.predict(x.data(), mask.data(), 8, L, got.data());
    plain.predict(x.data(), mask.data(), 8, L, want.data());
    EXPECT_TRUE(bitwise_equal(got, want)) << cfg.to_json();
    EXPECT_EQ(got[0], got[2]);
    EXPECT_NE(got[0], got[3]);
    EXPECT_NE(got[0], got[4]);
  }
}

TEST(InferEngine, SortedCallsReportUnreadableLinesAsThePlainPath) {
  // Record lines of a call large enough to be sorted (two passes over the lines), with bad lines in it.
  const auto progs = programs_with_shared_prefixes();
  std::vector<std::string> text = as_record_lines(progs);
  for (size_t i = 10; i < text.size(); i += 97) text[i] = i % 2 ? "{\"i\": not json" : "";
  const std::vector<std::string_view> lines(text.begin(), text.end());
  const CostModelEngine fast(random_weights(config(), 17), "random");
  CostModelEngine plain = fast;
  plain.set_options(plain_options());
  std::vector<std::string> e_fast, e_plain;
  const std::vector<float> s_fast = fast.predict_record_lines(lines, &e_fast);
  const std::vector<float> s_plain = plain.predict_record_lines(lines, &e_plain);
  EXPECT_EQ(e_fast, e_plain);
  ASSERT_EQ(s_fast.size(), s_plain.size());
  for (size_t i = 0; i < s_fast.size(); ++i) {
    if (std::isnan(s_plain[i])) {
      EXPECT_TRUE(std::isnan(s_fast[i])) << i;
      EXPECT_FALSE(e_fast[i].empty()) << i;
    } else {
      EXPECT_EQ(s_fast[i], s_plain[i]) << i;
    }
  }
}

TEST(InferEngine, MaxStepsTruncatesLikeTheFeaturizer) {
  CostModelEngine engine(random_weights(config(), 9), "random");
  const auto& progs = real_programs();
  engine.set_max_steps(6);
  std::vector<float> x, mask;
  featurize_all(progs, 6, &x, &mask);
  std::vector<float> dense(progs.size());
  engine.predict(x.data(), mask.data(), static_cast<int64_t>(progs.size()), 6, dense.data());
  EXPECT_TRUE(bitwise_equal(engine.predict_programs(progs), dense));
  EXPECT_THROW(engine.set_max_steps(0), Error);
  EXPECT_THROW(engine.set_threads(-1), Error);
}

// ---- (3) input paths

TEST(InferEngine, InputPathsAgree) {
  const CostModelEngine engine(random_weights(config(128, 2, 16, 4, 2), 10), "random");
  const auto& progs = real_programs();
  std::vector<float> x, mask;
  const int L = featurize_all(progs, kDefaultMaxSteps, &x, &mask);
  std::vector<float> dense(progs.size());
  engine.predict(x.data(), mask.data(), static_cast<int64_t>(progs.size()), L, dense.data());
  EXPECT_TRUE(bitwise_equal(engine.predict_programs(progs), dense));

  std::vector<float> views(progs.size());
  engine.predict_views(progs.size(), [&](size_t i, std::vector<StepView>* out) {
    for (const auto& s : progs[i]) out->push_back(view_of(s));
  }, views.data());
  EXPECT_TRUE(bitwise_equal(views, dense));

  // Record lines: the same programs written as records, plus a malformed and a blank line.
  std::vector<std::string> text = as_record_lines(progs);
  text.insert(text.begin() + 3, "{\"i\": not json");
  text.insert(text.begin() + 5, "");
  std::vector<std::string_view> lines(text.begin(), text.end());
  std::vector<std::string> errors;
  const std::vector<float> from_lines = engine.predict_record_lines(lines, &errors);
  ASSERT_EQ(from_lines.size(), lines.size());
  ASSERT_EQ(errors.size(), lines.size());
  EXPECT_TRUE(std::isnan(from_lines[3]));
  EXPECT_TRUE(std::isnan(from_lines[5]));
  EXPECT_FALSE(errors[3].empty());
  EXPECT_FALSE(errors[5].empty());
  std::vector<float> kept;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i == 3 || i == 5) continue;
    EXPECT_TRUE(errors[i].empty()) << i << ": " << errors[i];
    kept.push_back(from_lines[i]);
  }
  EXPECT_TRUE(bitwise_equal(kept, dense));
}

TEST(InferEngine, ReadsRealRecordFilesLineByLine) {
  const std::string file = test::source_dir() + "/data/records/k80/matmul/ansor_matmul_65536_2_1024.log.gz";
  LineReader reader(file);
  std::vector<std::string> text;
  std::string_view line;
  while (reader.next(&line) && text.size() < 500) text.emplace_back(line);
  std::vector<std::string_view> lines(text.begin(), text.end());
  const CostModelEngine engine(random_weights(config(), 11), "random");
  std::vector<std::string> errors;
  const auto scores = engine.predict_record_lines(lines, &errors);
  std::vector<std::vector<TransformStep>> progs;
  RecordParser parser;
  MeasureRecord r;
  for (const auto& l : lines) {
    ASSERT_EQ(parser.parse(l, &r), "");
    progs.push_back(r.steps);
  }
  EXPECT_TRUE(bitwise_equal(scores, engine.predict_programs(progs)));
  for (const auto& e : errors) EXPECT_EQ(e, "");
}

TEST(InferEngine, CallbacksMayPredictAndThrow) {
  CostModelEngine engine(random_weights(config(), 17), "random");
  engine.set_threads(1);  // the callback runs on the calling thread, which holds its scratch block
  const auto& progs = real_programs();
  const std::vector<float> want = engine.predict_programs(progs);
  std::vector<float> got(progs.size()), inner(progs.size());
  engine.predict_views(progs.size(), [&](size_t i, std::vector<StepView>* out) {
    inner[i] = engine.predict_programs({progs[i]})[0];  // a nested call on the same thread
    for (const auto& s : progs[i]) out->push_back(view_of(s));
  }, got.data());
  EXPECT_TRUE(bitwise_equal(got, want));
  EXPECT_TRUE(bitwise_equal(inner, want));
  // An exception thrown by the callback reaches the caller, from worker threads too.
  engine.set_threads(4);
  EXPECT_THROW(engine.predict_views(progs.size(), [&](size_t i, std::vector<StepView>* out) {
    if (i == progs.size() / 2) throw std::runtime_error("no steps for you");
    for (const auto& s : progs[i]) out->push_back(view_of(s));
  }, got.data()), std::runtime_error);
  EXPECT_TRUE(bitwise_equal(engine.predict_programs(progs), want));  // and the engine still works
}

// ---- (4) concurrency

TEST(InferEngine, ConcurrentPredictFromEightThreadsMatchesSerial) {
  CostModelEngine engine(random_weights(config(128, 2, 16, 4, 2), 12), "random");
  engine.set_threads(2);  // each call also fans out to its own workers
  std::vector<std::vector<TransformStep>> progs;
  for (size_t i = 0; i < real_programs().size(); i += 2) progs.push_back(real_programs()[i]);
  std::vector<float> x, mask;
  const int L = featurize_all(progs, kDefaultMaxSteps, &x, &mask);
  const int64_t n = static_cast<int64_t>(progs.size());
  std::vector<float> serial(progs.size());
  engine.predict(x.data(), mask.data(), n, L, serial.data());
  const std::vector<float> serial_steps = engine.predict_programs(progs);
  std::vector<std::vector<float>> got(8), got_steps(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 2; ++rep) {
        got[t].assign(progs.size(), 0.0f);
        engine.predict(x.data(), mask.data(), n, L, got[t].data());
        got_steps[t] = engine.predict_programs(progs);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) {
    EXPECT_TRUE(bitwise_equal(got[t], serial)) << "thread " << t;
    EXPECT_TRUE(bitwise_equal(got_steps[t], serial_steps)) << "thread " << t;
  }
}

// ---- (5) refusals

TEST(InferEngine, RefusesOtherModelsAndDamagedWeights) {
  const MambaConfig cfg = config();
  const WeightsFile good = random_weights(cfg, 13);
  EXPECT_NO_THROW(CostModelEngine(good, "good.tclm"));

  auto refuse = [&](WeightsFile w, const std::string& expect) {
    const std::string msg = error_of([&] { CostModelEngine e(w, "bad.tclm"); });
    EXPECT_NE(msg.find("bad.tclm"), std::string::npos) << msg;
    EXPECT_NE(msg.find(expect), std::string::npos) << msg;
  };
  WeightsFile w = good;
  w.model_kind = "xgboost";
  refuse(w, "model kind");
  w = good;
  w.feature_version = kFeatureVersion + 1;
  refuse(w, "Ansor step encoding v" + std::to_string(kFeatureVersion + 1));
  w = good;
  w.feature_version = kFeatureVersion - 1;
  refuse(w, "feature encoding");
  MambaConfig other = cfg;
  other.n_features = 53;
  w = random_weights(other, 13);
  refuse(w, "53 features");
  w = good;
  w.config_json = "{\"d_model\": 3}";
  refuse(w, "missing field");
  w = good;
  w.tensors.erase(w.tensors.begin() + 5);
  refuse(w, "missing tensor \"" + good.tensors[5].name + "\"");
  w = good;
  w.tensors[2].shape = {w.tensors[2].shape[0] + 1};
  w.tensors[2].data.push_back(0.0f);
  refuse(w, "shape");
  w = good;
  w.tensors[0].data.pop_back();
  refuse(w, "values");
  w = good;
  w.tensors.push_back(good.tensors[1]);
  refuse(w, "twice");
  w = good;
  w.tensors.push_back(NamedTensor{"mixers.1.D", {128}, std::vector<float>(128, 1.0f)});
  refuse(w, "unknown tensor");
  // A weights file for another config (2 layers) with the tensors of 1 layer.
  w = good;
  w.config_json = config(128, 2).to_json();
  refuse(w, "missing tensor \"norms.1.weight\"");
}

TEST(InferEngine, LoadRefusesCorruptFilesNamingThem) {
  test::TempDir dir;
  const std::string path = dir.file("model.tclm");
  save_weights(random_weights(config(), 14), path);
  const CostModelEngine loaded = CostModelEngine::load(path);
  EXPECT_EQ(loaded.config().d_model, 128);

  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::string flipped = bytes;
  flipped[flipped.size() / 2] ^= 0x10;  // a weight byte: only the checksum notices
  test::write_text(dir.file("flipped.tclm"), flipped);
  std::string msg = error_of([&] { CostModelEngine::load(dir.file("flipped.tclm")); });
  EXPECT_NE(msg.find("flipped.tclm"), std::string::npos) << msg;
  test::write_text(dir.file("short.tclm"), bytes.substr(0, bytes.size() / 3));
  msg = error_of([&] { CostModelEngine::load(dir.file("short.tclm")); });
  EXPECT_NE(msg.find("short.tclm"), std::string::npos) << msg;
  msg = error_of([&] { CostModelEngine::load(dir.file("missing.tclm")); });
  EXPECT_NE(msg.find("missing.tclm"), std::string::npos) << msg;
  // Another feature version, through the file.
  WeightsFile old = random_weights(config(), 14);
  old.feature_version = 1;
  save_weights(old, dir.file("v1.tclm"));
  msg = error_of([&] { CostModelEngine::load(dir.file("v1.tclm")); });
  EXPECT_NE(msg.find("v1.tclm"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Ansor step encoding v1"), std::string::npos) << msg;
}

TEST(InferEngine, RejectsBadArguments) {
  const CostModelEngine engine(random_weights(config(), 15), "random");
  float s = 0;
  EXPECT_THROW(engine.predict(nullptr, nullptr, -1, 4, &s), Error);
  EXPECT_THROW(engine.predict(nullptr, nullptr, 1, 4, &s), Error);
  EXPECT_NO_THROW(engine.predict(nullptr, nullptr, 0, 4, nullptr));
  EXPECT_TRUE(engine.predict_programs(std::vector<std::vector<TransformStep>>{}).empty());
}

TEST(InferEngine, FlopCountIsDominatedByTheLinearLayers) {
  const CostModelEngine engine(random_weights(config(), 16), "random");
  // Default model: per step 2(55*128 + 128*256 + 128*24 + 8*128 + 128*128) = 121,856 multiply-add FLOPs.
  const double linear_per_step = 2.0 * (55 * 128 + 128 * 256 + 128 * 24 + 8 * 128 + 128 * 128);
  const double per_step = engine.flops_per_program(11) - engine.flops_per_program(10);
  EXPECT_GT(per_step, linear_per_step);
  EXPECT_LT(per_step, 1.15 * linear_per_step);
  EXPECT_GT(engine.flops_per_program(0), 2.0 * 128 * 128);  // the head
}


// Numerics (docs/reliability.md): a model holding NaN/inf is refused when loaded, naming the tensor;
// NaN/inf in a real step's features is refused naming the program, step and slot; padding may hold
// anything (PaddingDoesNotChangeTheScore).
TEST(InferEngine, RefusesNonFiniteParameters) {
  for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity()}) {
    WeightsFile w = random_weights(config(), 21);
    w.tensors[3].data[5] = bad;
    try {
      CostModelEngine engine(w, "diverged.tclm");
      FAIL() << "a model holding " << bad << " was accepted";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("diverged.tclm: tensor \"" + w.tensors[3].name + "\" holds"), std::string::npos) << msg;
      EXPECT_NE(msg.find("at index 5"), std::string::npos) << msg;
    }
  }
}

TEST(InferEngine, RefusesNonFiniteFeaturesOfRealSteps) {
  const CostModelEngine engine(random_weights(config(), 22), "random");
  const int L = 4;
  std::vector<float> x(2 * L * kStepFeatureDim, 0.5f), mask(2 * L, 1.0f);
  mask[1 * L + 3] = 0.0f;
  x[(1 * L + 3) * kStepFeatureDim + 7] = std::nanf("");  // padding: ignored
  float scores[2];
  EXPECT_NO_THROW(engine.predict(x.data(), mask.data(), 2, L, scores));
  x[(1 * L + 2) * kStepFeatureDim + 9] = -std::numeric_limits<float>::infinity();  // a real step
  try {
    engine.predict(x.data(), mask.data(), 2, L, scores);
    FAIL() << "an infinite feature of a real step was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("feature 9 of step 2 of program 1 is -inf"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tclm
