#include "train/checkpoint.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <simdjson.h>

#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/string_utils.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>

#include "common/bytes.h"
#include "tclm/error.h"

namespace tclm {

namespace {

constexpr char kBestPrefix[] = "trainer.best.";
constexpr char kAdamPrefix[] = "trainer.adam.";
constexpr char kTorchRngName[] = "trainer.torch_rng";

// The key libtorch's Adam (1.13) files a parameter's state under.
std::string adam_key(const torch::Tensor& p) { return c10::guts::to_string(p.unsafeGetTensorImpl()); }

NamedTensor to_named(const std::string& name, const torch::Tensor& t) {
  const torch::Tensor c = t.detach().to(torch::kFloat32).contiguous();
  const float* d = c.data_ptr<float>();
  return NamedTensor{name, c.sizes().vec(), std::vector<float>(d, d + c.numel())};
}

/// The epoch log as arrays of 10 numbers (load_checkpoint reads them back; doubles round-trip exactly;
/// checkpoints written before comm_seconds and wait_seconds existed have 8).
nlohmann::json log_entries_json(const std::vector<EpochLog>& log) {
  nlohmann::json a = nlohmann::json::array();
  for (const EpochLog& e : log) {
    a.push_back({e.epoch, e.train_loss, e.valid_top1, e.valid_top5, e.valid_pairwise, e.lr, e.seconds,
                 e.samples_per_second, e.comm_seconds, e.wait_seconds});
  }
  return a;
}

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw Error(fmt::format("{}: not a usable training checkpoint: {}; start again without --resume (or delete it)",
                          path, what));
}

}  // namespace

std::string rng_to_string(const std::mt19937_64& rng) {
  std::ostringstream os;
  os << rng;
  return os.str();
}

bool rng_from_string(const std::string& s, std::mt19937_64* rng) {
  std::istringstream is(s);
  is >> *rng;
  return !is.fail();
}

uint64_t training_fingerprint(const TrainOptions& o, const std::string& model_config_json, const Dataset& data,
                              const Split& split) {
  std::string s = fmt::format(
      "kind={} config={} loss={} epochs={} batch={} group={} lr={:.17g} warmup={:.17g} final={:.17g} clip={:.17g} "
      "wd={:.17g} patience={} min_steps={} seed={} version={} programs={} tasks={} max_steps={} select={}",
      to_string(o.model_kind), model_config_json, to_string(o.loss), o.epochs, o.batch_size, o.group_size, o.lr, o.warmup_fraction,
      o.final_lr_fraction, o.grad_clip, o.weight_decay, o.patience, o.min_steps, o.seed, data.feature_version(),
      data.num_programs(), data.tasks().size(), data.max_steps(), to_string(o.select));
  uint64_t h = fnv1a64(s);
  for (const auto* part : {&split.train, &split.valid}) {
    h = fnv1a64(std::string_view(reinterpret_cast<const char*>(part->data()), part->size() * sizeof(uint32_t)), h);
    h = fnv1a64("|", h);
  }
  // The labels (hence the costs) of the training programs: the same files re-measured are other data.
  for (uint32_t t : split.train) {
    for (uint32_t p : data.tasks()[t].programs) {
      const float l = data.label(p);
      h = fnv1a64(std::string_view(reinterpret_cast<const char*>(&l), sizeof l), h);
    }
  }
  if (o.init) h = fnv1a64(serialize_weights(*o.init), h);
  return h;
}

void save_checkpoint(const std::string& path, const TrainerState& st, CostModelImpl& model, torch::optim::Adam& opt,
                     const WeightsFile& best, uint32_t feature_version) {
  WeightsFile w;
  export_to_weights(model, &w);
  w.feature_version = feature_version;
  for (const NamedTensor& t : best.tensors) {
    w.tensors.push_back(NamedTensor{kBestPrefix + t.name, t.shape, t.data});
  }
  nlohmann::json adam_steps = nlohmann::json::array();
  auto& groups = opt.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    nlohmann::json group_steps = nlohmann::json::array();
    const auto& params = groups[g].params();
    for (size_t i = 0; i < params.size(); ++i) {
      const auto it = opt.state().find(adam_key(params[i]));
      int64_t step = 0;
      if (it != opt.state().end()) {
        auto& s = static_cast<torch::optim::AdamParamState&>(*it->second);
        step = s.step();
        const std::string base = fmt::format("{}{}.{}.", kAdamPrefix, g, i);
        w.tensors.push_back(to_named(base + "exp_avg", s.exp_avg()));
        w.tensors.push_back(to_named(base + "exp_avg_sq", s.exp_avg_sq()));
      }
      group_steps.push_back(step);
    }
    adam_steps.push_back(std::move(group_steps));
  }
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    const torch::Tensor state = gen.get_state();
    const auto* b = state.data_ptr<uint8_t>();
    w.tensors.push_back(NamedTensor{kTorchRngName, {state.numel()}, std::vector<float>(b, b + state.numel())});
  }
  const nlohmann::json trainer = {{"version", kCheckpointStateVersion},
                                  {"fingerprint", fmt::format("{:016x}", st.fingerprint)},
                                  {"threads", st.threads},
                                  {"epoch", st.epoch},
                                  {"batch", st.batch},
                                  {"step", st.step},
                                  {"loss_sum", st.loss_sum},
                                  {"seen", st.seen},
                                  {"epoch_seconds", st.epoch_seconds},
                                  {"since_best", st.since_best},
                                  {"best_valid_top1", st.best_valid_top1},
                                  {"best_epoch", st.best_epoch},
                                  {"finished", st.finished},
                                  {"rng", st.rng},
                                  {"adam_steps", adam_steps},
                                  {"best_metadata", best.metadata_json},
                                  {"log", log_entries_json(st.log)}};
  w.metadata_json = nlohmann::json{{"checkpoint", true}, {"epoch", st.log.size()}, {"trainer", trainer}}.dump();
  save_weights(w, path);
}

TrainerState load_checkpoint(const std::string& path, uint64_t expected_fingerprint, CostModelImpl& model,
                             torch::optim::Adam& opt, WeightsFile* best) {
  const WeightsFile w = load_weights(path);
  simdjson::dom::parser parser;
  simdjson::dom::element meta;
  if (parser.parse(w.metadata_json).get(meta) != simdjson::SUCCESS) bad(path, "its metadata is not JSON");
  simdjson::dom::object tr;
  if (meta["trainer"].get(tr) != simdjson::SUCCESS) {
    bad(path, "it has no training state (a model file, or a checkpoint of an older tclm)");
  }
  auto get_i = [&](const char* key) -> int64_t {
    int64_t v = 0;
    if (tr[key].get(v) != simdjson::SUCCESS) bad(path, fmt::format("\"trainer.{}\" is missing or not an integer", key));
    return v;
  };
  auto get_d = [&](const char* key) -> double {
    double v = 0;
    if (tr[key].get(v) != simdjson::SUCCESS) bad(path, fmt::format("\"trainer.{}\" is missing or not a number", key));
    return v;
  };
  auto get_s = [&](const char* key) -> std::string {
    std::string_view v;
    if (tr[key].get(v) != simdjson::SUCCESS) bad(path, fmt::format("\"trainer.{}\" is missing or not a string", key));
    return std::string(v);
  };
  if (get_i("version") != kCheckpointStateVersion) {
    bad(path, fmt::format("training-state version {} (this tclm writes {})", get_i("version"), kCheckpointStateVersion));
  }
  TrainerState st;
  {
    const std::string hex = get_s("fingerprint");
    char* end = nullptr;
    errno = 0;
    st.fingerprint = std::strtoull(hex.c_str(), &end, 16);
    if (hex.empty() || errno != 0 || *end != '\0') bad(path, "\"trainer.fingerprint\" is not a hexadecimal number");
  }
  if (st.fingerprint != expected_fingerprint) {
    throw Error(fmt::format(
        "{}: this checkpoint was written for other options or data (fingerprint {:016x}, this run {:016x}); resume "
        "with the same data, split and training options, or start again without --resume",
        path, st.fingerprint, expected_fingerprint));
  }
  st.threads = static_cast<int>(get_i("threads"));
  st.epoch = static_cast<int>(get_i("epoch"));
  st.batch = get_i("batch");
  st.step = get_i("step");
  st.loss_sum = get_d("loss_sum");
  st.seen = get_i("seen");
  st.epoch_seconds = get_d("epoch_seconds");
  st.since_best = static_cast<int>(get_i("since_best"));
  st.best_valid_top1 = get_d("best_valid_top1");
  st.best_epoch = static_cast<int>(get_i("best_epoch"));
  bool finished = false;
  if (tr["finished"].get(finished) != simdjson::SUCCESS) bad(path, "\"trainer.finished\" is missing");
  st.finished = finished;
  st.rng = get_s("rng");
  if (std::mt19937_64 probe; !rng_from_string(st.rng, &probe)) {
    bad(path, "\"trainer.rng\" is not a random generator state");
  }
  simdjson::dom::array log;
  if (tr["log"].get(log) != simdjson::SUCCESS) bad(path, "\"trainer.log\" is missing");
  for (simdjson::dom::element e : log) {
    simdjson::dom::array a;
    if (e.get(a) != simdjson::SUCCESS || (a.size() != 8 && a.size() != 10)) {
      bad(path, "a \"trainer.log\" entry is not 8 or 10 numbers");
    }
    double v[10] = {};
    size_t k = 0;
    for (simdjson::dom::element x : a) {
      if (x.get(v[k]) != simdjson::SUCCESS) bad(path, "a \"trainer.log\" entry is not 8 or 10 numbers");
      ++k;
    }
    st.log.push_back(EpochLog{static_cast<int>(v[0]), v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9]});
  }

  // The model and the best model.
  WeightsFile current = without_training_state(w);
  load_into_model(current, model);
  *best = WeightsFile{};
  if (st.best_epoch > 0) {
    best->model_kind = w.model_kind;
    best->feature_version = w.feature_version;
    best->config_json = w.config_json;
    best->metadata_json = get_s("best_metadata");
    for (const NamedTensor& t : w.tensors) {
      if (t.name.rfind(kBestPrefix, 0) == 0) {
        best->tensors.push_back(NamedTensor{t.name.substr(std::strlen(kBestPrefix)), t.shape, t.data});
      }
    }
    if (best->tensors.size() != current.tensors.size()) bad(path, "its best model is incomplete");
  }

  // Adam's state.
  simdjson::dom::array steps;
  if (tr["adam_steps"].get(steps) != simdjson::SUCCESS) bad(path, "\"trainer.adam_steps\" is missing");
  auto& groups = opt.param_groups();
  if (steps.size() != groups.size()) bad(path, "its optimizer has another number of parameter groups");
  size_t g = 0;
  for (simdjson::dom::element ge : steps) {
    simdjson::dom::array gs;
    if (ge.get(gs) != simdjson::SUCCESS || gs.size() != groups[g].params().size()) {
      bad(path, fmt::format("optimizer group {} has another number of parameters", g));
    }
    size_t i = 0;
    for (simdjson::dom::element se : gs) {
      int64_t step = 0;
      if (se.get(step) != simdjson::SUCCESS) bad(path, "\"trainer.adam_steps\" holds a non-integer");
      const torch::Tensor& p = groups[g].params()[i];
      if (step > 0) {
        const std::string base = fmt::format("{}{}.{}.", kAdamPrefix, g, i);
        const NamedTensor* m = w.find(base + "exp_avg");
        const NamedTensor* v = w.find(base + "exp_avg_sq");
        if (m == nullptr || v == nullptr) bad(path, "Adam's moments of " + base + " are missing");
        auto to_tensor = [&](const NamedTensor* t) {
          if (torch::IntArrayRef(t->shape) != p.sizes()) bad(path, t->name + " has the wrong shape");
          return torch::from_blob(const_cast<float*>(t->data.data()), t->shape, torch::kFloat32).clone();
        };
        auto state = std::make_unique<torch::optim::AdamParamState>();
        state->step(step);
        state->exp_avg(to_tensor(m));
        state->exp_avg_sq(to_tensor(v));
        opt.state()[adam_key(p)] = std::move(state);
      }
      ++i;
    }
    ++g;
  }

  // libtorch's generator (dropout masks of the following batches).
  const NamedTensor* rng = w.find(kTorchRngName);
  if (rng == nullptr) bad(path, "the libtorch generator state is missing");
  torch::Tensor state = torch::empty({static_cast<int64_t>(rng->data.size())}, torch::kUInt8);
  for (size_t k = 0; k < rng->data.size(); ++k) state.data_ptr<uint8_t>()[k] = static_cast<uint8_t>(rng->data[k]);
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  try {
    gen.set_state(state);
  } catch (const std::exception& e) {
    bad(path, std::string("the libtorch generator state does not load: ") + e.what());
  }
  return st;
}

}  // namespace tclm
