// Tests of the MetaSchedule side: trace parsing (RV resolution), the trace encoding (values computed
// by hand from docs/feature-encoding.md), JSON databases as record sources, and the family checks
// that keep an Ansor-trained model away from traces and back.
#include <gtest/gtest.h>

#include <cmath>

#include "record/trace_reader.h"
#include "tclm/dataset.h"
#include "tclm/error.h"
#include "tclm/feature.h"
#include "tclm/weights.h"
#include "test_util.h"

using namespace tclm;

namespace {

// A CPU reduction trace in Trace::AsJSON's layout (hand-written in the shape TVM 0.19 writes):
// a split by a sampled perfect tile, an rfactor, parallel/vectorize/unroll annotations, a categorical
// unroll sample, then the post-processing part.
const char* kTrace = R"([[
  ["GetBlock", [], ["red", "main"], ["b0"]],
  ["GetLoops", ["b0"], [], ["l1", "l2", "l3"]],
  ["SamplePerfectTile", ["l3"], [2, 64], ["v4", "v5"]],
  ["Split", ["l3", "v4", "v5"], [1, 0], ["l6", "l7"]],
  ["RFactor", ["l7"], [2], ["b8"]],
  ["Annotate", ["b0", 128], ["meta_schedule.parallel"], []],
  ["SampleCategorical", [], [[0, 16, 64, 512], [0.25, 0.25, 0.25, 0.25]], ["v9"]],
  ["Annotate", ["b0", "v9"], ["meta_schedule.unroll_explicit"], []],
  ["Split", ["l6", null, 8], [1, 0], ["l10", "l11"]],
  ["Fuse", ["l10", "l11"], [1], ["l12"]],
  ["EnterPostproc", [], [], []],
  ["Vectorize", ["l11"], [], []],
  ["Bind", ["l12"], ["threadIdx.x"], []],
  ["CacheWrite", ["b0"], [0, "local"], ["b13"]],
  ["MyNewInstruction", [], [], []]
], [[2, [512, 2]], [6, 2]]])";

std::vector<TransformStep> parse(const std::string& json) {
  std::vector<TransformStep> steps;
  const std::string why = parse_trace_json(json, &steps);
  EXPECT_EQ(why, "");
  return steps;
}

int64_t value(const TransformStep& s) { return s.ints[trace_slot::kValue]; }
bool known(const TransformStep& s) { return s.ints[trace_slot::kValueKnown] != 0; }
std::vector<int64_t> list(const TransformStep& s) {
  return {s.ints.begin() + s.list_pos, s.ints.begin() + s.list_pos + s.n_list};
}

float mag(double x) { return static_cast<float>(std::log2(1.0 + x) / 8.0); }

}  // namespace

TEST(Trace, KindsAndRenames) {
  EXPECT_EQ(trace_kind_of("GetBlock"), StepKind::kTraceGetBlock);
  EXPECT_EQ(trace_kind_of("GetSBlock"), StepKind::kTraceGetBlock);  // TVM 0.24+ name
  EXPECT_EQ(trace_kind_of("SamplePerfectTile"), StepKind::kTraceSamplePerfectTile);
  EXPECT_EQ(trace_kind_of("NoSuchThing"), StepKind::kTraceOther);
  EXPECT_EQ(step_kind_name(StepKind::kTraceSplit), "Split");
  EXPECT_EQ(step_kind_name(StepKind::kSplit), "SP");
  EXPECT_EQ(kNumStepKinds, kFirstTraceKind + kNumTraceKinds);
  EXPECT_EQ(static_cast<int>(StepKind::kTraceOther), kNumStepKinds - 1);
}

TEST(Trace, ResolvesDecisionsAndLoopExtents) {
  const auto s = parse(kTrace);
  ASSERT_EQ(s.size(), 15u);
  EXPECT_EQ(s[0].kind, StepKind::kTraceGetBlock);
  EXPECT_EQ(s[1].ints[trace_slot::kNumOutputs], 3);  // three loops
  // SamplePerfectTile: value = max_innermost_factor, list = the decision.
  EXPECT_EQ(value(s[2]), 64);
  EXPECT_EQ(list(s[2]), (std::vector<int64_t>{512, 2}));
  // Split by the sampled RVs: factors resolved; l3's extent is unknown (from GetLoops).
  EXPECT_EQ(list(s[3]), (std::vector<int64_t>{512, 2}));
  EXPECT_FALSE(known(s[3]));
  EXPECT_EQ(s[4].kind, StepKind::kTraceRFactor);
  // Annotate with a literal, and with a categorical RV: candidates[2] = 64.
  EXPECT_EQ(s[5].str, "meta_schedule.parallel");
  EXPECT_EQ(value(s[5]), 128);
  EXPECT_EQ(value(s[6]), 64);
  EXPECT_EQ(list(s[6]), (std::vector<int64_t>{2, 4}));
  EXPECT_TRUE(known(s[7]));
  EXPECT_EQ(value(s[7]), 64);
  // Split of l6 (extent 512 from the first split) by [null, 8]: the null factor is 512 / 8 = 64.
  EXPECT_EQ(value(s[8]), 512);
  EXPECT_EQ(list(s[8]), (std::vector<int64_t>{64, 8}));
  // Fuse of l10 (64) and l11 (8) = 512.
  EXPECT_TRUE(known(s[9]));
  EXPECT_EQ(value(s[9]), 512);
  // Post-processing part: the flag, extents carried to Vectorize and Bind, the thread axis, scope.
  EXPECT_EQ(s[9].ints[trace_slot::kInPostproc], 0);
  EXPECT_EQ(s[10].ints[trace_slot::kInPostproc], 1);
  EXPECT_EQ(value(s[11]), 8);
  EXPECT_EQ(value(s[12]), 512);
  EXPECT_EQ(s[12].str, "threadIdx.x");
  EXPECT_EQ(s[13].str, "local");
  EXPECT_EQ(s[14].kind, StepKind::kTraceOther);
  EXPECT_EQ(s[14].str, "MyNewInstruction");
}

TEST(Trace, EncodingByHand) {
  namespace tf = trace_feature;
  const auto s = parse(kTrace);
  std::vector<float> row(kStepFeatureDim);
  // SamplePerfectTile: 1 input, 2 outputs, value 64, tiles [512, 2].
  featurize_step(view_of(s[2]), row.data());
  EXPECT_EQ(row[tf::kKind + 0], 1.0f);
  EXPECT_FLOAT_EQ(row[tf::kNumInputs], mag(1));
  EXPECT_FLOAT_EQ(row[tf::kNumOutputs], mag(2));
  EXPECT_FLOAT_EQ(row[tf::kValue], mag(64));
  EXPECT_EQ(row[tf::kValueKnown], 1.0f);
  EXPECT_FLOAT_EQ(row[tf::kList + 0], mag(512));
  EXPECT_FLOAT_EQ(row[tf::kList + 1], mag(2));
  EXPECT_EQ(row[tf::kList + 2], 0.0f);
  EXPECT_FLOAT_EQ(row[tf::kListProduct], mag(1024));
  EXPECT_FLOAT_EQ(row[tf::kListSize], 0.5f);
  float sum = 0;
  for (float v : row) sum += v;
  EXPECT_FLOAT_EQ(sum, 1 + mag(1) + mag(2) + mag(64) + 1 + mag(512) + mag(2) + mag(1024) + 0.5f);
  // Annotate unroll_explicit: key one-hot 2, value 64.
  featurize_step(view_of(s[7]), row.data());
  EXPECT_EQ(row[tf::kKind + (static_cast<int>(StepKind::kTraceAnnotate) - kFirstTraceKind)], 1.0f);
  EXPECT_EQ(row[tf::kAnnotationKey + 2], 1.0f);
  EXPECT_FLOAT_EQ(row[tf::kValue], mag(64));
  // Bind threadIdx.x after EnterPostproc.
  featurize_step(view_of(s[12]), row.data());
  EXPECT_EQ(row[tf::kScope + 3], 1.0f);
  EXPECT_EQ(row[tf::kInPostproc], 1.0f);
  // No Ansor slot meaning leaks: the program featurizer gives the same rows (no loop tracker).
  std::vector<float> prog(static_cast<size_t>(20) * kStepFeatureDim);
  EXPECT_EQ(featurize_program(s, 20, prog.data()), 15);
  featurize_step(view_of(s[12]), row.data());
  for (int f = 0; f < kStepFeatureDim; ++f) EXPECT_EQ(prog[12 * kStepFeatureDim + f], row[f]) << f;
  EXPECT_EQ(feature_version_of(s[0].kind), kTraceFeatureVersion);
  EXPECT_EQ(feature_version_of(StepKind::kSplit), kFeatureVersion);
}

TEST(Trace, MalformedTracesAreReasonsNotCrashes) {
  std::vector<TransformStep> s;
  EXPECT_NE(parse_trace_json("", &s), "");
  EXPECT_NE(parse_trace_json("{}", &s), "");
  EXPECT_NE(parse_trace_json("[[[\"Split\"]]]", &s), "");          // instruction too short
  EXPECT_NE(parse_trace_json("[[[1, [], [], []]]]", &s), "");       // kind not a string
  EXPECT_NE(parse_trace_json("[[], [[\"x\", 1]]]", &s), "");        // decision index not a number
  EXPECT_NE(parse_trace_json("[[[\"Split\", 3, [], []]]]", &s), "");  // inputs not a list
  EXPECT_EQ(parse_trace_json("[[], []]", &s), "");                   // an empty trace is valid
  EXPECT_TRUE(s.empty());
  // A decision of the wrong type is ignored (value unknown), not fatal; huge numbers saturate.
  EXPECT_EQ(parse_trace_json(R"([[["SamplePerfectTile", ["l0"], [2, 1e300], ["v1", "v2"]],
      ["Split", ["l0", "v1", 18446744073709551615], [], ["l3", "l4"]]], [[0, "oops"]]])", &s), "");
  EXPECT_FALSE(known(s[0]));
  EXPECT_EQ(list(s[1]), (std::vector<int64_t>{0, INT64_MAX}));
  // A split whose extent saturated (INT64_MAX) infers its null factor without overflow.
  EXPECT_EQ(parse_trace_json(R"([[["Fuse", ["l0"], [], ["l1"]],
      ["Split", ["l9", 18446744073709551615, 2], [], ["l2", "l3"]],
      ["Split", ["l2", null, 3], [], ["l4", "l5"]]], []])", &s), "");
  EXPECT_EQ(list(s[2]), (std::vector<int64_t>{INT64_MAX / 3 + 1, 3}));
  // Huge instruction lists: linear time up to the cap (65,536 elements), refused beyond it.
  auto split_with = [](size_t n) {
    std::string t = R"([[["Split", ["l0")";
    for (size_t i = 0; i < n; ++i) t += ", null";
    return t + "], [], []]], []]";
  };
  EXPECT_EQ(parse_trace_json(split_with(60000), &s), "");
  EXPECT_EQ(s[0].n_list, 60000);
  EXPECT_NE(parse_trace_json(split_with(70000), &s).find("more than 65536"), std::string::npos);
  // Integers beyond 64 bits are a reason (simdjson refuses them), not a crash.
  EXPECT_NE(parse_trace_json(R"([[["Split", ["l0", 99999999999999999999], [], []]], []])", &s), "");
}

TEST(Trace, DatabaseDirectoryIsARecordSource) {
  test::TempDir dir;
  const std::string trace_a = R"([[["GetBlock", [], ["C", "main"], ["b0"]], ["GetLoops", ["b0"], [], ["l1"]],
    ["SamplePerfectTile", ["l1"], [2, 16], ["v2", "v3"]], ["Split", ["l1", "v2", "v3"], [1, 0], ["l4", "l5"]],
    ["Parallel", ["l4"], [], []]], [[2, [32, 4]]]])";
  auto strip = [](std::string s) {
    s.erase(std::remove(s.begin(), s.end(), '\n'), s.end());
    return s;
  };
  const std::string target = R"({"kind": "llvm", "mcpu": "skylake", "num-cores": 4, "keys": ["cpu"]})";
  test::write_text(dir.file("database_workload.json"),
                   "[\"111\", \"AAAA\"]\n[\"222\", \"BBBB\"]\n");
  test::write_text(dir.file("database_tuning_record.json"),
                   "[0, [" + strip(trace_a) + ", [0.002, 0.004], " + target + ", []]]\n" +
                   "[0, [" + strip(trace_a) + ", [0.001], " + target + ", []]]\n" +
                   "[1, [" + strip(trace_a) + ", null, " + target + ", []]]\n" +
                   "[1, [" + strip(trace_a) + ", [10000000000.0], " + target + ", []]]\n" +
                   "[7, [" + strip(trace_a) + ", [0.001], " + target + ", []]]\n" +
                   "[0, [[[\"Split\"]], [0.001], " + target + ", []]]\n");
  Dataset d = Dataset::load({DataSource::parse(dir.path.string())}, LoadOptions{});
  const ReadStats& st = d.read_stats();
  EXPECT_EQ(st.workload_tables, 1);
  EXPECT_EQ(st.records, 4);  // lines 1-4; line 5 names workload 7 of 2, line 6 has a bad trace
  EXPECT_EQ(st.skipped, 2);
  EXPECT_NE(st.report().find("workload index 7 not in"), std::string::npos) << st.report();
  ASSERT_EQ(d.platforms().size(), 1u);
  EXPECT_EQ(d.platforms()[0], "llvm -mcpu=skylake cores=4");
  ASSERT_EQ(d.tasks().size(), 1u);  // workload 222's two records both failed (no run_secs; 1e10)
  EXPECT_EQ(d.tasks()[0].workload_key, "ms:111");
  EXPECT_EQ(d.platform_stats()[0].errors, 2);
  ASSERT_EQ(d.num_programs(), 2u);
  EXPECT_DOUBLE_EQ(d.cost(0), 0.003);  // mean of run_secs
  EXPECT_FLOAT_EQ(d.label(0), static_cast<float>(0.001 / 0.003));
  EXPECT_EQ(d.feature_version(), kTraceFeatureVersion);
  std::vector<StepView> v;
  std::vector<int64_t> ints;
  d.steps(0, &v, &ints);
  ASSERT_EQ(v.size(), 5u);
  EXPECT_EQ(v[4].kind, StepKind::kTraceParallel);
  EXPECT_EQ(v[4].ints[trace_slot::kValue], 32);  // the extent of l4 from the split

  // Without the workload table every record is skipped with the reason, nothing aborts.
  std::filesystem::remove(dir.file("database_workload.json"));
  Dataset e = Dataset::load({DataSource::parse(dir.path.string())}, LoadOptions{});
  EXPECT_EQ(e.read_stats().records, 0);
  EXPECT_NE(e.read_stats().report().find("no workload table"), std::string::npos);
}

TEST(Trace, FamiliesAreNotMixed) {
  EXPECT_THROW(check_feature_family(kFeatureVersion, kTraceFeatureVersion, "m"), Error);
  EXPECT_NO_THROW(check_feature_family(kTraceFeatureVersion, kTraceFeatureVersion, "m"));
  try {
    check_feature_family(kFeatureVersion, kTraceFeatureVersion, "model.tclm");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Ansor step encoding v2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("MetaSchedule trace encoding v1"), std::string::npos) << e.what();
  }
  // A dataset with both an Ansor program and a trace refuses to name one encoding.
  Dataset d;
  const int p = d.intern_platform("x");
  const int g = d.intern_group("g");
  MeasureRecord ansor;
  ansor.workload_key = "a";
  ansor.costs = {1.0};
  TransformStep sp;
  sp.kind = StepKind::kSplit;
  sp.ints = {0, 0, 8};
  ansor.steps = {sp};
  d.add_record(ansor, p, g);
  MeasureRecord ms = ansor;
  ms.workload_key = "ms:1";
  ms.steps = parse(kTrace);
  d.add_record(ms, p, g);
  d.finalize();
  EXPECT_THROW(d.feature_version(), Error);
}

TEST(Trace, RealDatabaseFromSharedData) {
  const std::string shared = test::shared_data_dir();
  if (shared.empty()) GTEST_SKIP() << "../shared/data is absent";
  const std::string db = shared + "/bennu/benchmarks/microkernels/ms/results/red";
  if (!std::filesystem::exists(db)) GTEST_SKIP() << db << " is absent";
  Dataset d = Dataset::load({DataSource::parse(db)}, LoadOptions{});
  // 60 tuning records of one workload (MANIFEST.md), all measured.
  EXPECT_EQ(d.read_stats().records, 60);
  EXPECT_EQ(d.read_stats().skipped, 0);
  ASSERT_EQ(d.tasks().size(), 1u);
  EXPECT_EQ(d.num_programs(), 60u);
  EXPECT_EQ(d.feature_version(), kTraceFeatureVersion);
  // Every program starts with GetBlock and resolves its sampled unroll (SampleCategorical); 56 of
  // the 60 use the rfactor sketch with a sampled perfect tile, 4 the plain one (counted with Python's
  // json module on the file).
  int tiled = 0;
  for (uint32_t p = 0; p < d.num_programs(); ++p) {
    std::vector<StepView> v;
    std::vector<int64_t> ints;
    d.steps(p, &v, &ints);
    ASSERT_FALSE(v.empty());
    EXPECT_EQ(v[0].kind, StepKind::kTraceGetBlock);
    bool tile = false, categorical = false;
    for (const auto& s : v) {
      tile |= s.kind == StepKind::kTraceSamplePerfectTile && s.n_list == 2;
      categorical |= s.kind == StepKind::kTraceSampleCategorical && s.ints[trace_slot::kValueKnown] != 0;
    }
    tiled += tile;
    EXPECT_TRUE(categorical) << "program " << p;
  }
  EXPECT_EQ(tiled, 56);
}
