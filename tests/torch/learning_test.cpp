// Learning test on real data: a Mamba cost model trained on the embedded K80 records must rank the
// programs of workloads it never saw clearly better than a random ranking of the same tasks.
#include <gtest/gtest.h>

#include <algorithm>

#include "test_util.h"
#include "tclm/dataset.h"
#include "tclm/error.h"
#include "tclm/evaluation.h"
#include "train/trainer.h"

using namespace tclm;

TEST(Learning, BeatsRandomRankingOnHeldOutWorkloads) {
  const std::string data = test::source_dir() + "/data/records/k80";
  Dataset d = Dataset::load({DataSource::parse("k80=" + data)}, LoadOptions{});
  ASSERT_GT(d.num_programs(), 20000u);
  SplitOptions so;
  so.test_fraction = 0.3;
  so.valid_fraction = 0.1;
  Split s = make_split(d, so);
  ASSERT_GE(s.test.size(), 5u);

  TrainOptions o;
  o.epochs = 4;
  o.patience = 100;
  o.progress = false;
  TrainResult r = train_cost_model(d, s, o);
  ASSERT_EQ(r.log.size(), 4u);
  // The training loss must fall (LambdaRank, averaged over groups).
  EXPECT_LT(r.log.back().train_loss, 0.8 * r.log.front().train_loss);

  CostModel model = load_cost_model(r.best, "best");
  auto reports = evaluate_rankings(d, s.test, [&](const std::vector<uint32_t>& p) {
    return predict_programs(model, d, p);
  });
  ASSERT_EQ(reports.size(), 1u);
  const RankingReport& rep = reports[0];
  std::printf("held-out k80 tasks %d: top-1 task mean %.4f (random %.4f), pooled %.4f (random %.4f), "
              "top-5 pooled %.4f (random %.4f), pairwise %.4f\n",
              rep.tasks, rep.top1.task_mean, rep.random_top1.task_mean, rep.top1.pooled, rep.random_top1.pooled,
              rep.top5.pooled, rep.random_top5.pooled, rep.pairwise);
  // Random top-1 is the mean latency, around 0.15-0.2 of the best on these logs; a model that
  // learned anything about the schedules puts a near-best program first on most tasks.
  EXPECT_GT(rep.top1.task_mean, rep.random_top1.task_mean + 0.3);
  EXPECT_GT(rep.top1.pooled, rep.random_top1.pooled + 0.1);
  EXPECT_GT(rep.pairwise, 0.55);
}

TEST(Learning, SavedModelRefusesAnotherFeatureVersion) {
  MambaConfig cfg;
  cfg.n_features = kStepFeatureDim;
  MambaCostModel model(cfg);
  WeightsFile w;
  export_to_weights(model, &w);
  w.feature_version = kFeatureVersion;
  EXPECT_NO_THROW(load_cost_model(w, "ok"));
  w.feature_version = kFeatureVersion + 1;
  try {
    load_cost_model(w, "old.tclm");
    FAIL() << "a model of another feature version was accepted";
  } catch (const std::exception& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("old.tclm"), std::string::npos) << msg;
    EXPECT_NE(msg.find("feature encoding"), std::string::npos) << msg;
  }
}

// Numerics (docs/reliability.md): a run that diverges stops with a message naming the cause and what
// to do, instead of writing a NaN model.
TEST(Learning, DivergedTrainingStopsWithAClearError) {
  Dataset d = Dataset::load({DataSource::parse("k80=" + test::source_dir() + "/data/records/k80/pooling")}, LoadOptions{});
  SplitOptions so;
  so.test_fraction = 0.2;
  Split s = make_split(d, so);
  TrainOptions o;
  o.epochs = 3;
  o.progress = false;
  o.lr = 1e35;  // Adam's first steps move every weight by ~lr: the activations overflow to inf
  o.warmup_fraction = 0;
  try {
    train_cost_model(d, s, o);
    FAIL() << "training with lr 1e35 did not diverge or was not caught";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("training diverged: the loss is"), std::string::npos) << msg;
    EXPECT_NE(msg.find("lower --lr"), std::string::npos) << msg;
  }
}

// The best-model choice skips epochs inside the learning-rate warm-up (trainer.h,
// first_selectable_epoch): hand-computed boundaries, then a run whose epochs all score the same
// (lr 1e-30: Adam moves no float32 weight), where a tie keeps the earliest selectable epoch.
TEST(Learning, BestModelIsNeverAWarmUpEpoch) {
  EXPECT_EQ(first_selectable_epoch(7, 406, 0.05), 3);   // warm-up floor(20.3) = 20 steps: epoch 3 ends at 21
  EXPECT_EQ(first_selectable_epoch(90, 540, 0.05), 1);  // warm-up 27 steps, inside the first epoch
  EXPECT_EQ(first_selectable_epoch(10, 30, 0.0), 1);    // no warm-up: max(1, 0) = 1 step
  EXPECT_EQ(first_selectable_epoch(10, 30, 0.99), 3);   // 29 steps of warm-up: only the last epoch
  EXPECT_EQ(first_selectable_epoch(10, 40, 0.5), 2);    // warm-up ends exactly with epoch 2

  Dataset d = Dataset::load({DataSource::parse("k80=" + test::source_dir() + "/data/records/k80/pooling")}, LoadOptions{});
  SplitOptions so;
  so.test_fraction = 0.2;
  Split s = make_split(d, so);
  for (const auto& [warmup, want] : std::vector<std::pair<double, int>>{{0.99, 3}, {0.0, 1}}) {
    TrainOptions o;
    o.epochs = 3;
    o.patience = 3;
    o.progress = false;
    o.lr = 1e-30;
    o.warmup_fraction = warmup;
    TrainResult r = train_cost_model(d, s, o);
    ASSERT_EQ(r.log.size(), 3u);
    EXPECT_EQ(r.log[0].valid_top1, r.log[2].valid_top1) << "the epochs were meant to tie";
    EXPECT_EQ(r.best_epoch, want) << "warm-up fraction " << warmup;
  }
}

// The kept epoch is the best of the run's own log by the rule's figure (a naive maximum over the
// log, patience large enough for every epoch to run); "last" keeps the last epoch and never stops
// early, even with patience 1; an unknown rule's name is refused by parse_select_rule, naming the rules.
TEST(Learning, KeptEpochIsTheBestOfTheLogByTheSelectionRule) {
  Dataset d = Dataset::load({DataSource::parse("k80=" + test::source_dir() + "/data/records/k80/pooling")}, LoadOptions{});
  SplitOptions so;
  so.test_fraction = 0.2;
  Split s = make_split(d, so);
  ASSERT_FALSE(s.valid.empty());
  for (const SelectRule rule : {SelectRule::kPairwise, SelectRule::kTop1, SelectRule::kTop5}) {
    TrainOptions o;
    o.epochs = 5;
    o.patience = 100;
    o.warmup_fraction = 0.0;  // every epoch selectable
    o.progress = false;
    o.select = rule;
    TrainResult r = train_cost_model(d, s, o);
    ASSERT_EQ(r.log.size(), 5u);
    double best = -1;
    for (const EpochLog& e : r.log) best = std::max(best, selection_key(rule, e).first);
    ASSERT_GE(r.best_epoch, 1);
    EXPECT_NEAR(selection_key(rule, r.log[r.best_epoch - 1]).first, best, 1e-9) << to_string(rule);
    EXPECT_EQ(r.best_valid_top1, r.log[r.best_epoch - 1].valid_top1) << to_string(rule);
  }
  TrainOptions o;
  o.epochs = 4;
  o.patience = 1;
  o.progress = false;
  o.select = SelectRule::kLast;
  TrainResult r = train_cost_model(d, s, o);
  EXPECT_EQ(r.log.size(), 4u);
  EXPECT_EQ(r.best_epoch, 4);
  try {
    parse_select_rule("top-1");
    ADD_FAILURE() << "an unknown rule was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pairwise, top1, top5, last"), std::string::npos) << e.what();
  }
}

// The rules on made-up log entries where the figures disagree, against the fields they name, and the
// tolerances of better_epoch (1e-9 on the key, 1e-6 on the tie-breaker).
TEST(Learning, SelectionRulesCompareTheFiguresTheyName) {
  EpochLog a, b;
  a.epoch = 3;
  a.valid_top1 = 0.90;
  a.valid_top5 = 0.95;
  a.valid_pairwise = 0.60;
  b.epoch = 4;
  b.valid_top1 = 0.80;
  b.valid_top5 = 0.97;
  b.valid_pairwise = 0.70;
  const SelectRule pairwise = SelectRule::kPairwise, top1 = SelectRule::kTop1, top5 = SelectRule::kTop5,
                   last = SelectRule::kLast;
  EXPECT_TRUE(better_epoch(pairwise, b, a));   // 0.70 > 0.60, although its top-1 is lower
  EXPECT_FALSE(better_epoch(pairwise, a, b));
  EXPECT_TRUE(better_epoch(top1, a, b));       // 0.90 > 0.80, although its pairwise is lower
  EXPECT_FALSE(better_epoch(top1, b, a));
  EXPECT_TRUE(better_epoch(top5, b, a));       // 0.97 > 0.95
  EXPECT_TRUE(better_epoch(last, b, a));       // a later epoch always replaces
  EXPECT_FALSE(better_epoch(last, a, b));
  // Ties: an equal key within 1e-9 is decided by the tie-breaker, which must win by more than 1e-6.
  EpochLog c = a;
  c.valid_pairwise = a.valid_pairwise + 5e-10;
  c.valid_top1 = a.valid_top1 + 2e-6;
  EXPECT_TRUE(better_epoch(pairwise, c, a));
  c.valid_top1 = a.valid_top1 + 5e-7;
  EXPECT_FALSE(better_epoch(pairwise, c, a));
  c.valid_pairwise = a.valid_pairwise + 2e-9;  // a higher key by more than 1e-9 wins outright
  EXPECT_TRUE(better_epoch(pairwise, c, a));
  EXPECT_EQ(selection_key(pairwise, b), std::make_pair(0.70, 0.80));
  EXPECT_EQ(selection_key(top1, b), std::make_pair(0.80, 0.70));
  EXPECT_EQ(selection_key(top5, b), std::make_pair(0.97, 0.70));
  // The names in files and on the command line map to the rules and back.
  for (const std::string& name : selection_rules()) EXPECT_EQ(to_string(parse_select_rule(name)), name);
  EXPECT_EQ(parse_select_rule("top5"), SelectRule::kTop5);
  EXPECT_THROW(parse_select_rule("loss"), Error);
  EXPECT_EQ(parse_loss("mse"), Loss::kMse);
  EXPECT_EQ(to_string(Loss::kLambdaRank), "lambdarank");
  EXPECT_THROW(parse_loss("hinge"), Error);
  for (const std::string& name : model_kind_names()) EXPECT_EQ(to_string(parse_model_kind(name)), name);
  EXPECT_EQ(parse_model_kind("mamba-mtl"), ModelKind::kMambaMtl);
  EXPECT_THROW(parse_model_kind("xgboost"), Error);  // not a neural cost model (model/xgboost_model.h)
}
