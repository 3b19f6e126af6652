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
#include "distill/ckd.h"
#include "tclm/dataset.h"
#include "tclm/error.h"
#include "train/active_sampling.h"
#include "train/batches.h"
#include "train/distributed.h"
#include "train/losses.h"
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

// The first `per_task` programs of each depthwise-convolution task of the given platforms' embedded
// records, as one process (shards = 1) or one of two keeps it. K80 with 96: 12 tasks, 1,152 programs (a
// few batches per epoch); K80 and V100 with 48: 24 tasks, 1,152 programs (the distillation tests).
Dataset small_depthwise(const std::vector<std::string>& platforms, size_t per_task, int shard, int shards) {
  LoadOptions lo;
  lo.shard = shard;
  lo.shards = shards;
  std::vector<DataSource> sources;
  for (const auto& p : platforms) {
    sources.push_back(DataSource::parse(p + "=" + test::source_dir() + "/data/records/" + p + "/depthwise"));
  }
  const Dataset d = Dataset::load(sources, lo);
  std::vector<uint32_t> keep;
  for (const Task& t : d.tasks()) {
    keep.insert(keep.end(), t.programs.begin(), t.programs.begin() + std::min(per_task, t.programs.size()));
  }
  return d.subset(keep);
}
Dataset small_k80(int shard, int shards) { return small_depthwise({"k80"}, 96, shard, shards); }
Dataset small_k80_v100(int shard, int shards) { return small_depthwise({"k80", "v100"}, 48, shard, shards); }

std::vector<uint32_t> tasks_of(const Dataset& d, const std::vector<uint32_t>& tasks, const std::string& platform) {
  std::vector<uint32_t> out;
  for (uint32_t t : tasks) {
    if (d.platforms()[d.tasks()[t].platform] == platform) out.push_back(t);
  }
  return out;
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

// Compares the gradients and losses two ranks held on every batch with one rank's: the losses within a
// relative 1e-5, the two ranks' gradients identical, and returns the largest difference from one rank's
// gradient relative to its largest entry.
double gradient_difference(const std::vector<std::vector<float>>& want, const std::vector<double>& want_loss,
                           const std::vector<std::vector<float>> (&got)[2], const std::vector<double> (&got_loss)[2]) {
  double worst = 0;
  for (size_t b = 0; b < want.size(); ++b) {
    double scale = 0;
    for (float g : want[b]) scale = std::max(scale, std::abs(double(g)));
    EXPECT_GT(scale, 0.0);
    for (int r = 0; r < 2; ++r) {
      EXPECT_NEAR(got_loss[r][b], want_loss[b], 1e-5 * want_loss[b]) << "batch " << b;
      EXPECT_EQ(got[r][b].size(), want[b].size());
      for (size_t k = 0; k < std::min(want[b].size(), got[r][b].size()); ++k) {
        worst = std::max(worst, std::abs(double(got[r][b][k]) - want[b][k]) / scale);
      }
    }
    EXPECT_EQ(got[0][b], got[1][b]) << "the ranks must hold the very same gradient, batch " << b;
  }
  std::printf("max |gradient difference| / max |gradient|: %.3g over %zu batches\n", worst, want.size());
  return worst;
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
  // float32 sums in another order: measured 2.1e-6 of the largest gradient entry.
  EXPECT_LT(gradient_difference(want, want_loss, got, got_loss), 1e-5);
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

TEST(DataParallel, LossOfSeveralTermsAndAParameterTermHasOneRanksGradient) {
  // A distillation step's loss: two means over rows with different normalizers (LambdaRank over the
  // groups with a pair, listwise distillation over the groups with two programs), one weighted, and a
  // term of the parameters alone (EWC's), which must be added once, not once per process. Two ranks
  // hold one rank's gradient of the whole, within float rounding, on every batch of an epoch.
  const Dataset all = small_k80(0, 1);
  TrainOptions o;
  o.batch_size = 256;
  o.group_size = 32;
  const auto w = initial_weights(o, all.feature_version());
  torch::manual_seed(23);
  CostModel teacher = make_cost_model(o);  // another model's scores as the distillation's teacher
  teacher->eval();
  std::vector<uint32_t> tasks(all.tasks().size());
  std::iota(tasks.begin(), tasks.end(), 0u);
  std::mt19937_64 rng(9);
  const std::vector<Batch> batches = make_batches(all, tasks, o.batch_size, o.group_size, rng);
  set_threads(1);
  // The loss of this process's part of batch b (all of it with dist null).
  auto step = [&](CostModelImpl& model, const Dataset& d, const Batch& b, DataParallel* dist, double* value) {
    const Batch mine = dist != nullptr ? dist->owned_part(d, b) : b;
    std::vector<LossPart> parts(2);
    if (!mine.groups.empty()) {
      const BatchTensors bt = to_tensors(d, mine, o.group_size);
      const auto s = bt.to_grid(model.forward(bt.x, bt.mask));
      parts[0].mean = lambdarank_loss(s, bt.labels, bt.label_mask, &parts[0].normalizer);
      torch::Tensor t;
      {
        torch::NoGradGuard ng;
        t = bt.to_grid(teacher->forward(bt.x, bt.mask));
      }
      parts[1].mean = listwise_distill_loss(s, t, bt.label_mask, 1.0, &parts[1].normalizer);
      parts[1].weight = 0.7;
    }
    torch::Tensor global = torch::zeros({});
    for (const auto& p : model.parameters()) global = global + 0.05 * p.pow(2).sum();
    model.zero_grad();
    *value = backward_loss(parts, global, model.parameters(), dist);
    return flat_gradient(model);
  };
  std::vector<std::vector<float>> want;
  std::vector<double> want_loss;
  {
    CostModel model = make_cost_model(o);
    load_into_model(*w, *model);
    for (const Batch& b : batches) {
      double v = 0;
      want.push_back(step(*model, all, b, nullptr, &v));
      want_loss.push_back(v);
    }
  }
  std::vector<std::vector<float>> got[2];
  std::vector<double> got_loss[2];
  const auto errors = on_two_ranks([&](int r, std::shared_ptr<DataParallel> dist) {
    const Dataset d = small_k80(r, 2);
    CostModel model = make_cost_model(o);
    load_into_model(*w, *model);
    for (const Batch& b : batches) {
      double v = 0;
      got[r].push_back(step(*model, d, b, dist.get(), &v));
      got_loss[r].push_back(v);
    }
  });
  ASSERT_EQ(errors[0], "");
  ASSERT_EQ(errors[1], "");
  // The parameter term's gradient (0.1 * theta) is of the order of the largest entries: counted twice,
  // the difference is 0.13 of them (measured); measured 1.7e-6 as it is.
  EXPECT_LT(gradient_difference(want, want_loss, got, got_loss), 1e-5);
}

TEST(DataParallel, TwoRanksDistilLikeOneRank) {
  // Continual knowledge distillation of two platforms (CL, KD with EWC, the Fisher pass) as two ranks:
  // both end with the same knowledge base bit for bit, the KB's figures before the first phase (same
  // weights, same programs) are one rank's, the second phase's Phi and the first phase's Fisher
  // information (a sum over lists split between the ranks) are one rank's up to the float rounding
  // that Adam amplifies over the first phase, and the held-out ranking of the KB is as good as one
  // rank's.
  const Dataset all = small_k80_v100(0, 1);
  SplitOptions so;
  so.test_fraction = 0.25;
  so.valid_fraction = 0.2;
  const Split split = make_split(all, so);
  CkdOptions o;
  o.epochs_cl = 2;
  o.epochs_kd = 2;
  o.min_steps = 0;
  o.batch_size = 256;
  o.group_size = 24;
  o.seed = 4;
  o.lambda = 1e4;  // EWC's penalty in the second KD phase, from the first phase's Fisher summed over both ranks
  o.progress = false;
  set_threads(1);
  struct Run {
    std::vector<CkdPhaseLog> logs;
    WeightsFile kb;
    std::vector<RankingReport> test;  // per platform, the KB at the end
  };
  // The ranks are threads of this process, so they share libtorch's one generator: a KB built in each
  // thread could draw its initial weights interleaved with the other thread's draws, and rank 0's
  // (broadcast to both) would then not be the seeded one. Every KB is built here, one after another, as
  // each process of a real run builds its own.
  auto run = [&](KnowledgeBase& kb, const Dataset& d, std::shared_ptr<DataParallel> dist) {
    CkdOptions co = o;
    co.dist = dist;
    Run r;
    for (const char* p : {"k80", "v100"}) {
      r.logs.push_back(learn_platform(kb, d, tasks_of(d, split.train, p), tasks_of(d, split.valid, p), p, co));
    }
    r.kb = kb.deployable("{}");
    ProgramScorer scorer = [&](const std::vector<uint32_t>& p) { return predict_programs(kb.model(), d, p); };
    if (dist) scorer = dist->sharded(d, scorer);
    for (const char* p : {"k80", "v100"}) r.test.push_back(evaluate_rankings(d, tasks_of(d, split.test, p), scorer).back());
    return r;
  };
  KnowledgeBase one_kb(o.kb, 4);
  const Run one = run(one_kb, all, nullptr);
  std::vector<KnowledgeBase> kbs;
  kbs.reserve(2);
  for (int r = 0; r < 2; ++r) kbs.emplace_back(o.kb, 4);
  Run two[2];
  const auto errors = on_two_ranks([&](int r, std::shared_ptr<DataParallel> dist) {
    two[r] = run(kbs[r], small_k80_v100(r, 2), dist);
  });
  ASSERT_EQ(errors[0], "");
  ASSERT_EQ(errors[1], "");
  ASSERT_EQ(two[0].kb.tensors.size(), one.kb.tensors.size());
  for (size_t i = 0; i < one.kb.tensors.size(); ++i) EXPECT_EQ(two[0].kb.tensors[i].data, two[1].kb.tensors[i].data);
  EXPECT_NEAR(two[0].logs[0].kb_top1_before, one.logs[0].kb_top1_before, 1e-6);
  EXPECT_NEAR(two[0].logs[0].kb_pairwise_before, one.logs[0].kb_pairwise_before, 1e-6);
  for (int ph = 0; ph < 2; ++ph) {
    const CkdPhaseLog &a = one.logs[ph], &b = two[0].logs[ph];
    std::printf("%s: phi %.4f / %.4f, KD valid pairwise %.4f / %.4f, Fisher mean %.4g / %.4g (one rank / two)\n",
                a.platform.c_str(), a.phi, b.phi, a.kd_valid_pairwise.back(), b.kd_valid_pairwise.back(), a.fisher_mean,
                b.fisher_mean);
    EXPECT_EQ(b.phi, two[1].logs[ph].phi);
    EXPECT_NEAR(b.phi, a.phi, 0.05);
    // The first phase's Fisher comes from nearly the same KB on both (measured 0.3% apart). After the
    // second phase the two KBs differ by the rounding Adam amplified over two phases, and a mean of
    // squared gradients moves far more than the rankings do (measured 15-28% apart, with and without
    // EWC, while the pairwise accuracies agree within 0.001); there it is only checked to accumulate.
    if (ph == 0) {
      EXPECT_NEAR(b.fisher_mean, a.fisher_mean, 0.05 * a.fisher_mean);
    } else {
      EXPECT_GT(b.fisher_mean, two[0].logs[0].fisher_mean);
      EXPECT_GT(a.fisher_mean, one.logs[0].fisher_mean);
    }
    EXPECT_NEAR(b.kd_valid_pairwise.back(), a.kd_valid_pairwise.back(), 0.02);
  }
  for (size_t p = 0; p < 2; ++p) {
    std::printf("test pairwise %.4f / %.4f, top-1 task mean %.4f / %.4f\n", one.test[p].pairwise, two[0].test[p].pairwise,
                one.test[p].top1.task_mean, two[0].test[p].top1.task_mean);
    EXPECT_NEAR(two[0].test[p].pairwise, one.test[p].pairwise, 0.02);
  }
}

TEST(DataParallel, TwoRanksPickWhatOneRankPicks) {
  // The sampler picks per task from the task's own programs and seed, so two ranks, each picking the
  // tasks it owns, return one rank's picks (k-center: no model between rounds; with RDU the between-round
  // model is trained data-parallel and its MC-dropout masks differ, so only the count is fixed).
  const Dataset all = small_k80(0, 1);
  std::vector<uint32_t> tasks(all.tasks().size());
  std::iota(tasks.begin(), tasks.end(), 0u);
  ActiveSamplingOptions a;
  a.sampler.method = SampleMethod::kKCenter;
  a.sampler.seed = 5;
  a.per_task.fraction = 0.2;
  a.threads = 1;
  const std::vector<uint32_t> one = active_select(all, tasks, a);
  ASSERT_FALSE(one.empty());
  std::vector<uint32_t> two[2];
  size_t rdu[2] = {0, 0};
  const auto errors = on_two_ranks([&](int r, std::shared_ptr<DataParallel> dist) {
    const Dataset d = small_k80(r, 2);
    ActiveSamplingOptions ra = a;
    ra.dist = dist;
    two[r] = active_select(d, tasks, ra);
    ra.sampler.method = SampleMethod::kRdu;
    ra.round_min_steps = 4;
    ra.round_epochs = 1;
    rdu[r] = active_select(d, tasks, ra).size();
  });
  ASSERT_EQ(errors[0], "");
  ASSERT_EQ(errors[1], "");
  EXPECT_EQ(two[0], one);
  EXPECT_EQ(two[1], one);
  EXPECT_EQ(rdu[0], one.size());
  EXPECT_EQ(rdu[1], one.size());
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
