// Tests of the step encoding v1 (docs/feature-encoding.md): values computed by hand from the layout.
#include <gtest/gtest.h>

#include <cmath>

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
  EXPECT_EQ(slot::kGeneric + slot::kNumGeneric, kStepFeatureDim);
  EXPECT_EQ(slot::kStage, kNumStepKinds);
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
  for (int i = 0; i < kNumStepKinds; ++i) kind_sum += v[i];
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
