// Data-parallel training (train/distributed.h) on real records: two ranks, each keeping the steps of its
// shard of the tasks, train the model one rank trains with the same options and seed. The ranks run as
// two threads of this test (each with its own TCPStore client and Gloo process group on 127.0.0.1);
// tests/cli/distributed.sh runs them as processes, with a rank killed mid-run.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <thread>

#include "test_util.h"
#include "tclm/dataset.h"
#include "tclm/error.h"
#include "train/batches.h"
#include "train/distributed.h"
#include "train/trainer.h"

using namespace tclm;

namespace {

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) ::close(fd);
    return 0;
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

// The data both tests use: the first 96 programs of each depthwise-convolution task of the K80 (12
// tasks, 1,152 programs: a few batches per epoch), as one process (shards = 1) or one of two keeps it.
Dataset small_k80(int shard, int shards) {
  LoadOptions lo;
  lo.shard = shard;
  lo.shards = shards;
  const Dataset d = Dataset::load({DataSource::parse("k80=" + test::source_dir() + "/data/records/k80/depthwise")}, lo);
  std::vector<uint32_t> keep;
  for (const Task& t : d.tasks()) {
    keep.insert(keep.end(), t.programs.begin(), t.programs.begin() + std::min<size_t>(96, t.programs.size()));
  }
  return d.subset(keep);
}

// Runs f(rank, dist) on two threads, each with its own DataParallel on 127.0.0.1; returns the errors.
template <typename F>
std::vector<std::string> on_two_ranks(F f) {
  const int port = free_port();
  std::vector<std::string> error(2);
  std::thread rank[2];
  for (int r = 0; r < 2; ++r) {
    rank[r] = std::thread([&, r] {
      try {
        DistOptions o;
        o.rank = r;
        o.world = 2;
        o.master_port = port;
        o.timeout_seconds = 120;
        f(r, std::make_shared<DataParallel>(o));
      } catch (const std::exception& e) {
        error[r] = e.what();
      }
    });
  }
  for (auto& t : rank) t.join();
  return error;
}

std::shared_ptr<WeightsFile> initial_weights(const TrainOptions& o, uint32_t feature_version) {
  torch::manual_seed(11);
  CostModel init = make_cost_model(o);
  auto w = std::make_shared<WeightsFile>();
  export_to_weights(*init, w.get());
  w->feature_version = feature_version;
  return w;
}

std::vector<float> flat_gradient(CostModelImpl& model) {
  std::vector<float> g;
  for (const auto& p : model.parameters()) {
    const torch::Tensor t = p.grad().defined() ? p.grad().contiguous() : torch::zeros_like(p);
    g.insert(g.end(), t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
  }
  return g;
}

}  // namespace

TEST(DataParallel, TwoRanksComputeTheGradientOfOneRank) {
  // Every batch of an epoch: the gradient two ranks hold after the all-reduce (each computed the groups
  // of its own tasks) is the gradient one rank computes for the whole batch, up to float rounding.
  const Dataset all = small_k80(0, 1);
  TrainOptions o;
  o.batch_size = 256;
  o.group_size = 32;
  const auto w = initial_weights(o, all.feature_version());
  std::vector<uint32_t> tasks(all.tasks().size());
  std::iota(tasks.begin(), tasks.end(), 0u);
  std::mt19937_64 rng(5);
  const std::vector<Batch> batches = make_batches(all, tasks, o.batch_size, o.group_size, rng);
  ASSERT_GE(batches.size(), 3u);
  set_threads(1);
  std::vector<std::vector<float>> want;
  std::vector<double> want_loss;
  {
    CostModel model = make_cost_model(o);
    load_into_model(*w, *model);
    for (const Batch& b : batches) {
      model->zero_grad();
      want_loss.push_back(batch_gradient(*model, all, b, o.group_size, Loss::kLambdaRank));
      want.push_back(flat_gradient(*model));
    }
  }
  std::vector<std::vector<float>> got[2];
  std::vector<double> got_loss[2];
  int parts[2] = {0, 0};
  const auto errors = on_two_ranks([&](int r, std::shared_ptr<DataParallel> dist) {
    const Dataset d = small_k80(r, 2);
    CostModel model = make_cost_model(o);
    load_into_model(*w, *model);
    for (const Batch& b : batches) {
      for (const auto& g : b.groups) parts[r] += d.has_steps(g.front());
      model->zero_grad();
      got_loss[r].push_back(batch_gradient(*model, d, b, o.group_size, Loss::kLambdaRank, dist.get()));
      got[r].push_back(flat_gradient(*model));
    }
  });
  ASSERT_EQ(errors[0], "");
  ASSERT_EQ(errors[1], "");
  EXPECT_GT(parts[0], 0);  // both ranks computed some of the groups
  EXPECT_GT(parts[1], 0);
  double worst = 0;
  for (size_t b = 0; b < batches.size(); ++b) {
    double scale = 0;
    for (float g : want[b]) scale = std::max(scale, std::abs(double(g)));
    ASSERT_GT(scale, 0.0);
    for (int r = 0; r < 2; ++r) {
      EXPECT_NEAR(got_loss[r][b], want_loss[b], 1e-5 * want_loss[b]) << "batch " << b;
      ASSERT_EQ(got[r][b].size(), want[b].size());
      for (size_t k = 0; k < want[b].size(); ++k) worst = std::max(worst, std::abs(double(got[r][b][k]) - want[b][k]) / scale);
    }
    EXPECT_EQ(got[0][b], got[1][b]) << "the ranks must hold the very same gradient, batch " << b;
  }
  // float32 sums in another order: measured 2.8e-6 of the largest gradient entry.
  std::printf("max |gradient difference| / max |gradient|: %.3g over %zu batches\n", worst, batches.size());
  EXPECT_LT(worst, 1e-5);
}

TEST(DataParallel, TwoRanksTrainOneModel) {
  // Whole training runs: both ranks end with the same weights, bit for bit, and the run trains (its
  // validation ranking is as good as one rank's). Exact equality with one rank's weights is not
  // expected: Adam's first steps move every weight by about the learning rate in the direction of its
  // gradient's sign, and weights whose gradient is zero up to rounding get a sign from the summation
  // order (docs/distributed.md).
  const Dataset all = small_k80(0, 1);
  SplitOptions so;
  so.test_fraction = 0.2;
  so.valid_fraction = 0.2;
  const Split split = make_split(all, so);
  TrainOptions o;
  o.epochs = 3;
  o.patience = 100;
  o.batch_size = 256;
  o.group_size = 32;
  o.threads = 1;
  o.seed = 3;
  o.progress = false;
  o.init = initial_weights(o, all.feature_version());
  const TrainResult one = train_cost_model(all, split, o);
  TrainResult part[2];
  const auto errors = on_two_ranks([&](int r, std::shared_ptr<DataParallel> dist) {
    const Dataset d = small_k80(r, 2);
    TrainOptions ro = o;
    ro.dist = dist;
    part[r] = train_cost_model(d, make_split(d, so), ro);
  });
  ASSERT_EQ(errors[0], "");
  ASSERT_EQ(errors[1], "");
  ASSERT_EQ(part[0].log.size(), one.log.size());
  ASSERT_EQ(part[0].best.tensors.size(), one.best.tensors.size());
  for (size_t i = 0; i < one.best.tensors.size(); ++i) EXPECT_EQ(part[0].best.tensors[i].data, part[1].best.tensors[i].data);
  for (size_t e = 0; e < one.log.size(); ++e) {
    EXPECT_EQ(part[0].log[e].valid_pairwise, part[1].log[e].valid_pairwise);
    std::printf("epoch %zu: loss %.4f / %.4f, valid pairwise %.4f / %.4f (one rank / two)\n", e + 1,
                one.log[e].train_loss, part[0].log[e].train_loss, one.log[e].valid_pairwise, part[0].log[e].valid_pairwise);
    // Measured: validation pairwise accuracy within 0.001 of one rank's in every epoch.
    EXPECT_NEAR(part[0].log[e].valid_pairwise, one.log[e].valid_pairwise, 0.01);
  }
  EXPECT_NEAR(part[0].log[0].train_loss, one.log[0].train_loss, 0.005 * one.log[0].train_loss);
  EXPECT_GT(part[0].log.back().comm_seconds, 0.0);
  double differ = 0, moved = 0;
  for (size_t i = 0; i < one.best.tensors.size(); ++i) {
    for (size_t k = 0; k < one.best.tensors[i].data.size(); ++k) {
      const double w1 = one.best.tensors[i].data[k];
      differ = std::max(differ, std::abs(w1 - part[0].best.tensors[i].data[k]));
      moved = std::max(moved, std::abs(w1 - o.init->tensors[i].data[k]));
    }
  }
  std::printf("weights: max |one rank - two ranks| %.2g, max |trained - initial| %.2g\n", differ, moved);
  EXPECT_GT(moved, 0.0);
}

TEST(DataParallel, EnvironmentIsCheckedWithTheVariableNamed) {
  ::setenv("WORLD_SIZE", "2", 1);
  ::unsetenv("RANK");
  EXPECT_NE(test::error_of([] { DistOptions::from_env(); }).find("$RANK is not set"), std::string::npos);
  ::setenv("RANK", "2", 1);
  EXPECT_NE(test::error_of([] { DistOptions::from_env(); }).find("$RANK='2' is not an integer in [0, 1]"),
            std::string::npos);
  ::setenv("RANK", "1", 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", "http", 1);
  EXPECT_NE(test::error_of([] { DistOptions::from_env(); }).find("$MASTER_PORT='http'"), std::string::npos);
  ::setenv("MASTER_PORT", "29511", 1);
  const DistOptions d = DistOptions::from_env();
  EXPECT_EQ(d.rank, 1);
  EXPECT_EQ(d.world, 2);
  EXPECT_EQ(d.master_port, 29511);
  for (const char* v : {"WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT"}) ::unsetenv(v);
  EXPECT_EQ(DistOptions::from_env().world, 1);
}
