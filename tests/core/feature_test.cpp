// Tests of the step encoding v2 (docs/feature-encoding.md): values computed by hand from the layout.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tclm/feature.h"

using namespace tclm;

namespace {
TransformStep step(StepKind k, std::vector<int64_t> ints, std::string str = "", int list_pos = -1, int n_list = -1) {
  TransformStep s;
  s.kind = k;
  s.ints = std::move(ints);
  s.str = std::move(str);
  s.list_pos = list_pos;
  s.n_list = n_list;
  return s;
}
std::vector<float> feat(const TransformStep& s) {
  std::vector<float> v(kStepFeatureDim);
  featurize_step(view_of(s), v.data());
  return v;
}
}  // namespace

TEST(Feature, LayoutIsConsistent) {
  EXPECT_EQ(slot::kGeneric + slot::kNumGeneric, slot::kLoopExtent);
  EXPECT_EQ(slot::kExtentKnown + 1, kStepFeatureDim);
  EXPECT_EQ(slot::kStage, kNumAnsorStepKinds);
}

TEST(Feature, LogMagnitude) {
  EXPECT_FLOAT_EQ(log_magnitude(0), 0.0f);
  EXPECT_FLOAT_EQ(log_magnitude(255), 1.0f);   // log2(256) / 8
  EXPECT_FLOAT_EQ(log_magnitude(-3), -0.25f);  // -log2(4) / 8
}

TEST(Feature, SplitStep) {
  // ["SP", 2, 4, 128, [4, 1, 2], 1]
  auto v = feat(step(StepKind::kSplit, {2, 4, 128, 4, 1, 2, 1}, "", 3, 3));
  EXPECT_EQ(v[slot::kKind + static_cast<int>(StepKind::kSplit)], 1.0f);
  float kind_sum = 0;
  for (int i = 0; i < kNumAnsorStepKinds; ++i) kind_sum += v[i];
  EXPECT_EQ(kind_sum, 1.0f);
  EXPECT_FLOAT_EQ(v[slot::kStage], 2.0f / 32);
  EXPECT_FLOAT_EQ(v[slot::kIter], 4.0f / 32);
  EXPECT_FLOAT_EQ(v[slot::kExtent], std::log2(129.0f) / 8);
  EXPECT_FLOAT_EQ(v[slot::kNumLengths], 3.0f / 4);
  EXPECT_FLOAT_EQ(v[slot::kLengths + 0], std::log2(5.0f) / 8);
  EXPECT_FLOAT_EQ(v[slot::kLengths + 1], std::log2(2.0f) / 8);
  EXPECT_FLOAT_EQ(v[slot::kLengths + 2], std::log2(3.0f) / 8);
  EXPECT_FLOAT_EQ(v[slot::kLengths + 3], 0.0f);
  EXPECT_FLOAT_EQ(v[slot::kLengthProduct], std::log2(9.0f) / 8);  // 4*1*2 = 8
  EXPECT_FLOAT_EQ(v[slot::kInnerToOuter], 1.0f);
  EXPECT_FLOAT_EQ(v[slot::kListSize], std::log2(4.0f) / 8);
  for (int g = 0; g < slot::kNumGeneric; ++g) EXPECT_EQ(v[slot::kGeneric + g], 0.0f);
}

TEST(Feature, AnnotationPragmaAndScopes) {
  auto an = feat(step(StepKind::kAnnotation, {3, 0, 6}));  // threadIdx.x
  EXPECT_EQ(an[slot::kAnnotation + 6], 1.0f);
  EXPECT_FLOAT_EQ(an[slot::kStage], 3.0f / 32);
  auto pr = feat(step(StepKind::kPragma, {2, 0}, "auto_unroll_max_step$512"));
  EXPECT_FLOAT_EQ(pr[slot::kUnroll], std::log2(513.0f) / 8);
  EXPECT_EQ(pr[slot::kOtherPragma], 0.0f);
  auto pr2 = feat(step(StepKind::kPragma, {2, 0}, "debug_skip_region"));
  EXPECT_EQ(pr2[slot::kUnroll], 0.0f);
  EXPECT_EQ(pr2[slot::kOtherPragma], 1.0f);
  auto chw = feat(step(StepKind::kCacheWrite, {2}, "local"));
  EXPECT_EQ(chw[slot::kScope + 0], 1.0f);
  auto chr = feat(step(StepKind::kCacheRead, {1, 3}, "shared", 1, 1));
  EXPECT_EQ(chr[slot::kScope + 1], 1.0f);
  EXPECT_FLOAT_EQ(chr[slot::kGeneric], 3.0f / 32);  // reader stage id
}

TEST(Feature, GenericArgumentsInRecordOrder) {
  // ["CA", 2, 3, 5]: no iterator id, so target stage and target iter go to the generic slots.
  auto ca = feat(step(StepKind::kComputeAt, {2, 3, 5}));
  EXPECT_FLOAT_EQ(ca[slot::kIter], 0.0f);
  EXPECT_FLOAT_EQ(ca[slot::kGeneric + 0], 3.0f / 32);
  EXPECT_FLOAT_EQ(ca[slot::kGeneric + 1], 5.0f / 32);
  // RE with 14 ids: only the first 10 are kept.
  std::vector<int64_t> re = {2};
  for (int i = 0; i < 14; ++i) re.push_back(i);
  auto r = feat(step(StepKind::kReorder, re, "", 1, 14));
  EXPECT_FLOAT_EQ(r[slot::kGeneric + 9], 9.0f / 32);
  EXPECT_FLOAT_EQ(r[slot::kListSize], std::log2(15.0f) / 8);
  // Identifiers are clipped so that corrupt input cannot produce huge values.
  auto big = feat(step(StepKind::kComputeInline, {1000000}));
  EXPECT_FLOAT_EQ(big[slot::kStage], 8.0f);
}

TEST(Feature, ProgramPaddingAndTruncation) {
  std::vector<TransformStep> prog = {step(StepKind::kComputeInline, {1}), step(StepKind::kComputeRoot, {2}),
                                     step(StepKind::kComputeInline, {3})};
  std::vector<float> out(4 * kStepFeatureDim, 7.0f);
  EXPECT_EQ(featurize_program(prog, 4, out.data()), 3);
  for (int i = 3 * kStepFeatureDim; i < 4 * kStepFeatureDim; ++i) EXPECT_EQ(out[i], 0.0f);
  std::vector<float> cut(2 * kStepFeatureDim);
  EXPECT_EQ(featurize_program(prog, 2, cut.data()), 2);
  EXPECT_FLOAT_EQ(cut[kStepFeatureDim + slot::kStage], 2.0f / 32);
}

TEST(Feature, LoopTrackerGivesAnnotatedExtents) {
  // CHW 0 "local"        -> cache stage 0, the original becomes stage 1 (loops unknown)
  // SP 1 0 128 [4, 8] 1  -> stage 1 iterators: [128/32 = 4, 4, 8, ?...]
  // FU 1 [0, 1]          -> [16, 8]: the fused loop has extent 4 * 4 = 16
  // AN 1 0 5 (blockIdx.x) on the fused loop -> 16; AN 1 1 2 (vectorize) -> 8
  // FSP 0 0 1 2          -> stage 0 iter 0 split like step 1 with 2 parts: [?, 4, 8]; AN 0 1 -> 4
  // AN 0 5 3             -> an iterator never split: unknown (slots stay 0)
  std::vector<TransformStep> prog = {
      step(StepKind::kCacheWrite, {0}, "local"),
      step(StepKind::kSplit, {1, 0, 128, 4, 8, 1}, "", 3, 2),
      step(StepKind::kFuse, {1, 0, 1}, "", 1, 2),
      step(StepKind::kAnnotation, {1, 0, 5}),
      step(StepKind::kAnnotation, {1, 1, 2}),
      step(StepKind::kFollowSplit, {0, 0, 1, 3}),
      step(StepKind::kAnnotation, {0, 1, 6}),
      step(StepKind::kAnnotation, {0, 5, 3}),
  };
  std::vector<float> x(prog.size() * kStepFeatureDim);
  ASSERT_EQ(featurize_program(prog, static_cast<int>(prog.size()), x.data()), static_cast<int>(prog.size()));
  auto at = [&](int t, int s) { return x[t * kStepFeatureDim + s]; };
  EXPECT_FLOAT_EQ(at(2, slot::kLoopExtent), log_magnitude(16));
  EXPECT_EQ(at(2, slot::kExtentKnown), 1.0f);
  EXPECT_FLOAT_EQ(at(3, slot::kLoopExtent), log_magnitude(16));
  EXPECT_FLOAT_EQ(at(4, slot::kLoopExtent), log_magnitude(8));
  // FSP with n_split 3 takes both lengths of step 1: stage 0 iter 0 -> [?, 4, 8]
  EXPECT_FLOAT_EQ(at(6, slot::kLoopExtent), log_magnitude(4));
  EXPECT_EQ(at(7, slot::kExtentKnown), 0.0f);
  EXPECT_EQ(at(7, slot::kLoopExtent), 0.0f);
  // Without program context the same step has no extent.
  auto alone = feat(prog[3]);
  EXPECT_EQ(alone[slot::kExtentKnown], 0.0f);
}

TEST(Feature, LoopTrackerSurvivesCorruptIds) {
  // Huge or negative ids and out-of-range source steps must neither crash nor allocate much.
  std::vector<TransformStep> prog = {
      step(StepKind::kSplit, {1000000000, 5, 64, 8, 1}, "", 3, 1),
      step(StepKind::kSplit, {0, 1000000000, 64, 8, 1}, "", 3, 1),
      step(StepKind::kFollowSplit, {0, 0, 99, 2}),
      step(StepKind::kFollowFusedSplit, {0, 0, -3, 0, 1}, "", 2, 1),
      step(StepKind::kFuse, {0, -1, 0}, "", 1, 2),
      step(StepKind::kReorder, {0, 7, -2, 1000000}, "", 1, 3),
      step(StepKind::kAnnotation, {-1, 0, 1}),
      step(StepKind::kCacheRead, {-5}, "shared"),
  };
  std::vector<float> x(prog.size() * kStepFeatureDim);
  EXPECT_EQ(featurize_program(prog, static_cast<int>(prog.size()), x.data()), static_cast<int>(prog.size()));
  for (float v : x) EXPECT_TRUE(std::isfinite(v));
}

// Found with the UBSan fuzz harness (docs/reliability.md, "Fuzzing"; inputs in
// fuzz/regressions/records/featurize_*): int64 extremes in step arguments overflowed (signed, UB) in
// the loop tracker, and products of huge split lengths overflowed to inf. Features must stay finite.
TEST(Feature, ExtremeIntegersGiveFiniteFeatures) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(log_magnitude(INFINITY), 128.0f);
  EXPECT_EQ(log_magnitude(-INFINITY), -128.0f);
  EXPECT_EQ(log_magnitude(NAN), 0.0f);
  std::vector<int64_t> sp = {0, 0, kMax};
  for (int i = 0; i < 20; ++i) sp.push_back(kMax);
  sp.push_back(1);
  std::vector<TransformStep> prog = {
      step(StepKind::kSplit, {0, 0, 8, 2, 1}, "", 3, 1),
      step(StepKind::kFollowSplit, {0, 0, 0, kMin}),
      step(StepKind::kFuse, {0, kMax, 1}, "", 1, 2),
      step(StepKind::kSplit, sp, "", 3, 20),
      step(StepKind::kFuse, {0, 0, 1, 2, 3}, "", 1, 4),
  };
  std::vector<float> x(prog.size() * kStepFeatureDim);
  EXPECT_EQ(featurize_program(prog, static_cast<int>(prog.size()), x.data()), static_cast<int>(prog.size()));
  for (float v : x) EXPECT_TRUE(std::isfinite(v));
}
