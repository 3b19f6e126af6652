// tests/torch/mamba_test.cpp: the Mamba cost model (src/model/mamba.h).
//
// Sections: (1-2) the fused selective scan against the tensor-op reference, forward and all six gradients,
// and the same for the fused causal conv + SiLU; (3) padding invariance; (4) parameter count and size;
// (5) initialisation and optimizer groups; (6) weights export/import; (7) config JSON; (8) the model can
// fit a small synthetic problem.
//
// Tolerances. The references run in float64, so a difference measures only the float32 kernel: each
// output is a short recurrence (L <= 9 steps) and sums of at most a few hundred float32 terms, each
// rounding at ~6e-8 relative, plus a vector exp accurate to ~1 ulp; the expected error is ~1e-6 of the
// output's scale or less (measured: <= 1e-7 forward, <= 6e-7 gradients, also at B=64, L=72, E=128). The
// bounds (1e-5 forward, 1e-4 gradients, relative to the largest reference value) leave a 10-100x margin
// and still catch any wrong or missing term, which is O(1) relative.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "model/mamba.h"
#include "tclm/error.h"
#include "tclm/model_schema.h"

namespace tclm {
namespace {

struct ScanInputs {
  torch::Tensor u, delta, A, Bm, C, D;
  std::vector<torch::Tensor> all() const { return {u, delta, A, Bm, C, D}; }
};

/// Realistic scan inputs: delta = softplus(.) > 0 (about 0.05..2), A = -exp(A_log) < 0 around -(1..N).
ScanInputs random_scan_inputs(int64_t B, int64_t L, int64_t E, int64_t N, uint64_t seed) {
  torch::manual_seed(seed);
  ScanInputs in;
  in.u = torch::randn({B, L, E});
  in.delta = torch::softplus(torch::randn({B, L, E}) - 1.0);
  in.A = -torch::exp(torch::log(torch::arange(1, N + 1, torch::kFloat32)).repeat({E, 1}) +
                     0.5 * torch::randn({E, N}));
  in.Bm = torch::randn({B, L, N});
  in.C = torch::randn({B, L, N});
  in.D = torch::randn({E});
  return in;
}

/// max |a - ref| / max |ref|: the error relative to the reference's scale.
double rel_err(const torch::Tensor& a, const torch::Tensor& ref) {
  const torch::Tensor r = ref.to(torch::kFloat64);
  const double scale = std::max(r.abs().max().item<double>(), 1e-30);
  return (a.to(torch::kFloat64) - r).abs().max().item<double>() / scale;
}

/// The gradients of sum(y * gy) with respect to the six inputs, through `scan`, in `dtype`.
template <typename Scan>
std::vector<torch::Tensor> scan_grads(Scan scan, const ScanInputs& in, const torch::Tensor& gy,
                                      torch::ScalarType dtype) {
  std::vector<torch::Tensor> leaves;
  for (const torch::Tensor& t : in.all()) leaves.push_back(t.to(dtype).detach().requires_grad_(true));
  const torch::Tensor y = scan(leaves[0], leaves[1], leaves[2], leaves[3], leaves[4], leaves[5]);
  (y * gy.to(dtype)).sum().backward();
  std::vector<torch::Tensor> grads;
  for (const torch::Tensor& t : leaves) grads.push_back(t.grad());
  return grads;
}

const char* const kInputNames[] = {"u", "delta", "A", "B", "C", "D"};

// (B, L, E, N): a small case (E below one 8-channel vector: only the zero-padded tail path), and a case
// with several batch chunks (16 programs each), a full channel block plus a tail, and N = 8.
const int64_t kScanShapes[][4] = {{3, 7, 5, 4}, {37, 9, 13, 8}};

// ---- (1) forward

TEST(SelectiveScan, ForwardMatchesReference) {
  for (const auto& s : kScanShapes) {
    const ScanInputs in = random_scan_inputs(s[0], s[1], s[2], s[3], 1);
    const torch::Tensor y = selective_scan(in.u, in.delta, in.A, in.Bm, in.C, in.D);
    std::vector<torch::Tensor> d;
    for (const torch::Tensor& t : in.all()) d.push_back(t.to(torch::kFloat64));
    const torch::Tensor y_ref = selective_scan_reference(d[0], d[1], d[2], d[3], d[4], d[5]);
    ASSERT_EQ(y.sizes(), y_ref.sizes());
    EXPECT_LT(rel_err(y, y_ref), 1e-5) << "B,L,E,N = " << s[0] << "," << s[1] << "," << s[2] << "," << s[3];
    // The float32 reference agrees too (both sides float32: same 1e-5 budget).
    const torch::Tensor y_ref32 = selective_scan_reference(in.u, in.delta, in.A, in.Bm, in.C, in.D);
    EXPECT_LT(rel_err(y, y_ref32), 1e-5);
  }
}

TEST(SelectiveScan, AcceptsNonContiguousInputs) {
  const ScanInputs in = random_scan_inputs(2, 5, 6, 3, 2);
  const torch::Tensor u_t = in.u.transpose(1, 2).contiguous().transpose(1, 2);  // same values, strided
  ASSERT_FALSE(u_t.is_contiguous());
  const torch::Tensor y1 = selective_scan(in.u, in.delta, in.A, in.Bm, in.C, in.D);
  const torch::Tensor y2 = selective_scan(u_t, in.delta, in.A, in.Bm, in.C, in.D);
  EXPECT_TRUE(torch::equal(y1, y2));
}

// ---- (2) backward

TEST(SelectiveScan, GradientsMatchReferenceAutograd) {
  for (const auto& s : kScanShapes) {
    const ScanInputs in = random_scan_inputs(s[0], s[1], s[2], s[3], 3);
    const torch::Tensor gy = torch::randn({s[0], s[1], s[2]});  // random upstream gradient
    const auto fused = scan_grads(selective_scan, in, gy, torch::kFloat32);
    const auto ref = scan_grads(selective_scan_reference, in, gy, torch::kFloat64);
    for (size_t i = 0; i < fused.size(); ++i) {
      ASSERT_TRUE(fused[i].defined()) << kInputNames[i];
      ASSERT_EQ(fused[i].sizes(), ref[i].sizes()) << kInputNames[i];
      EXPECT_LT(rel_err(fused[i], ref[i]), 1e-4)
          << "d" << kInputNames[i] << " B,L,E,N = " << s[0] << "," << s[1] << "," << s[2] << "," << s[3];
    }
  }
}

TEST(SelectiveScan, GradientsDoNotDependOnThreadCount) {
  // The batch reductions (dA, dD) use fixed chunks summed in order: bitwise identical for 1 or 2 threads.
  const ScanInputs in = random_scan_inputs(40, 6, 16, 8, 4);
  const torch::Tensor gy = torch::randn({40, 6, 16});
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const auto one = scan_grads(selective_scan, in, gy, torch::kFloat32);
  at::set_num_threads(2);
  const auto two = scan_grads(selective_scan, in, gy, torch::kFloat32);
  at::set_num_threads(threads);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(torch::equal(one[i], two[i])) << kInputNames[i];
}

// ---- the fused causal conv1d + SiLU (the mixer's conv stage), same tolerances as the scan

TEST(CausalConv1dSilu, ForwardAndGradientsMatchTorchConv1d) {
  // (B, L, E, K): the default K = 4 with a full channel block plus a tail and several batch chunks, and
  // K > L (every output sees the zero history).
  const int64_t shapes[][4] = {{37, 9, 13, 4}, {3, 3, 5, 6}};
  for (const auto& s : shapes) {
    const int64_t B = s[0], L = s[1], E = s[2], K = s[3];
    torch::manual_seed(11);
    // x is the first half of a wider tensor, as in the mixer (in_proj's output split into x and z).
    const torch::Tensor xz = torch::randn({B, L, 2 * E});
    const torch::Tensor x = xz.narrow(2, 0, E);
    const torch::Tensor w = torch::randn({E, 1, K}) * 0.5, bias = torch::randn({E});
    const torch::Tensor gy = torch::randn({B, L, E});
    std::vector<torch::Tensor> f{x.detach().requires_grad_(true), w.detach().requires_grad_(true),
                                 bias.detach().requires_grad_(true)};
    std::vector<torch::Tensor> r;
    for (const torch::Tensor& t : {x, w, bias}) r.push_back(t.to(torch::kFloat64).requires_grad_(true));
    const torch::Tensor y = causal_conv1d_silu(f[0], f[1], f[2]);
    const torch::Tensor y_ref = causal_conv1d_silu_reference(r[0], r[1], r[2]);
    ASSERT_EQ(y.sizes(), y_ref.sizes());
    EXPECT_LT(rel_err(y, y_ref), 1e-5) << "B,L,E,K = " << B << "," << L << "," << E << "," << K;
    (y * gy).sum().backward();
    (y_ref * gy.to(torch::kFloat64)).sum().backward();
    const char* names[] = {"x", "weight", "bias"};
    for (int i = 0; i < 3; ++i) {
      EXPECT_LT(rel_err(f[i].grad(), r[i].grad()), 1e-4) << "d" << names[i] << " K = " << K;
    }
  }
}

TEST(CausalConv1dSilu, MatchesTheConv1dModule) {
  // The mixer's conv1d module (padding K-1, first L outputs kept) is what the fused kernel replaces.
  torch::manual_seed(12);
  const int64_t B = 4, L = 10, E = 16, K = 4;
  torch::nn::Conv1d conv(torch::nn::Conv1dOptions(E, E, K).groups(E).padding(K - 1));
  const torch::Tensor x = torch::randn({B, L, E});
  const torch::Tensor y_module =
      torch::silu(conv(x.transpose(1, 2)).narrow(2, 0, L).transpose(1, 2));
  EXPECT_LT(rel_err(causal_conv1d_silu(x, conv->weight, conv->bias), y_module), 1e-5);
}

// ---- model helpers

MambaConfig default_config() {
  MambaConfig cfg;
  cfg.n_features = 55;  // n_features=55, d_model=128, n_layers=1, d_state=8, d_conv=4, expand=1
  return cfg;
}

MambaCostModel make_model(const MambaConfig& cfg, uint64_t seed) {
  torch::manual_seed(seed);
  MambaCostModel model(cfg);
  init_mamba_weights(model);
  return model;
}

torch::Tensor scores(MambaCostModel& model, const torch::Tensor& x, const torch::Tensor& mask) {
  torch::NoGradGuard no_grad;
  model->eval();
  return model->forward(x, mask);
}

// ---- the mixer wiring: fused CPU path (float32) against the tensor-op path (taken for float64)

TEST(MambaCostModel, FusedPathMatchesReferencePath) {
  MambaConfig cfg = default_config();
  cfg.n_layers = 2;
  MambaCostModel fused = make_model(cfg, 13), ref = make_model(cfg, 13);
  ref->to(torch::kFloat64);
  const torch::Tensor x = torch::randn({6, 11, cfg.n_features});
  torch::Tensor mask = torch::ones({6, 11});
  mask.narrow(1, 7, 4).select(0, 2).zero_();
  const torch::Tensor target = torch::randn({6});
  fused->train();
  ref->train();
  const torch::Tensor s_fused = fused->forward(x, mask);
  const torch::Tensor s_ref = ref->forward(x.to(torch::kFloat64), mask.to(torch::kFloat64));
  // Whole model in float32 vs float64: same budget as the kernels (LayerNorm and the matmuls add
  // float32 rounding of the same order).
  EXPECT_LT(rel_err(s_fused, s_ref), 1e-5);
  torch::mse_loss(s_fused, target).backward();
  torch::mse_loss(s_ref, target.to(torch::kFloat64)).backward();
  const auto ref_params = ref->named_parameters();
  for (const auto& p : fused->named_parameters()) {
    EXPECT_LT(rel_err(p.value().grad(), ref_params[p.key()].grad()), 1e-4) << p.key();
  }
}

// ---- (3) padding invariance

TEST(MambaCostModel, PaddingDoesNotChangeTheScore) {
  const MambaConfig cfg = default_config();
  MambaCostModel model = make_model(cfg, 5);
  const int64_t F = cfg.n_features;
  const int64_t lengths[] = {6, 10};  // the second program fills the short batch entirely
  const torch::Tensor prog0 = torch::randn({lengths[0], F}), prog1 = torch::randn({lengths[1], F});
  auto batch = [&](int64_t L) {
    torch::Tensor x = 10.0 * torch::randn({2, L, F});  // garbage everywhere; real rows overwritten
    torch::Tensor mask = torch::zeros({2, L});
    x[0].narrow(0, 0, lengths[0]).copy_(prog0);
    x[1].narrow(0, 0, lengths[1]).copy_(prog1);
    mask[0].narrow(0, 0, lengths[0]).fill_(1.0f);
    mask[1].narrow(0, 0, lengths[1]).fill_(1.0f);
    return std::make_pair(x, mask);
  };
  const auto [x10, m10] = batch(10);
  const auto [x20, m20] = batch(20);
  const torch::Tensor s10 = scores(model, x10, m10), s20 = scores(model, x20, m20);
  ASSERT_EQ(s10.sizes(), torch::IntArrayRef({2}));
  // Real steps see identical inputs; only the pooled sum's extra zero terms and BLAS blocking over a
  // different row count can differ (~1e-7 on O(1) scores), hence 1e-5.
  EXPECT_LT((s10 - s20).abs().max().item<float>(), 1e-5f) << s10 << s20;
  // NaN garbage in padding rows is harmless too.
  torch::Tensor x_nan = x20.clone();
  x_nan[0].narrow(0, lengths[0], 20 - lengths[0]).fill_(std::nanf(""));
  EXPECT_LT((scores(model, x_nan, m20) - s20).abs().max().item<float>(), 1e-5f);
}

// ---- (4) size

TEST(MambaCostModel, DefaultParameterCountAndSize) {
  const MambaConfig cfg = default_config();
  MambaCostModel model(cfg);
  const int64_t F = 55, D = 128, R = 8, N = 8, H = 128;  // dt_rank = ceil(128/16) = 8, head_hidden = d_model
  ASSERT_EQ(cfg.resolved_dt_rank(), R);
  ASSERT_EQ(cfg.resolved_head_hidden(), H);
  // reference-notes §3.6, expand 1: 3D^2 + 2RD + 3ND + 7D = 49152 + 2048 + 3072 + 896 = 55168.
  const int64_t mixer = 3 * D * D + 2 * R * D + 3 * N * D + 7 * D;
  ASSERT_EQ(mixer, 55168);
  const int64_t embed = F * D + D;           // 7040 + 128 = 7168
  const int64_t norms = 2 * D + 2 * D;       // one pre-norm + norm_f, weight and bias: 512
  const int64_t head = D * H + H + H + 1;    // 16384 + 128 + 128 + 1 = 16641
  const int64_t expected = embed + mixer + norms + head;  // 7168 + 55168 + 512 + 16641 = 79489
  ASSERT_EQ(expected, 79489);
  int64_t count = 0, mixer_count = 0;
  for (const auto& p : model->named_parameters()) {
    count += p.value().numel();
    if (p.key().rfind("mixers.0.", 0) == 0) mixer_count += p.value().numel();
  }
  EXPECT_EQ(mixer_count, mixer);
  EXPECT_EQ(count, expected);
  const double megabytes = count * sizeof(float) / 1e6;  // 317,956 bytes = 0.318 MB
  EXPECT_GT(megabytes, 0.25);
  EXPECT_LT(megabytes, 0.45);
}

// ---- (5) initialisation and optimizer groups

TEST(MambaCostModel, OfficialInitialisation) {
  MambaConfig cfg = default_config();
  cfg.n_layers = 2;
  MambaCostModel model = make_model(cfg, 6);
  const auto params = model->named_parameters();
  const int64_t E = cfg.d_inner(), N = cfg.d_state, R = cfg.resolved_dt_rank();
  for (int layer = 0; layer < cfg.n_layers; ++layer) {
    const std::string prefix = "mixers." + std::to_string(layer) + ".";
    const torch::Tensor A_log = params[prefix + "A_log"];
    const torch::Tensor log_n = torch::log(torch::arange(1, N + 1, torch::kFloat64));
    ASSERT_EQ(A_log.sizes(), torch::IntArrayRef({E, N}));
    // Exact up to float32 rounding of log(n) (half an ulp of values <= log 8: < 2.4e-7).
    EXPECT_LT((A_log.to(torch::kFloat64) - log_n).abs().max().item<double>(), 1e-6);
    EXPECT_TRUE(torch::equal(params[prefix + "D"], torch::ones({E})));
    const torch::Tensor dt = torch::softplus(params[prefix + "dt_proj.bias"].to(torch::kFloat64));
    // softplus(softplus^-1(dt)) round-trips through a float32 bias: relative error ~1e-6.
    EXPECT_GE(dt.min().item<double>(), 1e-4 * (1 - 1e-5));
    EXPECT_LE(dt.max().item<double>(), 0.1 * (1 + 1e-5));
    EXPECT_GT(dt.max().item<double>(), 5 * dt.min().item<double>());  // log-uniform spread, not constant
    const double s = 1.0 / std::sqrt(static_cast<double>(R));
    EXPECT_LE(params[prefix + "dt_proj.weight"].abs().max().item<double>(), s);
    // kaiming-uniform(a = sqrt 5) bound is 1/sqrt(fan_in), divided by sqrt(n_layers).
    const double out_bound = 1.0 / std::sqrt(static_cast<double>(E)) / std::sqrt(2.0);
    const torch::Tensor w_out = params[prefix + "out_proj.weight"];
    EXPECT_LE(w_out.abs().max().item<double>(), out_bound * (1 + 1e-6));
    EXPECT_GT(w_out.abs().max().item<double>(), 0.9 * out_bound);
  }
  for (const char* bias : {"embed.bias", "head1.bias", "head2.bias"}) {
    EXPECT_EQ(params[bias].abs().max().item<float>(), 0.0f) << bias;
  }
  // Deterministic given the seed.
  MambaCostModel again = make_model(cfg, 6);
  for (const auto& p : again->named_parameters()) EXPECT_TRUE(torch::equal(p.value(), params[p.key()]));
}

TEST(MambaCostModel, DecayGroupsPartitionTheParameters) {
  MambaCostModel model(default_config());
  const auto no_decay = model->no_decay_parameters(), decay = model->decay_parameters();
  std::map<const void*, int> seen;
  for (const auto& t : no_decay) seen[t.unsafeGetTensorImpl()]++;
  for (const auto& t : decay) seen[t.unsafeGetTensorImpl()]++;
  const auto params = model->named_parameters();
  EXPECT_EQ(seen.size(), params.size());
  for (const auto& p : params) EXPECT_EQ(seen[p.value().unsafeGetTensorImpl()], 1) << p.key();
  std::set<const void*> nd;
  for (const auto& t : no_decay) nd.insert(t.unsafeGetTensorImpl());
  // embed.bias, norms.0.{weight,bias}, conv1d.bias, dt_proj.bias, A_log, D, norm_f.{weight,bias},
  // head1.bias, head2.bias.
  EXPECT_EQ(no_decay.size(), 11u);
  for (const char* name : {"mixers.0.A_log", "mixers.0.D", "norms.0.weight", "norm_f.bias",
                           "mixers.0.dt_proj.bias", "mixers.0.conv1d.bias", "head2.bias"}) {
    EXPECT_EQ(nd.count(params[name].unsafeGetTensorImpl()), 1u) << name;
  }
  for (const char* name : {"embed.weight", "mixers.0.in_proj.weight", "mixers.0.dt_proj.weight",
                           "mixers.0.out_proj.weight", "head1.weight"}) {
    EXPECT_EQ(nd.count(params[name].unsafeGetTensorImpl()), 0u) << name;
  }
}

// ---- (6) weights export / import

// The libtorch model's parameters are the schema's tensors (tclm/model_schema.h), in the same order, with
// the same shapes, and an exported weights file holds exactly them: the inference engine reads files
// by the schema. Two layers and sizes that all differ, so that a layer index or a dimension cannot
// be confused.
TEST(MambaCostModel, ParametersAreTheSchemasTensors) {
  MambaConfig cfg;
  cfg.n_features = 7;
  cfg.d_model = 24;
  cfg.n_layers = 2;
  cfg.d_state = 5;
  cfg.d_conv = 3;
  cfg.expand = 2;
  cfg.dt_rank = 3;
  cfg.head_hidden = 9;
  MambaCostModel model = make_model(cfg, 21);
  const auto params = model->named_parameters(/*recurse=*/true);
  const auto schema = mamba_schema::mamba_tensors(cfg);
  ASSERT_EQ(params.size(), schema.size());
  for (size_t i = 0; i < schema.size(); ++i) {
    EXPECT_EQ(params[i].key(), schema[i].name) << i;
    EXPECT_EQ(params[i].value().sizes().vec(), schema[i].shape) << schema[i].name;
  }
  WeightsFile w;
  export_to_weights(model, &w);
  ASSERT_EQ(w.tensors.size(), schema.size());
  for (size_t i = 0; i < schema.size(); ++i) {
    EXPECT_EQ(w.tensors[i].name, schema[i].name) << i;
    EXPECT_EQ(w.tensors[i].shape, schema[i].shape) << schema[i].name;
  }
  // The LayerNorms use the schema's epsilon.
  for (const auto& m : model->modules(/*include_self=*/false)) {
    if (auto* ln = dynamic_cast<torch::nn::LayerNormImpl*>(m.get())) {
      EXPECT_EQ(ln->options.eps(), mamba_schema::kLayerNormEps);
    }
  }
}


TEST(MambaCostModel, WeightsRoundTripAndErrors) {
  const MambaConfig cfg = default_config();
  MambaCostModel a = make_model(cfg, 7), b = make_model(cfg, 8);
  const torch::Tensor x = torch::randn({4, 12, cfg.n_features}), mask = torch::ones({4, 12});
  WeightsFile w;
  export_to_weights(a, &w);
  EXPECT_EQ(w.model_kind, "mamba");
  EXPECT_EQ(w.config_json, cfg.to_json());
  EXPECT_EQ(w.tensors.size(), a->named_parameters().size());
  EXPECT_EQ(w.tensors[0].name, "embed.weight");
  const torch::Tensor s_a = scores(a, x, mask), s_b_before = scores(b, x, mask);
  ASSERT_FALSE(torch::equal(s_a, s_b_before));
  // A model rebuilt from the stored config, then loaded, scores identically (bitwise).
  MambaCostModel c(MambaConfig::from_json(w.config_json));
  load_into_model(w, b);
  load_into_model(w, c);
  EXPECT_TRUE(torch::equal(scores(b, x, mask), s_a));
  EXPECT_TRUE(torch::equal(scores(c, x, mask), s_a));
  // Through the file format's bytes as well.
  const WeightsFile parsed = parse_weights(serialize_weights(w), "round trip");
  ASSERT_NE(parsed.find("mixers.0.A_log"), nullptr);
  EXPECT_EQ(parsed.find("mixers.0.A_log")->shape, (std::vector<int64_t>{128, 8}));
  MambaCostModel e(MambaConfig::from_json(parsed.config_json));
  load_into_model(parsed, e);
  EXPECT_TRUE(torch::equal(scores(e, x, mask), s_a));

  MambaConfig other = cfg;
  other.n_features = 20;  // embed.weight [128, 20] vs [128, 55]
  MambaCostModel d = make_model(other, 9);
  const torch::Tensor x20 = torch::randn({4, 12, 20});
  const torch::Tensor s_d = scores(d, x20, mask);
  EXPECT_THROW(load_into_model(w, d), Error);
  EXPECT_TRUE(torch::equal(scores(d, x20, mask), s_d));  // a failed load leaves the model unchanged

  WeightsFile missing = w;
  missing.tensors.erase(missing.tensors.begin() + 3);
  EXPECT_THROW(load_into_model(missing, b), Error);
  WeightsFile extra = w;
  extra.tensors.push_back(NamedTensor{"mixers.1.D", {128}, std::vector<float>(128, 1.0f)});
  EXPECT_THROW(load_into_model(extra, b), Error);
  WeightsFile wrong_kind = w;
  wrong_kind.model_kind = "mlp";
  EXPECT_THROW(load_into_model(wrong_kind, b), Error);
  WeightsFile short_data = w;
  short_data.tensors[0].data.pop_back();
  EXPECT_THROW(load_into_model(short_data, b), Error);
}

// ---- (7) config JSON

TEST(MambaConfig, JsonRoundTrip) {
  MambaConfig cfg;
  cfg.n_features = 55;
  cfg.d_model = 96;
  cfg.n_layers = 2;
  cfg.d_state = 16;
  cfg.d_conv = 6;
  cfg.expand = 2;
  cfg.dt_rank = 5;
  cfg.head_hidden = 64;
  cfg.dropout = 0.1f;
  const MambaConfig back = MambaConfig::from_json(cfg.to_json());
  EXPECT_EQ(back.n_features, cfg.n_features);
  EXPECT_EQ(back.d_model, cfg.d_model);
  EXPECT_EQ(back.n_layers, cfg.n_layers);
  EXPECT_EQ(back.d_state, cfg.d_state);
  EXPECT_EQ(back.d_conv, cfg.d_conv);
  EXPECT_EQ(back.expand, cfg.expand);
  EXPECT_EQ(back.dt_rank, cfg.dt_rank);
  EXPECT_EQ(back.head_hidden, cfg.head_hidden);
  EXPECT_EQ(back.dropout, cfg.dropout);  // shortest round-trip float text: exact
  EXPECT_EQ(back.to_json(), cfg.to_json());
}

TEST(MambaConfig, JsonErrorsNameTheProblem) {
  const std::string good = default_config().to_json();
  auto message = [](const std::string& json) -> std::string {
    try {
      MambaConfig::from_json(json);
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const size_t pos = s.find(from);
    EXPECT_NE(pos, std::string::npos) << from;
    return s.replace(pos, from.size(), to);
  };
  EXPECT_NE(message(replace("\"d_state\":8,", "")).find("missing field \"d_state\""), std::string::npos);
  EXPECT_NE(message(replace("\"d_model\":128", "\"d_model\":12.5")).find("d_model"), std::string::npos);
  EXPECT_NE(message(replace("\"d_model\":128", "\"d_model\":\"128\"")).find("d_model"), std::string::npos);
  EXPECT_NE(message(replace("\"d_model\":128", "\"d_model\":-1")).find("d_model"), std::string::npos);
  EXPECT_NE(message(replace("\"dropout\":0", "\"dropout\":1.5")).find("dropout"), std::string::npos);
  EXPECT_NE(message(replace("\"expand\":1", "\"expand\":1,\"bogus\":2")).find("unknown field \"bogus\""),
            std::string::npos);
  EXPECT_NE(message(replace("\"expand\":1", "\"expand\":1,\"expand\":2")).find("twice"), std::string::npos);
  EXPECT_NE(message("{\"n_features\":").find("not valid JSON"), std::string::npos);
  EXPECT_NE(message("[1, 2]").find("expected an object"), std::string::npos);
  EXPECT_THROW(MambaConfig::from_json(""), Error);
  EXPECT_THROW(MambaCostModel(MambaConfig{}), Error);  // n_features 0
}

// ---- (8) the model can fit

TEST(MambaCostModel, FitsASyntheticProblem) {
  // Target: the sum of feature 0 over the real steps of programs of 2..12 steps (standardised), so the
  // model must read both the values and the length through the masked mean.
  MambaConfig cfg;
  cfg.n_features = 6;
  cfg.d_model = 32;
  MambaCostModel model = make_model(cfg, 10);
  const int64_t B = 128, L = 12;
  const torch::Tensor x = torch::rand({B, L, cfg.n_features});
  const torch::Tensor lengths = torch::randint(2, L + 1, {B});
  const torch::Tensor mask = (torch::arange(L).unsqueeze(0) < lengths.unsqueeze(1)).to(torch::kFloat32);
  torch::Tensor target = (x.select(2, 0) * mask).sum(1);
  target = (target - target.mean()) / target.std();
  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(3e-3));
  model->train();
  auto loss_now = [&] {
    torch::NoGradGuard no_grad;
    return torch::mse_loss(model->forward(x, mask), target).item<double>();
  };
  const double initial = loss_now();
  for (int step = 0; step < 200; ++step) {
    opt.zero_grad();
    const torch::Tensor loss = torch::mse_loss(model->forward(x, mask), target);
    loss.backward();
    opt.step();
  }
  const double final_loss = loss_now();
  std::printf("[   fit    ] MSE %.4f -> %.4f after 200 Adam steps\n", initial, final_loss);
  EXPECT_LT(final_loss * 10, initial) << "initial " << initial << " final " << final_loss;
}

}  // namespace
}  // namespace tclm
