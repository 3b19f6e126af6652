// infer/engine.cpp: CostModelEngine (tclm/infer.h): weights -> packed model, the blocked forward pass,
// the input paths (features, steps, step views, record lines) and the worker threads.
//
// Buffers of one block of M rows (one row per real step; columns padded to multiples of 16 so that every
// row starts a whole vector). Padding columns meet zero weights, so they never reach a real column:
// h's stay exactly 0 (LayerNorm's mean reads them), delta's hold softplus(0) against A = 0 and u = 0.
//   x     [M, F]       step features (padding rows inside a program zeroed)
//   h     [M, Dp]      residual stream
//   u     [M, Dp]      LayerNorm(h)
//   xz    [M, 2 Ep]    in_proj(u): x at columns [0, E), z at [Ep, Ep + E)
//   xc    [M, Ep]      SiLU(conv(x)), then overwritten in place by y * SiLU(z) (row t of xc is read by
//                      the scan only at step t, and the conv has already read x from xz)
//   dbc   [M, round16(R + 2N)]   x_proj(xc): dt_raw [0, R), B [R, R + N), C [R + N, R + 2N)
//   delta [M, Ep]      softplus(dt_proj(dt_raw))
#include "tclm/infer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>

#include "infer/gemm.h"
#include "infer/simd.h"
#include "tclm/error.h"

namespace tclm {

using infer::AlignedFloats;
using infer::Epilogue;
using infer::kLanes;
using infer::PackedLinear;
using infer::round_up16;
using infer::V;

namespace {

constexpr float kLayerNormEps = 1e-5f;  // as src/model/mamba.cpp (upstream Mamba's norm epsilon)

}  // namespace

// ---------------------------------------------------------------------------------------------------
// The packed model

struct CostModelEngine::Model {
  uint64_t id = 0;  // unique per built model (step-row caches are valid for one model only)
  MambaConfig cfg;
  uint32_t feature_version = kFeatureVersion;  // the encoding family the model reads
  int F = 0, D = 0, E = 0, N = 0, R = 0, K = 0, H = 0;
  int64_t Dp = 0, Ep = 0, XZp = 0, DBCp = 0, Hp = 0;

  struct Layer {
    AlignedFloats ln_w, ln_b;   // [Dp]
    PackedLinear in_proj;       // D -> 2 Ep (x | z)
    AlignedFloats conv_w;       // [K][Ep], tap-major: conv_w[k * Ep + e] = conv1d.weight[e, 0, k]
    AlignedFloats conv_b;       // [Ep]
    PackedLinear x_proj;        // E -> R + 2N
    PackedLinear dt_proj;       // R -> E, with bias
    AlignedFloats A;            // [Ep / 16][N][16]: -exp(A_log[e, n]) for e = blk * 16 + lane (0 past E)
    AlignedFloats Dskip;        // [Ep]
    PackedLinear out_proj;      // E -> D
  };
  AlignedFloats embed_t;        // [F][Dp]: embed.weight transposed (row k = the weights of feature k)
  AlignedFloats embed_b;        // [Dp]
  std::vector<Layer> layers;
  AlignedFloats lnf_w, lnf_b;   // [Dp]
  AlignedFloats col_mask;       // [Dp]: 1 for the D real columns, 0 for padding
  PackedLinear head1;           // D -> H, with bias
  AlignedFloats head2_w;        // [Hp]
  float head2_b = 0.0f;
};

namespace {

std::string shape_str(const std::vector<int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

AlignedFloats padded_copy(const float* src, int n, int64_t padded) {
  AlignedFloats out(static_cast<size_t>(padded), 0.0f);
  std::copy(src, src + n, out.begin());
  return out;
}

// Checks every tensor of `w` against the names and shapes the config implies and returns them by name.
std::map<std::string, const NamedTensor*> check_tensors(const WeightsFile& w, const MambaConfig& cfg,
                                                        const std::string& name) {
  const int64_t F = cfg.n_features, D = cfg.d_model, E = cfg.d_inner(), N = cfg.d_state, R = cfg.resolved_dt_rank(),
                K = cfg.d_conv, H = cfg.resolved_head_hidden();
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected = {
      {"embed.weight", {D, F}}, {"embed.bias", {D}}, {"norm_f.weight", {D}}, {"norm_f.bias", {D}},
      {"head1.weight", {H, D}}, {"head1.bias", {H}}, {"head2.weight", {1, H}}, {"head2.bias", {1}}};
  for (int i = 0; i < cfg.n_layers; ++i) {
    const std::string n = "norms." + std::to_string(i) + ".", m = "mixers." + std::to_string(i) + ".";
    expected.push_back({n + "weight", {D}});
    expected.push_back({n + "bias", {D}});
    expected.push_back({m + "A_log", {E, N}});
    expected.push_back({m + "D", {E}});
    expected.push_back({m + "in_proj.weight", {2 * E, D}});
    expected.push_back({m + "conv1d.weight", {E, 1, K}});
    expected.push_back({m + "conv1d.bias", {E}});
    expected.push_back({m + "x_proj.weight", {R + 2 * N, E}});
    expected.push_back({m + "dt_proj.weight", {E, R}});
    expected.push_back({m + "dt_proj.bias", {E}});
    expected.push_back({m + "out_proj.weight", {D, E}});
  }
  std::map<std::string, const NamedTensor*> by_name;
  for (const NamedTensor& t : w.tensors) {
    if (!by_name.emplace(t.name, &t).second) {
      throw Error(fmt::format("{}: tensor \"{}\" appears twice", name, t.name));
    }
  }
  std::map<std::string, const NamedTensor*> out;
  for (const auto& [tname, shape] : expected) {
    const auto it = by_name.find(tname);
    if (it == by_name.end()) {
      throw Error(fmt::format("{}: missing tensor \"{}\" (model config {})", name, tname, cfg.to_json()));
    }
    const NamedTensor& t = *it->second;
    if (t.shape != shape) {
      throw Error(fmt::format("{}: tensor \"{}\" has shape {} but the model expects {}", name, tname,
                              shape_str(t.shape), shape_str(shape)));
    }
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    if (static_cast<int64_t>(t.data.size()) != count) {
      throw Error(fmt::format("{}: tensor \"{}\" has {} values for shape {}", name, tname, t.data.size(),
                              shape_str(shape)));
    }
    out[tname] = &t;
  }
  for (const NamedTensor& t : w.tensors) {
    if (out.count(t.name) == 0 && !is_training_state(t.name)) {
      throw Error(fmt::format("{}: unknown tensor \"{}\" for a Mamba model (config {})", name, t.name,
                              cfg.to_json()));
    }
  }
  return out;
}

}  // namespace

CostModelEngine::CostModelEngine(const WeightsFile& w, const std::string& name) {
  if (w.model_kind != kMambaModelKind) {
    throw Error(fmt::format("{}: model kind '{}': the inference engine (and tclm export) takes '{}' models only; score "
                            "this one with 'tclm predict/eval --backend torch'", name, w.model_kind,
                            kMambaModelKind));
  }
  check_feature_version(w, name);
  check_finite_parameters(w, name);
  MambaConfig cfg;
  try {
    cfg = MambaConfig::from_json(w.config_json);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", name, e.what()));
  }
  if (cfg.n_features != kStepFeatureDim) {
    throw Error(fmt::format("{}: model expects {} features per step, the encoding has {}", name,
                            cfg.n_features, kStepFeatureDim));
  }
  const auto t = check_tensors(w, cfg, name);
  auto data = [&](const std::string& n) { return t.at(n)->data.data(); };

  static std::atomic<uint64_t> next_model_id{1};
  auto m = std::make_shared<Model>();
  m->id = next_model_id.fetch_add(1);
  m->cfg = cfg;
  m->feature_version = w.feature_version;
  m->F = cfg.n_features;
  m->D = cfg.d_model;
  m->E = cfg.d_inner();
  m->N = cfg.d_state;
  m->R = cfg.resolved_dt_rank();
  m->K = cfg.d_conv;
  m->H = cfg.resolved_head_hidden();
  m->Dp = round_up16(m->D);
  m->Ep = round_up16(m->E);
  m->XZp = 2 * m->Ep;
  m->DBCp = round_up16(m->R + 2 * m->N);
  m->Hp = round_up16(m->H);
  const int D = m->D, E = m->E, N = m->N, R = m->R, K = m->K;
  const int64_t Ep = m->Ep;

  m->embed_t.assign(static_cast<size_t>(m->F * m->Dp), 0.0f);
  const float* ew = data("embed.weight");  // [D, F]
  for (int d = 0; d < D; ++d) {
    for (int f = 0; f < m->F; ++f) m->embed_t[f * m->Dp + d] = ew[d * m->F + f];
  }
  m->embed_b = padded_copy(data("embed.bias"), D, m->Dp);
  for (int i = 0; i < cfg.n_layers; ++i) {
    const std::string n = "norms." + std::to_string(i) + ".", p = "mixers." + std::to_string(i) + ".";
    Model::Layer L;
    L.ln_w = padded_copy(data(n + "weight"), D, m->Dp);
    L.ln_b = padded_copy(data(n + "bias"), D, m->Dp);
    // in_proj rows 0..E-1 produce x, rows E..2E-1 produce z; z goes to column Ep + (row - E).
    std::vector<int> cols(2 * E);
    for (int r = 0; r < 2 * E; ++r) cols[r] = r < E ? r : static_cast<int>(Ep) + (r - E);
    L.in_proj.pack(data(p + "in_proj.weight"), 2 * E, D, nullptr, &cols, static_cast<int>(Ep) + E);
    L.conv_w.assign(static_cast<size_t>(K * Ep), 0.0f);
    const float* cw = data(p + "conv1d.weight");  // [E, 1, K]
    for (int e = 0; e < E; ++e) {
      for (int k = 0; k < K; ++k) L.conv_w[k * Ep + e] = cw[e * K + k];
    }
    L.conv_b = padded_copy(data(p + "conv1d.bias"), E, Ep);
    L.x_proj.pack(data(p + "x_proj.weight"), R + 2 * N, E, nullptr);
    L.dt_proj.pack(data(p + "dt_proj.weight"), E, R, data(p + "dt_proj.bias"));
    L.out_proj.pack(data(p + "out_proj.weight"), D, E, nullptr);
    L.A.assign(static_cast<size_t>(Ep * N), 0.0f);
    const float* a_log = data(p + "A_log");  // [E, N]
    for (int e = 0; e < E; ++e) {
      for (int s = 0; s < N; ++s) {
        L.A[(static_cast<int64_t>(e / kLanes) * N + s) * kLanes + e % kLanes] = -std::exp(a_log[e * N + s]);
      }
    }
    L.Dskip = padded_copy(data(p + "D"), E, Ep);
    m->layers.push_back(std::move(L));
  }
  m->lnf_w = padded_copy(data("norm_f.weight"), D, m->Dp);
  m->lnf_b = padded_copy(data("norm_f.bias"), D, m->Dp);
  m->col_mask.assign(static_cast<size_t>(m->Dp), 0.0f);
  std::fill(m->col_mask.begin(), m->col_mask.begin() + D, 1.0f);
  m->head1.pack(data("head1.weight"), m->H, D, data("head1.bias"));
  m->head2_w = padded_copy(data("head2.weight"), m->H, m->Hp);
  m->head2_b = data("head2.bias")[0];
  model_ = std::move(m);
}

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
// The forward pass of one block

namespace {

using Model = CostModelEngine::Model;

/// A 64-bit hash of the bits of one feature row (F floats). Four independent lanes, so the multiplies
/// overlap; mixed at the end.
inline uint64_t hash_row(const float* row, int64_t F) {
  uint64_t h[4] = {0x9E3779B97F4A7C15ull, 0xC2B2AE3D27D4EB4Full, 0x165667B19E3779F9ull, 0x27D4EB2F165667C5ull};
  int64_t f = 0;
  for (; f + 4 <= F; f += 4) {
    for (int l = 0; l < 4; ++l) {
      uint32_t bits;
      std::memcpy(&bits, row + f + l, sizeof bits);
      h[l] = (h[l] ^ bits) * 0xBF58476D1CE4E5B9ull;
    }
  }
  for (; f < F; ++f) {
    uint32_t bits;
    std::memcpy(&bits, row + f, sizeof bits);
    h[0] = (h[0] ^ bits) * 0xBF58476D1CE4E5B9ull;
  }
  uint64_t x = h[0] ^ std::rotl(h[1], 16) ^ std::rotl(h[2], 32) ^ std::rotl(h[3], 48);
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 29);
}

/// The first layer up to its in_proj (embedding, LayerNorm, in_proj: about half of the default model's
/// FLOPs) is a function of one step's features alone, and candidate programs repeat their steps a lot:
/// in 10,000 real records drawn from data/records, 1.3% of the 274,537 step rows are distinct (1% within
/// one task, which is what a search round scores). StepRowCache keeps, per worker, the embedding h0 and
/// in_proj output xz of the distinct rows it has seen, keyed by the row's bits, so each is computed once.
/// Results are bitwise those of the uncached path: the same kernels compute each row the same way
/// wherever it sits in a GEMM. Entries are appended; when a block's rows could overflow the capacity,
/// the cache starts empty again (no eviction bookkeeping).
struct StepRowCache {
  /// At most this many entries whatever the budget (entry indices are int32; a table this size is
  /// ~30 GB for the default model, so the budget is what limits it in practice).
  static constexpr int64_t kMaxEntries = int64_t{1} << 24;
  int64_t capacity = 0;   // entries the budget allows (0: disabled)
  int64_t allocated = 0;  // entries the arrays hold now (grown on demand, <= capacity)
  int64_t used = 0;
  uint64_t model_id = 0;
  int64_t F = 0, Dp = 0, XZp = 0;
  std::vector<float> keys;   // [allocated][F]: the feature rows
  AlignedFloats h0;          // [allocated][Dp]: embed(row)
  AlignedFloats xz;          // [allocated][XZp]: in_proj(LayerNorm(h0)) of layer 0
  std::vector<int32_t> slots;  // open addressing (linear probing): entry index, or -1; >= 2 allocated

  /// Starts a call: empty, for model `m` and the memory budget (the memory is kept if neither changed).
  /// Entries live for one call only, so that a call's cost does not depend on what the thread scored before.
  void configure(const Model& m, size_t budget_bytes) {
    const size_t entry_bytes = sizeof(float) * static_cast<size_t>(m.F + m.Dp + m.XZp);
    const int64_t cap = m.layers.empty() ? 0 : static_cast<int64_t>(std::min<size_t>(budget_bytes / entry_bytes, kMaxEntries));
    if (cap == capacity && m.id == model_id) {
      clear();
      return;
    }
    *this = StepRowCache();
    capacity = cap;
    model_id = m.id;
    F = m.F;
    Dp = m.Dp;
    XZp = m.XZp;
  }
  /// Makes room for `rows` new entries (false if the capacity is smaller than that). The arrays grow
  /// geometrically up to the capacity; `allocated` changes only once every array has its new size, so
  /// a failed allocation (std::bad_alloc) leaves a consistent cache.
  bool reserve(int64_t rows) {
    if (rows > capacity) return false;
    if (used + rows > capacity) clear();
    if (used + rows > allocated) {
      const int64_t want = std::min(capacity, std::max<int64_t>(2 * allocated, used + rows));
      keys.resize(static_cast<size_t>(want * F));
      h0.resize(static_cast<size_t>(want * Dp));
      xz.resize(static_cast<size_t>(want * XZp));
      allocated = want;
    }
    if (static_cast<int64_t>(slots.size()) < 2 * allocated) rehash();
    return true;
  }
  void clear() {
    used = 0;
    std::fill(slots.begin(), slots.end(), -1);
  }
  /// The entry of `row` (F floats), appending it if new (reserve() made room).
  int32_t find_or_insert(const float* row) {
    const size_t mask = slots.size() - 1;
    for (size_t s = static_cast<size_t>(hash_row(row, F)) & mask;; s = (s + 1) & mask) {
      const int32_t e = slots[s];
      if (e < 0) {
        slots[s] = static_cast<int32_t>(used);
        std::memcpy(keys.data() + used * F, row, sizeof(float) * static_cast<size_t>(F));
        return static_cast<int32_t>(used++);
      }
      if (std::memcmp(keys.data() + e * F, row, sizeof(float) * static_cast<size_t>(F)) == 0) return e;
    }
  }

 private:
  /// A slot table of at least 2 `allocated` (a power of two) holding the `used` entries.
  void rehash() {
    size_t n_slots = 16;
    while (n_slots < static_cast<size_t>(2 * allocated)) n_slots *= 2;
    std::vector<int32_t> fresh(n_slots, -1);
    for (int64_t e = 0; e < used; ++e) {
      for (size_t s = static_cast<size_t>(hash_row(keys.data() + e * F, F)) & (n_slots - 1);; s = (s + 1) & (n_slots - 1)) {
        if (fresh[s] < 0) {
          fresh[s] = static_cast<int32_t>(e);
          break;
        }
      }
    }
    slots = std::move(fresh);
  }
};

/// Scratch memory of one worker: one block of programs, their rows and the activations.
struct Block {
  int64_t cap_rows = 0, cap_progs = 0;
  AlignedFloats x, h, u, xz, xc, dbc, delta, pooled, hid;
  std::vector<int> nz_idx;            // [F]: nonzero features of one row (embed_rows)
  std::vector<float> nz_val;
  std::vector<uint8_t> real;          // per row: 1 = real step, 0 = padding inside a program
  std::vector<const float*> xz_row;   // per row: its in_proj output (a row of xz, or of cache.xz in layer 0)
  std::vector<int32_t> entry;         // per row: its StepRowCache entry
  std::vector<int32_t> row_owner;     // per row: the program (in this block) that computes it
  StepRowCache cache;
  // Programs. A program's steps (positions) map to rows: its first lcp positions are its predecessor's
  // rows (shared prefix), the others are its own rows [row_begin[j], row_begin[j + 1]).
  std::vector<int64_t> row_begin{0};  // per program in the block, plus the end
  std::vector<int64_t> pos_begin{0};  // per program: its positions in pos_row, plus the end
  std::vector<int32_t> pos_row;       // per position of every program: its row
  std::vector<int32_t> lcp;           // per program: positions shared with its predecessor
  std::vector<size_t> index;          // per program: its index in the caller's arrays
  int64_t rows = 0;
  // Scan states handed from a prefix's owner to the programs that continue it (one slot per program).
  struct StateRequest {
    int32_t owner, pos, program;  // after position pos of program owner, save the state for program
  };
  std::vector<StateRequest> requests;  // sorted by (owner, pos); request k saves into state slot k
  std::vector<int64_t> req_begin;      // per program: its requests (as owner), plus the end
  std::vector<int32_t> state_slot;     // per program: the slot its scan starts from, or -1
  AlignedFloats states;                // [requests][Ep * N]
  CostModelEngine::ReuseCounters* counters = nullptr;  // Options::counters of the call

  // Every buffer region a block reads has been written earlier in the same block (padding columns
  // included), so a Block can be reused for any model of the same sizes without clearing it.
  void adopt(const Model& m, size_t cache_bytes) {
    const std::array<int64_t, 6> dims{m.F, m.Dp, m.XZp, m.Ep, m.DBCp, m.Hp};
    if (dims != dims_) {
      *this = Block();
      dims_ = dims;
    }
    cache.configure(m, cache_bytes);
    clear();
  }
  // The capacities are raised only after every buffer has its new size: a std::bad_alloc in between
  // leaves a Block that is still consistent (the thread's kept Block is used again by its next call).
  void reserve(const Model& m, int64_t rows_needed, int64_t progs_needed) {
    if (rows_needed > cap_rows) {  // only when the block is empty (run_workers flushes first)
      const size_t n = static_cast<size_t>(rows_needed);
      x.assign(n * m.F, 0.0f);
      h.assign(n * m.Dp, 0.0f);
      u.assign(n * m.Dp, 0.0f);
      xz.assign(n * m.XZp, 0.0f);
      xc.assign(n * m.Ep, 0.0f);
      dbc.assign(n * m.DBCp, 0.0f);
      delta.assign(n * m.Ep, 0.0f);
      real.assign(n, 0);
      xz_row.assign(n, nullptr);
      entry.assign(n, 0);
      row_owner.assign(n, 0);
      cap_rows = rows_needed;
    }
    nz_idx.resize(static_cast<size_t>(m.F));
    nz_val.resize(static_cast<size_t>(m.F));
    if (progs_needed > cap_progs) {
      pooled.assign(static_cast<size_t>(progs_needed * m.Dp), 0.0f);
      hid.assign(static_cast<size_t>(progs_needed * m.Hp), 0.0f);
      cap_progs = progs_needed;
    }
  }
  int64_t programs() const { return static_cast<int64_t>(index.size()); }
  int32_t length(int64_t j) const { return static_cast<int32_t>(pos_begin[j + 1] - pos_begin[j]); }
  const int32_t* positions(int64_t j) const { return pos_row.data() + pos_begin[j]; }
  void clear() {
    rows = 0;
    row_begin.assign(1, 0);
    pos_begin.assign(1, 0);
    pos_row.clear();
    lcp.clear();
    index.clear();
  }

  /// Adds program i, whose `len` rows the source has just written at row `rows` (x and real). With
  /// `share`, the steps it has in common with the previous program of the block (same features and
  /// padding flags, from the first step on) are not computed again: the causal model gives them
  /// exactly the same values, so the program reads the predecessor's rows and its own rows start after.
  void append_program(const Model& m, size_t i, int64_t len, bool share) {
    const int64_t j = programs(), F = m.F;
    int64_t shared = 0;
    if (share && j > 0) {
      const int64_t prev = pos_begin[j - 1];  // (an index: pos_row grows below)
      const int64_t n = std::min<int64_t>(len, length(j - 1));
      while (shared < n) {
        const int64_t r = rows + shared, q = pos_row[prev + shared];
        if (real[r] != real[q] || std::memcmp(x.data() + r * F, x.data() + q * F, sizeof(float) * F) != 0) break;
        ++shared;
      }
      for (int64_t p = 0; p < shared; ++p) pos_row.push_back(pos_row[prev + p]);
      if (shared > 0 && shared < len) {  // move the own rows down over the shared ones
        std::memmove(x.data() + rows * F, x.data() + (rows + shared) * F, sizeof(float) * F * (len - shared));
        std::memmove(real.data() + rows, real.data() + rows + shared, static_cast<size_t>(len - shared));
      }
    }
    for (int64_t p = shared; p < len; ++p) {
      row_owner[rows] = static_cast<int32_t>(j);
      pos_row.push_back(static_cast<int32_t>(rows++));
    }
    row_begin.push_back(rows);
    pos_begin.push_back(static_cast<int64_t>(pos_row.size()));
    lcp.push_back(static_cast<int32_t>(shared));
    index.push_back(i);
  }

  /// Builds the state requests of the block (before the scans): a program that shares lcp > 0 steps and
  /// has own steps after them starts its scan from the state after position lcp - 1 of that row's owner.
  void plan_states(const Model& m) {
    requests.clear();
    const int64_t P = programs();
    for (int64_t j = 0; j < P; ++j) {
      if (lcp[j] > 0 && lcp[j] < length(j)) {
        const int32_t pos = lcp[j] - 1;
        requests.push_back({row_owner[positions(j)[pos]], pos, static_cast<int32_t>(j)});
      }
    }
    std::sort(requests.begin(), requests.end(), [](const StateRequest& a, const StateRequest& b) {
      return a.owner != b.owner ? a.owner < b.owner : a.pos < b.pos;
    });
    req_begin.assign(static_cast<size_t>(P + 1), 0);
    state_slot.assign(static_cast<size_t>(P), -1);
    for (size_t k = 0; k < requests.size(); ++k) {
      ++req_begin[requests[k].owner + 1];
      state_slot[requests[k].program] = static_cast<int32_t>(k);
    }
    for (int64_t j = 0; j < P; ++j) req_begin[j + 1] += req_begin[j];
    const size_t need = requests.size() * static_cast<size_t>(m.Ep * m.N);
    if (states.size() < need) states.resize(need);
  }

 private:
  std::array<int64_t, 6> dims_{};
};

/// The calling thread keeps its Block between calls (a small call then allocates nothing; ~1 MB for
/// the default model, plus the memory of its step-row cache, emptied per call);
/// worker threads, started per call, have their own. A nested call on the same thread (a predict_views
/// callback that predicts) gets a fresh Block.
struct ScratchLease {
  Block local;
  Block* block;
  bool* busy = nullptr;
  ScratchLease(const Model& m, size_t cache_bytes) {
    thread_local Block cached;
    thread_local bool cached_busy = false;
    if (cached_busy) {
      local.adopt(m, cache_bytes);
      block = &local;
    } else {
      cached.adopt(m, cache_bytes);  // (before marking it busy: if this throws, the next call may use it)
      cached_busy = true;
      busy = &cached_busy;
      block = &cached;
    }
  }
  ~ScratchLease() {
    if (busy) *busy = false;
  }
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;
};

/// h[r] = embed.bias + sum over the nonzero features f of x[r, f] * embed.weight[:, f], for every row.
/// Step features are sparse (one-hot kinds and annotations; ~6.6 nonzeros of 55 per step in real
/// records), so gathering the nonzeros first does ~8x fewer multiply-adds than the dense product; the
/// skipped terms are exact zeros (x = 0), so the sum is the same.
/// x: [rows, F]; h: [rows, Dp].
void embed_rows(const Model& m, Block& b, const float* x_rows, int64_t rows, float* h) {
  const int64_t F = m.F, Dp = m.Dp;
  constexpr int kChunk = 8;  // vectors of output columns held in registers
  int* idx = b.nz_idx.data();
  float* val = b.nz_val.data();
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = x_rows + r * F;
    int nnz = 0;
    for (int f = 0; f < F; ++f) {  // branch-free compaction
      idx[nnz] = f;
      val[nnz] = x[f];
      nnz += x[f] != 0.0f;
    }
    float* out = h + r * Dp;
    int64_t c0 = 0;
    for (; c0 + kChunk * kLanes <= Dp; c0 += kChunk * kLanes) {
      V acc[kChunk];
      for (int v = 0; v < kChunk; ++v) acc[v] = infer::load(m.embed_b.data() + c0 + v * kLanes);
      for (int j = 0; j < nnz; ++j) {
        const V a = infer::splat(val[j]);
        const float* w = m.embed_t.data() + idx[j] * Dp + c0;
#pragma GCC unroll 8
        for (int v = 0; v < kChunk; ++v) acc[v] += a * infer::load(w + v * kLanes);
      }
      for (int v = 0; v < kChunk; ++v) infer::store(out + c0 + v * kLanes, acc[v]);
    }
    for (; c0 < Dp; c0 += kLanes) {
      V acc = infer::load(m.embed_b.data() + c0);
      for (int j = 0; j < nnz; ++j) acc += infer::splat(val[j]) * infer::load(m.embed_t.data() + idx[j] * Dp + c0);
      infer::store(out + c0, acc);
    }
  }
}

/// out = LayerNorm(in) over the first D columns (the padding columns of `in` are 0; out's stay 0).
inline void layer_norm_row(const float* in, const Model& m, const float* w, const float* b, float* out) {
  const int64_t nv = m.Dp / kLanes;
  V s{};
  for (int64_t j = 0; j < nv; ++j) s += infer::load(in + j * kLanes);
  const float mean = infer::hsum(s) / static_cast<float>(m.D);
  V q{};
  for (int64_t j = 0; j < nv; ++j) {
    const V d = (infer::load(in + j * kLanes) - mean) * infer::load(m.col_mask.data() + j * kLanes);
    q += d * d;
  }
  const float var = infer::hsum(q) / static_cast<float>(m.D);
  const float rstd = 1.0f / std::sqrt(var + kLayerNormEps);
  for (int64_t j = 0; j < nv; ++j) {
    const V d = (infer::load(in + j * kLanes) - mean) * rstd;
    infer::store(out + j * kLanes, d * infer::load(w + j * kLanes) + infer::load(b + j * kLanes));
  }
}

/// xc = SiLU(bias + sum_k w[k] * x[t - K + 1 + k]) at the own positions t of program j (x = 0 before
/// its first position; earlier positions are read through the position -> row map).
void conv_silu(const Model& m, const Model::Layer& L, Block& b, int64_t j) {
  const int64_t Ep = m.Ep, K = m.K;
  const int32_t* row = b.positions(j);
  for (int64_t t = b.lcp[j]; t < b.length(j); ++t) {
    const int64_t k0 = std::max<int64_t>(0, K - 1 - t);  // first tap that reads a position >= 0
    for (int64_t e = 0; e < Ep; e += kLanes) {
      V acc = infer::load(L.conv_b.data() + e);
      for (int64_t k = k0; k < K; ++k) {
        acc += infer::load(L.conv_w.data() + k * Ep + e) * infer::load(b.xz_row[row[t - K + 1 + k]] + e);
      }
      infer::store(b.xc.data() + row[t] * Ep + e, infer::vsilu(acc));
    }
  }
}

/// The selective scan of program j's own positions, gated: xc[t] <- (sum_n C_t h_t + D u_t) * SiLU(z_t).
/// It starts from zero, or after a shared prefix from the state its owner saved (b.requests); it saves
/// the states other programs of the block continue from. NS > 0: d_state known at compile time (the
/// state stays in registers); NS = 0: any d_state.
template <int NS>
void scan_gate(const Model& m, const Model::Layer& L, Block& b, int64_t j) {
  const int N = NS > 0 ? NS : m.N;
  const int64_t Ep = m.Ep, R = m.R;
  constexpr int kStack = NS > 0 ? NS : 64;
  V h_stack[kStack];
  std::vector<V> h_heap;
  V* h = h_stack;
  if (NS == 0 && N > kStack) {
    h_heap.resize(static_cast<size_t>(N));
    h = h_heap.data();
  }
  const int32_t* row = b.positions(j);
  const int64_t t0 = b.lcp[j], t1 = b.length(j);
  if (t0 >= t1) return;  // the whole program is a prefix of its predecessor
  const Block::StateRequest* req = b.requests.data() + b.req_begin[j];
  const Block::StateRequest* req_end = b.requests.data() + b.req_begin[j + 1];
  const int64_t state_size = Ep * N;
  for (int64_t e = 0; e < Ep; e += kLanes) {
    const V* a = reinterpret_cast<const V*>(L.A.data() + e * N);
    const V dskip = infer::load(L.Dskip.data() + e);
    if (t0 > 0) {
      const float* saved = b.states.data() + b.state_slot[j] * state_size + e * N;
      for (int n = 0; n < N; ++n) h[n] = infer::load(saved + n * kLanes);
    } else {
      for (int n = 0; n < N; ++n) h[n] = V{};
    }
    const Block::StateRequest* next = req;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t r = row[t];
      float* xt = b.xc.data() + r * Ep + e;
      const V u = infer::load(xt);
      const V dt = infer::load(b.delta.data() + r * Ep + e);
      const V z = infer::load(b.xz_row[r] + Ep + e);
      const float* Bt = b.dbc.data() + r * m.DBCp + R;
      const float* Ct = Bt + N;
      const V dtu = dt * u;
      V acc = dskip * u;
#pragma GCC unroll 16
      for (int n = 0; n < N; ++n) {
        h[n] = infer::vexp(dt * a[n]) * h[n] + dtu * Bt[n];
        acc += h[n] * Ct[n];
      }
      infer::store(xt, acc * infer::vsilu(z));
      for (; next != req_end && next->pos == t; ++next) {
        float* saved = b.states.data() + (next - b.requests.data()) * state_size + e * N;
        for (int n = 0; n < N; ++n) infer::store(saved + n * kLanes, h[n]);
      }
    }
  }
}

/// Runs the model on the block and writes scores[b.index[j]].
void forward_block(const Model& m, Block& b, float* scores) {
  const int64_t M = b.rows, P = b.programs();
  if (P == 0) return;
  b.plan_states(m);
  if (M > 0) {
    // Layer 0's rows come from the step-row cache when it can hold this block (first_layer = 1).
    const bool cached = !m.layers.empty() && b.cache.reserve(M);
    if (b.counters) {
      b.counters->positions += static_cast<int64_t>(b.pos_row.size());
      b.counters->rows += M;
      if (!cached) b.counters->layer0_rows += M;
    }
    if (cached) {
      StepRowCache& c = b.cache;
      const int64_t first_new = c.used;
      for (int64_t r = 0; r < M; ++r) b.entry[r] = c.find_or_insert(b.x.data() + r * m.F);
      const int64_t n_new = c.used - first_new;
      if (b.counters) b.counters->layer0_rows += n_new;
      const Model::Layer& L = m.layers[0];
      embed_rows(m, b, c.keys.data() + first_new * m.F, n_new, c.h0.data() + first_new * m.Dp);
      for (int64_t j = 0; j < n_new; ++j) {
        layer_norm_row(c.h0.data() + (first_new + j) * m.Dp, m, L.ln_w.data(), L.ln_b.data(), b.u.data() + j * m.Dp);
      }
      infer::gemm(b.u.data(), m.Dp, n_new, L.in_proj, c.xz.data() + first_new * m.XZp, m.XZp, Epilogue::kStore);
      for (int64_t r = 0; r < M; ++r) {
        const float* h0 = c.h0.data() + static_cast<int64_t>(b.entry[r]) * m.Dp;
        std::copy(h0, h0 + m.Dp, b.h.data() + r * m.Dp);
        b.xz_row[r] = c.xz.data() + static_cast<int64_t>(b.entry[r]) * m.XZp;
      }
    } else {
      embed_rows(m, b, b.x.data(), M, b.h.data());
    }
    for (size_t li = 0; li < m.layers.size(); ++li) {
      const Model::Layer& L = m.layers[li];
      if (li > 0 || !cached) {
        for (int64_t r = 0; r < M; ++r) {
          layer_norm_row(b.h.data() + r * m.Dp, m, L.ln_w.data(), L.ln_b.data(), b.u.data() + r * m.Dp);
        }
        infer::gemm(b.u.data(), m.Dp, M, L.in_proj, b.xz.data(), m.XZp, Epilogue::kStore);
        for (int64_t r = 0; r < M; ++r) b.xz_row[r] = b.xz.data() + r * m.XZp;
      }
      for (int64_t p = 0; p < P; ++p) conv_silu(m, L, b, p);
      infer::gemm(b.xc.data(), m.Ep, M, L.x_proj, b.dbc.data(), m.DBCp, Epilogue::kStore);
      infer::gemm(b.dbc.data(), m.DBCp, M, L.dt_proj, b.delta.data(), m.Ep, Epilogue::kBiasSoftplus);
      for (int64_t p = 0; p < P; ++p) {
        switch (m.N) {
          case 8: scan_gate<8>(m, L, b, p); break;
          case 16: scan_gate<16>(m, L, b, p); break;
          default: scan_gate<0>(m, L, b, p); break;
        }
      }
      infer::gemm(b.xc.data(), m.Ep, M, L.out_proj, b.h.data(), m.Dp, Epilogue::kAccumulate);
    }
  }
  // Final LayerNorm of every row (into u, free again), then each program's masked mean over its positions.
  for (int64_t r = 0; r < M; ++r) {
    layer_norm_row(b.h.data() + r * m.Dp, m, m.lnf_w.data(), m.lnf_b.data(), b.u.data() + r * m.Dp);
  }
  const int64_t nv = m.Dp / kLanes;
  for (int64_t p = 0; p < P; ++p) {
    float* pooled = b.pooled.data() + p * m.Dp;
    std::fill(pooled, pooled + m.Dp, 0.0f);
    int64_t n_real = 0;
    const int32_t* row = b.positions(p);
    for (int32_t t = 0; t < b.length(p); ++t) {
      const int64_t r = row[t];
      if (!b.real[r]) continue;
      ++n_real;
      const float* ln = b.u.data() + r * m.Dp;
      for (int64_t j = 0; j < nv; ++j) {
        infer::store(pooled + j * kLanes, infer::load(pooled + j * kLanes) + infer::load(ln + j * kLanes));
      }
    }
    const float inv = 1.0f / static_cast<float>(std::max<int64_t>(n_real, 1));
    for (int64_t j = 0; j < nv; ++j) infer::store(pooled + j * kLanes, infer::load(pooled + j * kLanes) * inv);
  }
  infer::gemm(b.pooled.data(), m.Dp, P, m.head1, b.hid.data(), m.Hp, Epilogue::kBiasRelu);
  for (int64_t p = 0; p < P; ++p) {
    V s{};
    const float* hid = b.hid.data() + p * m.Hp;
    for (int64_t j = 0; j < m.Hp; j += kLanes) s += infer::load(hid + j) * infer::load(m.head2_w.data() + j);
    scores[b.index[p]] = infer::hsum(s) + m.head2_b;
  }
}

// ---------------------------------------------------------------------------------------------------
// Workers. A Source provides the programs one at a time, in the worker thread that scores them:
//   int64_t prepare(size_t i)                 rows program i needs (its real steps), or -1: score NaN
//   void fill(size_t i, float* x, uint8_t* real)   writes those rows' features and real flags
// prepare(i) and fill(i) are called back to back for the same i. Each worker has its own Source.

/// Runs fn(worker) on n_threads threads (the calling thread is worker 0) and rethrows the first exception.
template <class Fn>
void on_threads(int n_threads, const Fn& fn) {
  std::exception_ptr error;
  std::mutex error_mu;
  auto guarded = [&](int w) {
    try {
      fn(w);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu);
      if (!error) error = std::current_exception();
    }
  };
  if (n_threads == 1) {
    guarded(0);
  } else {
    std::vector<std::thread> pool;
    pool.reserve(static_cast<size_t>(n_threads - 1));
    try {
      for (int i = 1; i < n_threads; ++i) pool.emplace_back(guarded, i);
    } catch (const std::system_error&) {
      // No more threads available: the ones started and this thread share the work.
    }
    guarded(0);
    for (auto& t : pool) t.join();
  }
  if (error) std::rethrow_exception(error);
}

/// The order in which to score programs so that those with common first steps are neighbours (and so
/// share their prefix in a block): programs sorted by the hashes of their rows, lexicographically. A
/// hash collision can only make the order worse, never a score wrong (append_program compares rows).
template <class MakeSource>
std::vector<size_t> prefix_order(const Model& m, size_t n, int n_threads, size_t chunk, std::atomic<bool>& failed,
                                 const MakeSource& make_source) {
  std::vector<std::vector<uint64_t>> keys(n);
  std::atomic<size_t> next{0};
  on_threads(n_threads, [&](int) {
    try {
      auto source = make_source();
      std::vector<float> x;
      std::vector<uint8_t> real;
      while (!failed.load(std::memory_order_relaxed)) {
        const size_t begin = next.fetch_add(chunk);
        if (begin >= n) break;
        for (size_t i = begin; i < std::min(n, begin + chunk); ++i) {
          const int64_t rows = source.prepare(i);
          if (rows <= 0) continue;
          x.resize(static_cast<size_t>(rows * m.F));
          real.resize(static_cast<size_t>(rows));
          source.fill(i, x.data(), real.data());
          keys[i].resize(static_cast<size_t>(rows));
          for (int64_t r = 0; r < rows; ++r) keys[i][r] = hash_row(x.data() + r * m.F, m.F) ^ real[r];
        }
      }
    } catch (...) {
      failed = true;  // the other threads stop early
      throw;
    }
  });
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return keys[a] < keys[b]; });
  return order;
}

template <class MakeSource>
void run_workers(const Model& m, size_t n, float* scores, int threads, const CostModelEngine::Options& opt,
                 const MakeSource& make_source) {
  if (n == 0) return;
  int n_threads = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // At least ~16 programs (a block of ~500 steps) per thread, so small calls stay on the caller's thread.
  n_threads = static_cast<int>(std::min<size_t>(static_cast<size_t>(n_threads), (n + 15) / 16));
  n_threads = std::max(n_threads, 1);
  const size_t chunk = std::clamp<size_t>(n / (static_cast<size_t>(n_threads) * 8), 1, 64);
  std::atomic<bool> failed{false};
  // Sorting pays when there are enough programs to find neighbours; small calls keep their order
  // (consecutive programs with a common prefix still share it). 512: a 64-program call got 25% slower with it.
  std::vector<size_t> order;
  if (opt.share_prefixes && n >= 512) order = prefix_order(m, n, n_threads, chunk, failed, make_source);
  std::atomic<size_t> next{0};
  on_threads(n_threads, [&](int) {
    try {
      auto source = make_source();
      ScratchLease lease(m, opt.step_cache_bytes);
      Block& b = *lease.block;
      b.counters = opt.counters;
      b.reserve(m, CostModelEngine::kBlockRows, CostModelEngine::kBlockRows);
      while (!failed.load(std::memory_order_relaxed)) {
        const size_t begin = next.fetch_add(chunk);
        if (begin >= n) break;
        const size_t end = std::min(n, begin + chunk);
        for (size_t k = begin; k < end; ++k) {
          const size_t i = order.empty() ? k : order[k];
          const int64_t rows = source.prepare(i);
          if (rows < 0) {
            scores[i] = std::numeric_limits<float>::quiet_NaN();
            continue;
          }
          if (b.programs() > 0 && (b.rows + rows > b.cap_rows || b.programs() >= b.cap_progs)) {
            forward_block(m, b, scores);
            b.clear();
          }
          b.reserve(m, b.rows + rows, b.programs() + 1);  // only grows for a program longer than a block
          source.fill(i, b.x.data() + b.rows * m.F, b.real.data() + b.rows);
          b.append_program(m, i, rows, opt.share_prefixes);
        }
      }
      forward_block(m, b, scores);
    } catch (...) {
      failed = true;
      throw;
    }
  });
}

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

}  // namespace

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

namespace {

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

}  // namespace

std::vector<float> CostModelEngine::predict_record_lines(const std::vector<std::string_view>& lines,
                                                         std::vector<std::string>* errors) const {
  std::vector<float> scores(lines.size());
  if (errors) errors->assign(lines.size(), std::string());
  run_workers(*model_, lines.size(), scores.data(), threads_, options_,
              [&] { return LineSource{&lines, errors, max_steps_, model_->feature_version}; });
  return scores;
}

}  // namespace tclm
