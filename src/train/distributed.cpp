// train/distributed.cpp: c10d's TCPStore and ProcessGroupGloo behind DataParallel (train/distributed.h).
#include "train/distributed.h"

#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO 1  // ProcessGroupGloo.hpp declares the class only with this set (Debian builds it in)
#endif
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>

#include "common/timer.h"
#include "tclm/dataset.h"
#include "tclm/error.h"

namespace tclm {

namespace {

int env_int(const char* name, int fallback, bool required, int lo, int hi) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') {
    if (required) throw Error(fmt::format("data-parallel training: ${} is not set (with WORLD_SIZE > 1, every "
                                          "process needs RANK, MASTER_ADDR and MASTER_PORT; scripts/dist-run.sh "
                                          "sets them)", name));
    return fallback;
  }
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || x < lo || x > hi) {
    throw Error(fmt::format("data-parallel training: ${}='{}' is not an integer in [{}, {}]", name, v, lo, hi));
  }
  return static_cast<int>(x);
}

bool is_loopback(const std::string& addr) {
  return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1";
}

}  // namespace

DistOptions DistOptions::from_env() {
  DistOptions o;
  o.world = env_int("WORLD_SIZE", 1, false, 1, 1 << 16);
  if (o.world == 1) return o;
  o.rank = env_int("RANK", 0, true, 0, o.world - 1);
  const char* addr = std::getenv("MASTER_ADDR");
  if (addr == nullptr || *addr == '\0') env_int("MASTER_ADDR", 0, true, 0, 0);  // throws the message
  o.master_addr = addr;
  o.master_port = env_int("MASTER_PORT", 0, true, 1, 65535);
  return o;
}

struct DataParallel::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
};

DataParallel::DataParallel(const DistOptions& options) : options_(options), impl_(std::make_unique<Impl>()) {
  if (options.world < 1 || options.rank < 0 || options.rank >= options.world) {
    throw Error(fmt::format("data-parallel training: rank {} of {} does not exist", options.rank, options.world));
  }
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(options.timeout_seconds * 1000));
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<std::uint16_t>(options.master_port);
    so.isServer = options.rank == 0;
    so.numWorkers = static_cast<std::size_t>(options.world);
    so.waitWorkers = true;
    so.timeout = timeout;
    impl_->store = c10::make_intrusive<c10d::TCPStore>(options.master_addr, so);
    auto go = c10d::ProcessGroupGloo::Options::create(timeout);
    // The interface Gloo's connections use: GLOO_SOCKET_IFNAME (as in PyTorch), else loopback for a
    // loopback master (one machine), else the address this machine's hostname resolves to.
    if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname != nullptr && *ifname != '\0') {
      go->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    } else if (is_loopback(options.master_addr)) {
      go->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    } else {
      go->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    }
    go->threads = 1;
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>("tclm", impl_->store);
    impl_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, options.rank, options.world, go);
  } catch (const std::exception& e) {
    throw Error(fmt::format("data-parallel training: rank {} of {} could not join the others at {}:{} within {:.0f} s: "
                            "{} (every process needs the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE, and rank 0 "
                            "must be able to listen on that port)",
                            options.rank, options.world, options.master_addr, options.master_port,
                            options.timeout_seconds, e.what()));
  }
}

DataParallel::~DataParallel() = default;

// Runs one collective on `t`, its time added to *clock; a failure names this rank and the operation.
template <typename Collective>
void DataParallel::collective(torch::Tensor& t, const char* what, double* clock, Collective op) {
  if (options_.world == 1) return;
  const auto t0 = Clock::now();
  try {
    std::vector<torch::Tensor> tensors{t};
    op(*impl_->group, tensors)->wait();
  } catch (const std::exception& e) {
    throw Error(fmt::format("data-parallel training: rank {} of {} lost the other processes during {} (one of them "
                            "stopped or is unreachable): {}; every process stops, rerun with --resume",
                            options_.rank, options_.world, what, e.what()));
  }
  *clock += since(t0);
}

void DataParallel::all_reduce_sum(torch::Tensor& t, const char* what) {
  collective(t, what, &comm_seconds_, [](c10d::ProcessGroup& g, std::vector<torch::Tensor>& v) { return g.allreduce(v); });
}

void DataParallel::broadcast(torch::Tensor& t, const char* what) {
  collective(t, what, &comm_seconds_, [](c10d::ProcessGroup& g, std::vector<torch::Tensor>& v) { return g.broadcast(v); });
}

void DataParallel::wait_for_all(const char* what) {
  torch::Tensor one = torch::ones({1}, torch::kFloat32);
  collective(one, what, &wait_seconds_, [](c10d::ProcessGroup& g, std::vector<torch::Tensor>& v) { return g.allreduce(v); });
}

Batch DataParallel::owned_part(const Dataset& data, const Batch& batch) const {
  Batch mine;
  for (const auto& g : batch.groups) {
    if (!g.empty() && data.shard_of(data.task_of(g.front())) == options_.rank) mine.groups.push_back(g);
  }
  return mine;
}

void DataParallel::check_same(uint64_t value, const char* what) {
  torch::Tensor fp = torch::tensor({static_cast<int64_t>(value)}, torch::kInt64);
  broadcast(fp, "the check of the options");
  const auto theirs = static_cast<uint64_t>(fp.item<int64_t>());
  if (theirs != value) {
    throw Error(fmt::format("data-parallel {}: rank {}'s data or options differ from rank 0's (fingerprint {:016x} "
                            "against {:016x}); give every process the same command line and the same record files",
                            what, options_.rank, value, theirs));
  }
}

void DataParallel::broadcast_parameters(const std::vector<torch::Tensor>& params) {
  torch::NoGradGuard no_grad;
  for (const auto& p : params) {
    torch::Tensor t = p.detach();
    broadcast(t, "the broadcast of the parameters");
  }
}

ProgramScorer DataParallel::sharded(const Dataset& data, ProgramScorer local) {
  return [this, &data, local = std::move(local)](const std::vector<uint32_t>& programs) {
    std::vector<uint32_t> mine;
    std::vector<size_t> where;
    for (size_t i = 0; i < programs.size(); ++i) {
      if (data.shard_of(data.task_of(programs[i])) == options_.rank) {
        mine.push_back(programs[i]);
        where.push_back(i);
      }
    }
    torch::Tensor all = torch::zeros({static_cast<int64_t>(programs.size())}, torch::kFloat32);
    if (!mine.empty()) {
      const std::vector<float> s = local(mine);
      float* out = all.data_ptr<float>();
      for (size_t k = 0; k < mine.size(); ++k) out[where[k]] = s[k];
    }
    all_reduce_sum(all, "the evaluation");  // each score comes from one process, zeros from the others
    const float* p = all.data_ptr<float>();
    return std::vector<float>(p, p + programs.size());
  };
}

double backward_loss(const std::vector<LossPart>& parts, const torch::Tensor& global,
                     const std::vector<torch::Tensor>& params, DataParallel* dist) {
  if (dist != nullptr && dist->world() == 1) dist = nullptr;
  if (dist == nullptr) {
    torch::Tensor loss;
    for (const LossPart& p : parts) {
      if (!p.mean.defined()) continue;
      loss = loss.defined() ? loss + p.weight * p.mean : p.weight * p.mean;
    }
    if (global.defined()) loss = loss.defined() ? loss + global : global;
    if (!loss.defined()) return 0.0;
    const double value = loss.item<double>();
    if (std::isfinite(value) && loss.requires_grad()) loss.backward();
    return value;
  }
  // The normalizers of the whole batch, one per term.
  const auto k = static_cast<int64_t>(parts.size());
  torch::Tensor norms = torch::zeros({std::max<int64_t>(k, 1)}, torch::kFloat64);
  for (int64_t i = 0; i < k; ++i) norms.data_ptr<double>()[i] = parts[i].mean.defined() ? parts[i].normalizer : 0.0;
  dist->wait_for_all("the loss normalizers");  // the wait for the slowest forward pass, timed apart
  dist->all_reduce_sum(norms, "the loss normalizers");
  torch::Tensor local;
  for (int64_t i = 0; i < k; ++i) {
    const LossPart& p = parts[i];
    const double total = norms.data_ptr<double>()[i];
    if (!p.mean.defined() || p.normalizer <= 0 || total <= 0) continue;
    const torch::Tensor t = p.mean * (p.weight * p.normalizer / total);
    local = local.defined() ? local + t : t;
  }
  if (global.defined() && dist->rank() == 0) local = local.defined() ? local + global : global;
  double value = local.defined() ? local.item<double>() : 0.0;
  // A non-finite part still joins the all-reduce: its loss is then not finite on every process.
  if (local.defined() && std::isfinite(value) && local.requires_grad()) local.backward();
  int64_t n = 0;
  for (const auto& p : params) n += p.numel();
  const auto np = static_cast<int64_t>(params.size());
  torch::Tensor buf = torch::zeros({n + np + 1}, torch::kFloat32);
  float* b = buf.data_ptr<float>();
  int64_t off = 0;
  for (int64_t i = 0; i < np; ++i) {
    const torch::Tensor& g = params[i].grad();
    if (g.defined()) {
      buf.slice(0, off, off + params[i].numel()).copy_(g.reshape({-1}));
      b[n + i] = 1.0f;
    }
    off += params[i].numel();
  }
  b[n + np] = static_cast<float>(value);
  dist->wait_for_all("the gradient all-reduce");  // the wait for the slowest backward pass
  dist->all_reduce_sum(buf, "the gradient all-reduce");
  value = static_cast<double>(b[n + np]);
  off = 0;
  for (int64_t i = 0; i < np; ++i) {
    torch::Tensor p = params[i];
    if (b[n + i] > 0 && std::isfinite(value)) {
      p.mutable_grad() = buf.slice(0, off, off + p.numel()).reshape(p.sizes()).clone();
    } else {
      p.mutable_grad() = torch::Tensor();
    }
    off += p.numel();
  }
  return value;
}

}  // namespace tclm
