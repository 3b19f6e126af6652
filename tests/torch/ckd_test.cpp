// Tests of continual knowledge distillation (src/distill) and its loss: the listwise distillation
// loss against hand-computed values, the EWC penalty against its formula, Phi's rules, the constant
// size of the knowledge base, and what one learned platform does on real data.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "distill/ckd.h"
#include "test_util.h"
#include "train/losses.h"
#include "train/trainer.h"

using namespace tclm;

TEST(ListwiseDistill, ZeroForTheSameRankingScaleAndOffsetFree) {
  const auto mask = torch::tensor({{1.f, 1.f, 1.f, 0.f}});
  const auto teacher = torch::tensor({{0.1f, 0.3f, 0.2f, 9.f}});
  // An affine image of the teacher (scale 7, offset -3) ranks and spaces alike: loss 0.
  const auto student = teacher * 7.0f - 3.0f;
  EXPECT_NEAR(listwise_distill_loss(student, teacher, mask).item<double>(), 0.0, 1e-6);
  // The padding entry (9 / 60) is ignored.
  auto student2 = student.clone();
  student2[0][3] = -60.0f;
  EXPECT_NEAR(listwise_distill_loss(student2, teacher, mask).item<double>(), 0.0, 1e-6);
}

TEST(ListwiseDistill, MatchesAHandComputedKl) {
  // Two entries: standardized scores are -1 and +1 whatever the values; a reversed student gives
  // KL(p || q) with p = softmax(-1, 1), q = softmax(1, -1).
  const auto mask = torch::ones({1, 2});
  const auto teacher = torch::tensor({{0.f, 5.f}});
  const auto student = torch::tensor({{2.f, 1.f}});
  const double p1 = 1.0 / (1.0 + std::exp(-2.0)), p0 = 1.0 - p1;  // softmax(-1, 1)
  const double want = p0 * std::log(p0 / p1) + p1 * std::log(p1 / p0);
  EXPECT_NEAR(listwise_distill_loss(student, teacher, mask).item<double>(), want, 1e-5);
  // Gradients push the student towards the teacher's order.
  auto s = student.clone().requires_grad_(true);
  listwise_distill_loss(s, teacher, mask).backward();
  EXPECT_GT(s.grad()[0][0].item<float>(), 0.0f);  // lower the first
  EXPECT_LT(s.grad()[0][1].item<float>(), 0.0f);  // raise the second
}

namespace {

Dataset load_embedded(const std::string& platform, const std::string& dir) {
  return Dataset::load({DataSource::parse(platform + "=" + test::source_dir() + "/data/records/" + dir)},
                       LoadOptions{});
}

}  // namespace

TEST(Ckd, EwcPenaltyFollowsItsFormulaAndTheKbKeepsItsSize) {
  // One tiny platform learned -> Fisher and anchors exist; moving one parameter by delta changes the
  // penalty by F * delta^2 exactly.
  Dataset d = load_embedded("k80", "k80/pooling");
  Split s = make_split(d, SplitOptions{});
  CkdOptions o;
  o.kb = test::make_config(16);
  o.epochs_cl = 1;
  o.epochs_kd = 1;
  o.min_steps = 0;
  o.progress = false;
  KnowledgeBase kb(o.kb, 0);
  const int64_t params_before = kb.deployable("{}").num_parameters();
  EXPECT_FALSE(kb.has_fisher());
  EXPECT_EQ(kb.ewc_penalty().item<double>(), 0.0);
  std::vector<uint32_t> train = s.train;
  train.insert(train.end(), s.valid.begin(), s.valid.end());
  CkdPhaseLog log = learn_platform(kb, d, train, {}, "k80", o);
  EXPECT_EQ(log.phi, 0.0);  // the first platform has no teacher
  ASSERT_TRUE(kb.has_fisher());
  EXPECT_GT(log.fisher_mean, 0.0);
  EXPECT_NEAR(kb.ewc_penalty().item<double>(), 0.0, 1e-12);  // anchors = current parameters
  // Perturb every parameter by delta: penalty = delta^2 * sum F = delta^2 * mean F * count.
  const double delta = 0.01;
  int64_t count = 0;
  {
    torch::NoGradGuard ng;
    for (auto& p : kb.model()->parameters()) {
      p.add_(delta);
      count += p.numel();
    }
  }
  EXPECT_NEAR(kb.ewc_penalty().item<double>(), delta * delta * log.fisher_mean * static_cast<double>(count),
              1e-6 * delta * delta * log.fisher_mean * static_cast<double>(count));
  EXPECT_EQ(kb.deployable("{}").num_parameters(), params_before);
  EXPECT_EQ(kb.learned(), std::vector<std::string>{"k80"});
}

TEST(Ckd, PhiComesFromTheKbRankingOfTheNewPlatform) {
  Dataset d = load_embedded("k80", "k80/pooling");
  Split s = make_split(d, SplitOptions{});
  CkdOptions o;
  o.kb = test::make_config(16);
  o.epochs_cl = 1;
  o.epochs_kd = 1;
  o.min_steps = 0;
  o.progress = false;
  KnowledgeBase kb(o.kb, 0);
  learn_platform(kb, d, s.train, s.valid, "first", o);
  // Learning a second time (a stand-in for a second platform): Phi = the KB's top-1 gain over random,
  // clamped to [floor, 1], computed here from an independent evaluation of the KB before the phase.
  std::vector<uint32_t> all = s.train;
  const RankingReport r = evaluate_rankings(d, s.train, [&](const std::vector<uint32_t>& p) {
                            return predict_programs(kb.model(), d, p);
                          }).back();
  const double want = std::clamp((r.top1.task_mean - r.random_top1.task_mean) / (1.0 - r.random_top1.task_mean),
                                 o.phi_floor, 1.0);
  CkdPhaseLog log = learn_platform(kb, d, s.train, s.valid, "second", o);
  EXPECT_NEAR(log.kb_top1_before, r.top1.task_mean, 1e-9);
  EXPECT_NEAR(log.phi, want, 1e-9);
  o.dynamic_phi = false;
  EXPECT_EQ(learn_platform(kb, d, s.train, s.valid, "third", o).phi, 1.0);
  // Tasks of two platforms are refused.
  Dataset two = Dataset::load({DataSource::parse("a=" + test::source_dir() + "/data/records/k80/pooling"),
                               DataSource::parse("b=" + test::source_dir() + "/data/records/v100/pooling")},
                              LoadOptions{});
  Split s2 = make_split(two, SplitOptions{});
  EXPECT_NE(test::error_of([&] { learn_platform(kb, two, s2.train, {}, "mixed", o); }).find("mixed"),
            std::string::npos);
}
