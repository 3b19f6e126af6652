// Tests of tasks, labels and splits on small hand-made record files.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <set>

#include "dataset/record_cache.h"
#include "test_util.h"
#include "tclm/dataset.h"
#include "tclm/error.h"

using namespace tclm;

namespace {

/// One record line; `measured` false writes a candidate without "r" (costs and err unused).
std::string rec(const std::string& wk, const std::string& target, std::vector<double> costs, int err = 0,
                int n_steps = 2, bool measured = true) {
  MeasureRecord r;
  r.workload_key = wk;
  r.target = target;
  r.hw_params = {8, 64, 64, 0, 0, 0, 0, 0};
  for (int i = 0; i < n_steps; ++i) {
    TransformStep s;
    s.kind = StepKind::kComputeInline;
    s.ints = {i};
    r.steps.push_back(s);
  }
  r.costs = std::move(costs);
  r.error_no = err;
  r.version = "v0.6";
  r.measured = measured;
  return record_to_json(r) + "\n";
}

}  // namespace

TEST(Dataset, TasksLabelsAndErrors) {
  test::TempDir dir;
  // Task A on platform "p": costs 2, 4 and (1+3)/2 = 2 -> min 2; labels 1, 0.5, 1. One error record.
  test::write_text(dir.file("a.json"), rec("A", "llvm", {2.0}) + rec("A", "llvm", {4.0}) + rec("A", "llvm", {1.0, 3.0}) +
                                           rec("A", "llvm", {1e10}, 6) + rec("B", "llvm", {0.5}) +
                                           rec("B", "llvm", {-1.0}));
  LoadOptions lo;
  lo.max_steps = 1;  // every program has 2 steps -> all counted as truncated
  Dataset d = Dataset::load({DataSource::parse("p=" + dir.path.string())}, lo);
  ASSERT_EQ(d.platforms().size(), 1u);
  EXPECT_EQ(d.platforms()[0], "p");
  const auto& ps = d.platform_stats()[0];
  EXPECT_EQ(ps.records, 6);
  EXPECT_EQ(ps.programs, 4);
  EXPECT_EQ(ps.errors, 1);
  EXPECT_EQ(ps.errors_by_code.at(6), 1);
  EXPECT_EQ(ps.bad_costs, 1);
  EXPECT_EQ(ps.truncated, 4);
  ASSERT_EQ(d.tasks().size(), 2u);
  const Task& a = d.tasks()[0];
  EXPECT_EQ(a.workload_key, "A");
  EXPECT_DOUBLE_EQ(a.min_cost, 2.0);
  ASSERT_EQ(a.programs.size(), 3u);
  EXPECT_FLOAT_EQ(d.label(a.programs[0]), 1.0f);
  EXPECT_FLOAT_EQ(d.label(a.programs[1]), 0.5f);
  EXPECT_FLOAT_EQ(d.label(a.programs[2]), 1.0f);
  // Featurized with max_steps 1: one row per program, mask all ones.
  std::vector<float> x, mask;
  EXPECT_EQ(d.featurize(a.programs, &x, &mask), 1);
  EXPECT_EQ(mask, std::vector<float>(3, 1.0f));
}

TEST(Dataset, ACandidatePoolKeepsEveryProgramOnceMeasuredOrNot) {
  // Programs are told apart by their steps (rec: n_steps of them). Task A: never measured (1 and 2
  // steps), 2 steps again, a failed measurement (3 steps), a success of 2 steps (the program of the
  // second line, measured); task B: one never measured.
  auto unmeasured = [](const std::string& wk, int n_steps) { return rec(wk, "llvm", {}, 0, n_steps, false); };
  test::TempDir dir;
  const std::string text = unmeasured("A", 1) + unmeasured("A", 2) + unmeasured("A", 2) + rec("A", "llvm", {1e10}, 6, 3) +
                           rec("A", "llvm", {0.5}, 0, 2) + unmeasured("B", 1);
  test::write_text(dir.file("pool.json"), text);
  LoadOptions lo;
  lo.candidates = true;
  lo.cache_dir = dir.file("cache");  // not used for a pool
  const Dataset pool = Dataset::load({DataSource::parse("p=" + dir.file("pool.json"))}, lo);
  const auto& ps = pool.platform_stats()[0];
  EXPECT_EQ(ps.records, 6);
  EXPECT_EQ(ps.programs, 4);
  EXPECT_EQ(ps.duplicates, 2);
  EXPECT_EQ(ps.errors, 0) << "a failed measurement is still a candidate";
  EXPECT_EQ(pool.read_stats().skipped, 0);
  ASSERT_EQ(pool.tasks().size(), 2u);
  EXPECT_EQ(pool.tasks()[0].programs.size(), 3u);
  EXPECT_EQ(pool.tasks()[1].programs.size(), 1u);
  for (size_t p = 0; p < pool.num_programs(); ++p) EXPECT_FLOAT_EQ(pool.label(static_cast<uint32_t>(p)), 1.0f);
  EXPECT_FALSE(std::filesystem::exists(dir.file("cache")));
  // As training data the lines without "r" are malformed (skipped, counted) and the failure an error.
  const Dataset data = Dataset::load({DataSource::parse("p=" + dir.file("pool.json"))}, LoadOptions{});
  EXPECT_EQ(data.num_programs(), 1u);
  EXPECT_EQ(data.read_stats().skipped, 4);
}

TEST(Dataset, PlatformFromNormalizedTarget) {
  EXPECT_EQ(normalize_target("llvm -keys=cpu -link-params=0 -mcpu=core-avx2", {8, 64}), "llvm -mcpu=core-avx2 cores=8");
  EXPECT_EQ(normalize_target("cuda -keys=cuda,gpu -arch=sm_80 -max_num_threads=1024", {-1, 16}), "cuda -arch=sm_80");
  test::TempDir dir;
  test::write_text(dir.file("a.json"), rec("A", "llvm -mcpu=x", {1.0}) + rec("A", "cuda", {1.0}));
  Dataset d = Dataset::load({DataSource::parse(dir.path.string())}, LoadOptions{});
  EXPECT_EQ(d.platforms().size(), 2u);
  EXPECT_EQ(d.tasks().size(), 2u);  // same workload key, two platforms -> two tasks
}

TEST(Dataset, DataSourceSyntax) {
  auto s = DataSource::parse("k80=/data/k80");
  EXPECT_EQ(s.platform, "k80");
  EXPECT_EQ(s.path, "/data/k80");
  auto t = DataSource::parse("/data/a=b/x");  // '=' after a '/' is part of the path
  EXPECT_EQ(t.platform, "");
  EXPECT_THROW(DataSource::parse("=x"), Error);
}

TEST(Split, DisjointDeterministicAndOrderIndependent) {
  test::TempDir dir;
  std::string text;
  for (int t = 0; t < 200; ++t) {
    for (int p = 0; p < 3; ++p) text += rec("W" + std::to_string(t), "llvm", {1.0 + p});
  }
  test::write_text(dir.file("a.json"), text);
  Dataset d = Dataset::load({DataSource::parse("x=" + dir.path.string())}, LoadOptions{});
  SplitOptions so;
  Split s1 = make_split(d, so), s2 = make_split(d, so);
  EXPECT_EQ(s1.test, s2.test);
  std::set<uint32_t> all;
  for (auto* part : {&s1.train, &s1.valid, &s1.test}) all.insert(part->begin(), part->end());
  EXPECT_EQ(all.size(), 200u);
  EXPECT_EQ(s1.train.size() + s1.valid.size() + s1.test.size(), 200u);
  // 20% / 10% of 200 hashed units: within 4 standard deviations of the binomial expectation.
  EXPECT_NEAR(static_cast<double>(s1.test.size()), 40.0, 4 * std::sqrt(200 * 0.2 * 0.8));
  EXPECT_NEAR(static_cast<double>(s1.valid.size()), 20.0, 4 * std::sqrt(200 * 0.1 * 0.9));
  // Another seed gives another split.
  so.seed = 7;
  EXPECT_NE(make_split(d, so).test, s1.test);
  // The part of a workload depends on its key only: a second dataset with the records in another
  // order puts the same workloads in test.
  std::string rev;
  for (int t = 199; t >= 0; --t) rev += rec("W" + std::to_string(t), "llvm", {1.0}) + rec("W" + std::to_string(t), "llvm", {2.0});
  test::TempDir dir2;
  test::write_text(dir2.file("b.json"), rev);
  Dataset d2 = Dataset::load({DataSource::parse("x=" + dir2.path.string())}, LoadOptions{});
  std::set<std::string> k1, k2;
  for (uint32_t t : s1.test) k1.insert(d.tasks()[t].workload_key);
  for (uint32_t t : make_split(d2, SplitOptions{}).test) k2.insert(d2.tasks()[t].workload_key);
  EXPECT_EQ(k1, k2);
}

TEST(Split, GroupModeHoldsOutWholeDirectories) {
  test::TempDir dir;
  for (int g = 0; g < 30; ++g) {
    std::filesystem::create_directories(dir.path / ("net" + std::to_string(g)));
    std::string text;
    for (int t = 0; t < 4; ++t) text += rec("G" + std::to_string(g) + "T" + std::to_string(t), "llvm", {1.0}) +
                                        rec("G" + std::to_string(g) + "T" + std::to_string(t), "llvm", {2.0});
    text += rec("shared", "llvm", {1.0 + g});  // one task occurs in every network
    test::write_text((dir.path / ("net" + std::to_string(g)) / "r.json").string(), text);
  }
  Dataset d = Dataset::load({DataSource::parse("x=" + dir.path.string())}, LoadOptions{});
  SplitOptions so;
  so.mode = SplitMode::kGroup;
  so.test_fraction = 0.3;
  Split s = make_split(d, so);
  ASSERT_FALSE(s.test.empty());
  std::set<int> test_groups;
  for (uint32_t t : s.test) {
    if (d.tasks()[t].workload_key != "shared") test_groups.insert(d.tasks()[t].groups[0]);
  }
  // Every task of a test group is in test; the shared task is test because it occurs in a test group.
  for (uint32_t t : s.train) {
    for (int g : d.tasks()[t].groups) EXPECT_EQ(test_groups.count(g), 0u) << d.tasks()[t].workload_key;
  }
  bool shared_in_test = false;
  for (uint32_t t : s.test) shared_in_test |= d.tasks()[t].workload_key == "shared";
  EXPECT_TRUE(shared_in_test);
  // The tuning split in group mode: the outer test tasks (the shared one among them) are held out,
  // and the inner parts again hold out whole groups.
  so.tuning = true;
  const Split inner = make_split(d, so);
  EXPECT_EQ(inner.held_out, static_cast<int64_t>(s.test.size()));
  ASSERT_FALSE(inner.test.empty());
  std::set<int> inner_test_groups;
  for (uint32_t t : inner.test) {
    EXPECT_NE(d.tasks()[t].workload_key, "shared");
    inner_test_groups.insert(d.tasks()[t].groups.begin(), d.tasks()[t].groups.end());
  }
  for (uint32_t t : inner.train) {
    for (int g : d.tasks()[t].groups) EXPECT_EQ(inner_test_groups.count(g), 0u) << d.tasks()[t].workload_key;
    EXPECT_EQ(test_groups.count(d.tasks()[t].groups[0]), 0u);
  }
}

// The tuning split never reads a real test task: its three parts are a re-split of the outer
// train + valid side (the same tasks, redistributed), its held-out count is the outer test size,
// and its own test part is a real part (of the expected size), not empty and not the outer test.
TEST(Split, TuningSplitResplitsTheTrainingSideOnly) {
  test::TempDir dir;
  std::string text;
  for (int t = 0; t < 400; ++t) text += rec("W" + std::to_string(t), "llvm", {1.0}) + rec("W" + std::to_string(t), "llvm", {2.0});
  test::write_text(dir.file("a.json"), text);
  Dataset d = Dataset::load({DataSource::parse("x=" + dir.path.string())}, LoadOptions{});
  SplitOptions so;
  const Split outer = make_split(d, so);
  so.tuning = true;
  const Split inner = make_split(d, so);
  EXPECT_EQ(inner.held_out, static_cast<int64_t>(outer.test.size()));
  EXPECT_EQ(outer.held_out, 0);
  std::set<uint32_t> outer_side(outer.train.begin(), outer.train.end()), inner_all;
  outer_side.insert(outer.valid.begin(), outer.valid.end());
  for (auto* part : {&inner.train, &inner.valid, &inner.test}) inner_all.insert(part->begin(), part->end());
  EXPECT_EQ(inner_all, outer_side);
  EXPECT_EQ(inner.train.size() + inner.valid.size() + inner.test.size(), outer_side.size());
  const std::set<uint32_t> outer_test(outer.test.begin(), outer.test.end());
  for (uint32_t t : inner.test) EXPECT_EQ(outer_test.count(t), 0u);
  // 20% / 10% of the ~320 remaining units, within 4 standard deviations.
  const double m = static_cast<double>(outer_side.size());
  EXPECT_NEAR(static_cast<double>(inner.test.size()), 0.2 * m, 4 * std::sqrt(m * 0.2 * 0.8));
  EXPECT_NEAR(static_cast<double>(inner.valid.size()), 0.1 * m, 4 * std::sqrt(m * 0.1 * 0.9));
  // A second hash, not the first again: some outer training tasks become tuning test tasks.
  const std::set<uint32_t> outer_train(outer.train.begin(), outer.train.end());
  int moved = 0;
  for (uint32_t t : inner.test) moved += static_cast<int>(outer_train.count(t));
  EXPECT_GT(moved, 0);
  EXPECT_EQ(make_split(d, so).test, inner.test);  // deterministic
}

TEST(Cache, SecondLoadReadsTheCacheAndGivesTheSameDataset) {
  test::TempDir dir, cache;
  test::write_text(dir.file("a.json"), rec("A", "llvm", {2.0}) + "garbage\n" + rec("A", "llvm", {4.0}, 0, 3));
  LoadOptions lo;
  lo.cache_dir = cache.path.string();
  Dataset d1 = Dataset::load({DataSource::parse("p=" + dir.path.string())}, lo);
  ASSERT_EQ(std::distance(std::filesystem::directory_iterator(cache.path), {}), 1);
  Dataset d2 = Dataset::load({DataSource::parse("p=" + dir.path.string())}, lo);
  EXPECT_EQ(d2.num_programs(), d1.num_programs());
  EXPECT_EQ(d2.read_stats().skipped, 1);
  EXPECT_EQ(d2.read_stats().examples, d1.read_stats().examples);
  std::vector<float> x1, x2, m1, m2;
  d1.featurize({0, 1}, &x1, &m1);
  d2.featurize({0, 1}, &x2, &m2);
  EXPECT_EQ(x1, x2);
  EXPECT_EQ(m1, m2);
  // A corrupt cache file is ignored (re-parsed), not trusted.
  auto cf = std::filesystem::directory_iterator(cache.path)->path();
  test::write_text(cf.string(), "TCLMRC01garbage");
  Dataset d3 = Dataset::load({DataSource::parse("p=" + dir.path.string())}, lo);
  EXPECT_EQ(d3.num_programs(), d1.num_programs());
}

TEST(Dataset, SubsetRecomputesLabelsFromTheProgramsKept) {
  test::TempDir dir;
  // Task A: costs 2, 4, 8 -> keeping programs 1 and 2 (costs 4, 8) makes 4 the best: labels 1, 0.5.
  test::write_text(dir.file("a.json"), rec("A", "llvm", {2.0}) + rec("A", "llvm", {4.0}) + rec("A", "llvm", {8.0}, 0, 3) +
                                           rec("B", "llvm", {1.0}));
  Dataset d = Dataset::load({DataSource::parse("p=" + dir.path.string())}, LoadOptions{});
  ASSERT_EQ(d.tasks().size(), 2u);
  const auto& a = d.tasks()[0].programs;
  Dataset s = d.subset({a[2], a[1]});
  ASSERT_EQ(s.num_programs(), 2u);
  ASSERT_EQ(s.tasks().size(), 2u);  // same task indices, B now empty
  EXPECT_TRUE(s.tasks()[1].programs.empty());
  EXPECT_DOUBLE_EQ(s.tasks()[0].min_cost, 4.0);
  EXPECT_FLOAT_EQ(s.label(0), 0.5f);  // cost 8
  EXPECT_FLOAT_EQ(s.label(1), 1.0f);  // cost 4
  EXPECT_EQ(s.num_steps(0), 3);
  EXPECT_EQ(s.num_steps(1), 2);
  // The steps travel with their program: features equal the original's.
  std::vector<float> x0, m0, x1, m1;
  d.featurize({a[2]}, &x0, &m0);
  s.featurize({0}, &x1, &m1);
  EXPECT_EQ(x0, x1);
  EXPECT_NE(test::error_of([&] { d.subset({a[0], a[0]}); }).find("twice"), std::string::npos);
  EXPECT_NE(test::error_of([&] { d.subset({99}); }).find("out of range"), std::string::npos);
}

TEST(Features, PooledStepFeaturesAreMeanMaxAndLength) {
  std::vector<float> x(2 * kStepFeatureDim, 0.0f);
  x[0] = 1.0f;                    // step 0, slot 0
  x[kStepFeatureDim + 0] = 3.0f;  // step 1, slot 0
  x[kStepFeatureDim + 1] = -2.0f; // step 1, slot 1
  std::vector<float> out(kPooledFeatureDim);
  pool_step_features(x.data(), 2, out.data());
  EXPECT_FLOAT_EQ(out[0], 2.0f);                    // mean (1 + 3) / 2
  EXPECT_FLOAT_EQ(out[1], -1.0f);                   // mean (0 - 2) / 2
  EXPECT_FLOAT_EQ(out[kStepFeatureDim + 0], 3.0f);  // max
  EXPECT_FLOAT_EQ(out[kStepFeatureDim + 1], 0.0f);  // max(0, -2)
  EXPECT_FLOAT_EQ(out[2 * kStepFeatureDim], std::log2(3.0f));
  pool_step_features(x.data(), 0, out.data());
  EXPECT_EQ(out, std::vector<float>(kPooledFeatureDim, 0.0f));
}

// Numerics (docs/reliability.md): costs of 0, negative, >= 1e9 (Ansor's failure marker), an empty
// cost list, numbers JSON cannot hold (1e999) and NaN/Infinity literals never become labels: each
// record is counted (bad cost or skipped line, with file:line), and every label is in (0, 1].
TEST(Dataset, NonPositiveAndNonFiniteCostsAreCountedNotLearned) {
  test::TempDir dir;
  const std::string good = rec("A", "llvm", {2.0});
  std::string lines = good + rec("A", "llvm", {4.0}) + rec("A", "llvm", {0.0}) + rec("A", "llvm", {-3.0}) +
                      rec("A", "llvm", {1.0, -1.0}) + rec("A", "llvm", {2e9}) + rec("A", "llvm", {});
  // The same good record with its cost replaced by text JSON does not allow as a number.
  const size_t at = good.find("\"r\": [[2");
  ASSERT_NE(at, std::string::npos) << good;
  for (const char* bad : {"1e999", "NaN", "Infinity", "-inf"}) {
    std::string line = good;
    line.replace(at + 7, 1, bad);
    lines += line;
  }
  test::write_text(dir.file("a.json"), lines);
  Dataset d = Dataset::load({DataSource::parse("p=" + dir.path.string())}, LoadOptions{});
  const auto& ps = d.platform_stats()[0];
  EXPECT_EQ(ps.records, 7);
  EXPECT_EQ(ps.programs, 2);
  EXPECT_EQ(ps.bad_costs, 5);  // 0, -3, (1, -1), 2e9, no cost at all
  EXPECT_EQ(d.read_stats().skipped, 4);
  ASSERT_FALSE(d.read_stats().examples.empty());
  EXPECT_NE(d.read_stats().examples[0].find("a.json:8:"), std::string::npos) << d.read_stats().report();
  for (uint32_t p = 0; p < d.num_programs(); ++p) {
    EXPECT_TRUE(std::isfinite(d.label(p)) && d.label(p) > 0.0f && d.label(p) <= 1.0f) << p;
  }
  EXPECT_FLOAT_EQ(d.label(d.tasks()[0].programs[1]), 0.5f);
}

// tclm info streams (summarize_sources keeps no program) but must count exactly what Dataset::load
// counts, on real records of several platforms and on a file with errors and bad lines.
TEST(Dataset, StreamingSummaryCountsLikeLoad) {
  test::TempDir dir;
  test::write_text(dir.file("bad.json"), rec("A", "llvm", {2.0}) + rec("A", "llvm", {0.0}) + rec("B", "llvm", {1.0}, 4) +
                                             "{\"i\": [[\"X\"]]\n" + rec("C", "llvm", {1.0}, 0, 80));
  const std::vector<DataSource> sources = {DataSource::parse(test::source_dir() + "/tests/data/tvm_ci_logs"),
                                           DataSource::parse("k80=" + test::source_dir() + "/data/records/k80/matmul"),
                                           DataSource::parse("p=" + dir.path.string())};
  const DataSummary streamed = summarize_sources(sources, LoadOptions{});
  const DataSummary loaded = Dataset::load(sources, LoadOptions{}).summary();
  ASSERT_GE(loaded.platforms.size(), 3u);
  EXPECT_EQ(streamed.platforms, loaded.platforms);
  ASSERT_EQ(streamed.platform_stats.size(), loaded.platform_stats.size());
  for (size_t i = 0; i < loaded.platform_stats.size(); ++i) {
    const PlatformStats &a = streamed.platform_stats[i], &b = loaded.platform_stats[i];
    EXPECT_EQ(a.records, b.records) << loaded.platforms[i];
    EXPECT_EQ(a.programs, b.programs) << loaded.platforms[i];
    EXPECT_EQ(a.tasks, b.tasks) << loaded.platforms[i];
    EXPECT_EQ(a.errors, b.errors) << loaded.platforms[i];
    EXPECT_EQ(a.errors_by_code, b.errors_by_code) << loaded.platforms[i];
    EXPECT_EQ(a.bad_costs, b.bad_costs) << loaded.platforms[i];
    EXPECT_EQ(a.truncated, b.truncated) << loaded.platforms[i];
  }
  EXPECT_EQ(streamed.read_stats.records, loaded.read_stats.records);
  EXPECT_EQ(streamed.read_stats.skipped, 1);
  EXPECT_EQ(loaded.read_stats.skipped, 1);
  const PlatformStats& p = streamed.platform_stats.back();
  EXPECT_EQ(p.records, 4);
  EXPECT_EQ(p.programs, 2);
  EXPECT_EQ(p.tasks, 2);
  EXPECT_EQ(p.bad_costs, 1);
  EXPECT_EQ(p.errors, 1);
  EXPECT_EQ(p.truncated, 1);
}

// The cache of real record files (several 1 MB blocks) gives back exactly the parsed records; a cache
// file damaged in a middle block delivers nothing (no duplicates, no half file) and is rewritten.
TEST(Cache, MultiBlockCacheOfRealRecordsRoundTripsAndDamageIsDetected) {
  test::TempDir cache;
  const std::string file = test::source_dir() + "/data/records/k80/matmul/ansor_matmul_65536_1024_1024.log.gz";
  std::vector<std::string> parsed, cached;
  ReadStats s1, s2, s3;
  auto keep = [](std::vector<std::string>* out) {
    return [out](const MeasureRecord& r, const RecordOrigin& o) { out->push_back(std::to_string(o.line) + record_to_json(r)); };
  };
  read_record_file(file, keep(&parsed), &s1);
  ASSERT_GT(parsed.size(), 1000u);
  std::vector<std::string> first;
  read_record_file_cached(file, cache.path.string(), keep(&first), &s2);  // builds the cache
  EXPECT_EQ(first, parsed);
  const auto cf = std::filesystem::directory_iterator(cache.path)->path();
  const auto size = std::filesystem::file_size(cf);
  ASSERT_GT(size, (1u << 20) + 20000) << "expected at least two 1 MB blocks";
  auto bytes_of = [](const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string original = bytes_of(cf);
  read_record_file_cached(file, cache.path.string(), keep(&cached), &s3);  // reads it
  EXPECT_EQ(cached, parsed);
  EXPECT_EQ(s3.records, s1.records);
  EXPECT_EQ(s3.lines, s1.lines);
  // Flip one byte in the second block (the stats block at the end is far smaller than 10 kB): the whole
  // file is refused, the source re-parsed (the first block's records are not delivered twice), the cache
  // rewritten.
  const auto at = static_cast<std::streamoff>(size - 10000);
  {
    std::fstream f(cf, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(at);
    char c;
    f.get(c);
    f.seekp(at);
    f.put(static_cast<char>(c ^ 0x10));
  }
  std::vector<std::string> again;
  ReadStats s4;
  read_record_file_cached(file, cache.path.string(), keep(&again), &s4);
  EXPECT_EQ(again, parsed);
  std::vector<std::string> rewritten;
  ReadStats s5;
  read_record_file_cached(file, cache.path.string(), keep(&rewritten), &s5);
  EXPECT_EQ(rewritten, parsed);
  EXPECT_TRUE(bytes_of(cf) == original) << "the damaged cache file was not rewritten";
}

TEST(Dataset, StepsComeBackExactlyFromTheCompactCode) {
  // Every field of a step survives the varint code: extreme and negative integers, no list / a long
  // list, strings, empty steps and an empty program.
  MeasureRecord r;
  r.workload_key = "W";
  r.target = "llvm";
  r.costs = {1e-3};
  TransformStep a;
  a.kind = StepKind::kSplit;
  a.ints = {0, -1, 127, 128, -65, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(),
            int64_t{1} << 40};
  a.list_pos = 3;
  a.n_list = 100000;  // beyond the int16 the fixed-width layout kept (list_pos + n_list > ints: a
                      // code test only, never featurized)
  TransformStep b;
  b.kind = StepKind::kPragma;
  b.ints = {2, 7};
  b.str = "auto_unroll_max_step$512";
  TransformStep c;
  c.kind = StepKind::kComputeInline;  // no integers, no list (list_pos = n_list = -1)
  r.steps = {a, b, c, b};
  Dataset d;
  const int platform = d.intern_platform("p");
  d.add_record(r, platform, d.intern_group("g"));
  MeasureRecord empty = r;
  empty.steps.clear();
  d.add_record(empty, platform, 0);
  d.finalize();
  std::vector<StepView> v;
  std::vector<int64_t> ints;
  d.steps(0, &v, &ints);
  ASSERT_EQ(v.size(), r.steps.size());
  EXPECT_EQ(d.num_steps(0), 4);
  for (size_t i = 0; i < v.size(); ++i) {
    const TransformStep& want = r.steps[i];
    EXPECT_EQ(v[i].kind, want.kind) << i;
    EXPECT_EQ(std::vector<int64_t>(v[i].ints, v[i].ints + v[i].n_ints), want.ints) << i;
    EXPECT_EQ(v[i].list_pos, want.list_pos) << i;
    EXPECT_EQ(v[i].n_list, want.n_list) << i;
    EXPECT_EQ(v[i].str, want.str) << i;
  }
  d.steps(1, &v, &ints);
  EXPECT_TRUE(v.empty());
  EXPECT_EQ(d.num_steps(1), 0);
  EXPECT_TRUE(d.has_steps(1));
  // Features from the stored code equal features from the records' own steps (real records: the
  // featurizer trusts a step's list to lie within its integers, as the readers guarantee).
  const std::string file = test::source_dir() + "/data/records/k80/matmul/ansor_matmul_65536_1024_1024.log.gz";
  std::vector<MeasureRecord> records;
  ReadStats stats;
  read_record_file(file, [&](const MeasureRecord& rec, const RecordOrigin&) {
    if (records.size() < 200 && rec.error_no == 0) records.push_back(rec);
  }, &stats);
  ASSERT_EQ(records.size(), 200u);
  Dataset real;
  const int k80 = real.intern_platform("k80");
  for (const auto& rec : records) real.add_record(rec, k80, real.intern_group("g"));
  real.finalize();
  ASSERT_EQ(real.num_programs(), records.size());
  for (uint32_t p = 0; p < real.num_programs(); ++p) {
    std::vector<float> x, mask, want(static_cast<size_t>(real.max_steps()) * kStepFeatureDim);
    const int L = real.featurize({p}, &x, &mask);
    const int used = featurize_program(records[p].steps, L, want.data());
    ASSERT_EQ(used, L);
    ASSERT_EQ(x, std::vector<float>(want.begin(), want.begin() + static_cast<size_t>(L) * kStepFeatureDim)) << p;
  }
}

TEST(Dataset, ShardsKeepEveryProgramsMetadataAndTheStepsOfTheirOwnTasks) {
  // Real records, two shards: each keeps the costs, labels, tasks and lengths of all programs (so both
  // cut the same batches) and the steps of the tasks it owns; together they own every task once, and
  // the programs are dealt evenly (largest task first to the lighter shard: the two differ by at most
  // the largest task).
  const std::string dir = test::source_dir() + "/data/records/k80";
  const Dataset all = Dataset::load({DataSource::parse("k80=" + dir)}, LoadOptions{});
  ASSERT_GT(all.tasks().size(), 2u);
  std::vector<int> owners(all.tasks().size(), 0);
  int64_t programs_of[2] = {0, 0};
  size_t largest = 0;
  for (const Task& t : all.tasks()) largest = std::max(largest, t.programs.size());
  for (int shard = 0; shard < 2; ++shard) {
    LoadOptions lo;
    lo.shard = shard;
    lo.shards = 2;
    const Dataset d = Dataset::load({DataSource::parse("k80=" + dir)}, lo);
    ASSERT_EQ(d.num_programs(), all.num_programs());
    ASSERT_EQ(d.tasks().size(), all.tasks().size());
    EXPECT_EQ(d.feature_version(), all.feature_version());
    for (uint32_t t = 0; t < d.tasks().size(); ++t) {
      const Task& task = d.tasks()[t];
      ASSERT_EQ(task.programs, all.tasks()[t].programs);
      const bool own = d.shard_of(t) == shard;
      owners[t] += own;
      if (own) programs_of[shard] += static_cast<int64_t>(task.programs.size());
      for (uint32_t p : task.programs) {
        ASSERT_EQ(d.label(p), all.label(p));
        ASSERT_EQ(d.num_steps(p), all.num_steps(p));
        ASSERT_EQ(d.has_steps(p), own);
      }
      std::vector<float> x0, m0, x1, m1;
      if (own) {
        d.featurize(task.programs, &x1, &m1);
        all.featurize(task.programs, &x0, &m0);
        EXPECT_EQ(x1, x0);
      } else {
        EXPECT_NE(test::error_of([&] { d.featurize({task.programs[0]}, &x1, &m1); }).find("another shard"),
                  std::string::npos);
      }
    }
  }
  for (int n : owners) EXPECT_EQ(n, 1);
  EXPECT_EQ(programs_of[0] + programs_of[1], static_cast<int64_t>(all.num_programs()));
  EXPECT_LE(std::abs(programs_of[0] - programs_of[1]), static_cast<int64_t>(largest));
  EXPECT_EQ(all.shards(), 1);
  EXPECT_EQ(all.shard_of(0), 0);
  LoadOptions bad;
  bad.shard = 2;
  bad.shards = 2;
  EXPECT_NE(test::error_of([&] { Dataset::load({DataSource::parse("k80=" + dir)}, bad); }).find("shard 2 of 2"),
            std::string::npos);
}

TEST(Dataset, WorkloadIdentityWritesAnIntegerPaddingAsTheStringTvmPadsThatWay) {
  // TVM pads "SAME" by kernel - 1 in all, "VALID" by 0: the MI50's spellings of the K80's workloads.
  EXPECT_EQ(workload_identity(R"(["conv2d_layer", 128, 256, 14, 14, 256, 3, 3, 1, 1])"),
            R"(["conv2d_layer", 128, 256, 14, 14, 256, 3, 3, 1, "SAME"])");
  EXPECT_EQ(workload_identity(R"(["conv2d_layer", 128, 3, 230, 230, 64, 7, 7, 2, 0])"),
            R"(["conv2d_layer", 128, 3, 230, 230, 64, 7, 7, 2, "VALID"])");
  EXPECT_EQ(workload_identity(R"(["conv2d_layer",1,3,224,224,64,7,7,2,3])"), R"(["conv2d_layer",1,3,224,224,64,7,7,2,"SAME"])");
  EXPECT_EQ(workload_identity("[\"conv2d_layer\", 1, 3, 224, 224, 64, 7, 7, 2, 3 ]\n"),
            "[\"conv2d_layer\", 1, 3, 224, 224, 64, 7, 7, 2, \"SAME\"]\n");
  EXPECT_EQ(workload_identity(R"(["depthwise_conv2d_layer", 128, 336, 42, 42, 5, 5, 2, 2])"),
            R"(["depthwise_conv2d_layer", 128, 336, 42, 42, 5, 5, 2, "SAME"])");
  // A 1x1 kernel pads 0 either way: 0, "VALID" and "SAME" are one workload, written "SAME".
  for (const char* key : {R"(["conv2d_layer", 128, 168, 83, 83, 84, 1, 1, 1, 0])",
                          R"(["conv2d_layer", 128, 168, 83, 83, 84, 1, 1, 1, "VALID"])",
                          R"(["conv2d_layer", 128, 168, 83, 83, 84, 1, 1, 1, "SAME"])"}) {
    EXPECT_EQ(workload_identity(key), R"(["conv2d_layer", 128, 168, 83, 83, 84, 1, 1, 1, "SAME"])") << key;
  }
  // Its own identity: the strings of kernels above 1, an integer neither string means (a 3x3 kernel's 2,
  // an even kernel's), a non-square kernel, other workloads, TVM's hashed keys, and what is not such a list.
  for (const char* key : {R"(["conv2d_layer", 128, 256, 14, 14, 256, 3, 3, 1, "SAME"])",
                          R"(["conv2d_layer", 128, 256, 14, 14, 256, 3, 3, 1, "VALID"])",
                          R"(["conv2d_layer", 128, 256, 14, 14, 256, 3, 3, 1, 2])",
                          R"(["conv2d_layer", 128, 256, 14, 14, 256, 2, 2, 1, 1])",
                          R"(["conv2d_layer", 128, 256, 14, 14, 256, 1, 3, 1, 0])",
                          R"(["pool_layer", "avg", 128, 336, 21, 21, 3, 3, 1, 1])",
                          R"(["6f1c4ae2b0e3bb3bc0cd1a1d5bb4d4f2", [1, 3, 224, 224], [64, 3, 7, 7], [1, 64, 112, 112]])",
                          R"(["conv2d_layer", 128, 256, 14, 256, 3, 3, 1, 0])",  // an argument short
                          R"(["conv2d_layer", 128, 256, 14, 14, 256, 3.0, 3.0, 1, 1])",
                          R"(["conv2d_layer", 3, 3, 1, 0)", R"(["conv2d_layer"])", R"(["conv2d_layer", 0])", ""}) {
    EXPECT_EQ(workload_identity(key), key);
  }
}

TEST(Split, AWorkloadSpelledTwoWaysIsInOnePartOnEveryPlatform) {
  // Platform "a" spells the padding of 3x3 convolutions "SAME", "b" as 1 per side (the same
  // computation) for the first 100 and as 0 (another one: "VALID") for the next 100. A pair hashed
  // independently lands in one part with probability 0.2^2 + 0.1^2 + 0.7^2 = 0.54.
  test::TempDir dir;
  std::string a, b;
  for (int i = 0; i < 200; ++i) {
    const std::string head = R"(["conv2d_layer", 128, 64, )" + std::to_string(8 + i) + ", 8, 64, 3, 3, 1, ";
    for (double c : {1.0, 2.0}) {
      a += rec(head + R"("SAME"])", "llvm", {c});
      b += rec(head + (i < 100 ? "1]" : "0]"), "llvm", {c});
    }
  }
  test::write_text(dir.file("a.json"), a);
  test::write_text(dir.file("b.json"), b);
  const Dataset d = Dataset::load({DataSource::parse("a=" + dir.file("a.json")), DataSource::parse("b=" + dir.file("b.json"))},
                                  LoadOptions{});
  ASSERT_EQ(d.tasks().size(), 400u);
  const Split s = make_split(d, SplitOptions{});
  std::map<std::string, int> part;  // key -> 0 test, 1 valid, 2 train
  for (int p = 0; p < 3; ++p) {
    for (uint32_t t : p == 0 ? s.test : p == 1 ? s.valid : s.train) part[d.tasks()[t].workload_key] = p;
  }
  ASSERT_EQ(part.size(), 400u);
  int together = 0;
  for (int i = 0; i < 200; ++i) {
    const std::string head = R"(["conv2d_layer", 128, 64, )" + std::to_string(8 + i) + ", 8, 64, 3, 3, 1, ";
    const bool same = part.at(head + R"("SAME"])") == part.at(head + (i < 100 ? "1]" : "0]"));
    if (i < 100) {
      EXPECT_TRUE(same) << head;
    } else {
      together += same;
    }
  }
  EXPECT_LT(together, 90);  // 54 expected of 100; all 100 only if "0" were taken for "SAME"
}

TEST(Dataset, WorkloadIdentityMatchesTheComputationsOfTheRollerLogs) {
  // The K80 and V100 logs spell a convolution's padding "SAME"/"VALID", the MI50's as an integer per
  // side. Keys that differ only in the padding name one computation exactly when their first
  // program's split steps (the loops of the output: batch, channels, height, width) have the same
  // extents. Measured: each source pairs with 41 of the MI50's 43 convolutions under another
  // spelling; 2 are other computations (a 3x3 "SAME" against 0: output 14 against 12, 56 against
  // 54). The V100 also has one 1x1 convolution under both "SAME" and "VALID", one workload.
  const std::string shared = test::shared_data_dir();
  if (shared.empty()) GTEST_SKIP() << "../shared/data is absent";
  struct Conv {
    std::string key, workload;
    std::vector<int64_t> extents;  // of the first four split steps of the key's first program
  };
  std::map<std::string, std::vector<Conv>> conv;  // device -> one per key
  for (const char* device : {"k80", "v100", "mi50"}) {
    const std::string dir = shared + "/roller_osdi22/" + device + "/conv";
    if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << dir << " is absent";
    std::set<std::string> seen;
    for (const auto& f : list_record_files(dir)) {
      ReadStats stats;
      read_record_file(f, [&](const MeasureRecord& r, const RecordOrigin&) {
        if (!seen.insert(r.workload_key).second) return;
        Conv c{r.workload_key, workload_identity(r.workload_key), {}};
        for (const auto& st : r.steps) {
          if (st.kind == StepKind::kSplit && c.extents.size() < 4) c.extents.push_back(st.ints.at(2));
        }
        conv[device].push_back(std::move(c));
      }, &stats);
    }
  }
  auto stem = [](const std::string& key) { return key.substr(0, key.rfind(',')); };  // without the padding
  for (const char* source : {"k80", "v100"}) {
    int twins = 0, apart = 0;
    for (const Conv& a : conv.at(source)) {
      for (const Conv& b : conv.at("mi50")) {
        if (a.key == b.key || stem(a.key) != stem(b.key)) continue;
        const bool one = a.workload == b.workload;
        EXPECT_EQ(one, a.extents == b.extents) << a.key << " and " << b.key;
        (one ? twins : apart) += 1;
      }
    }
    std::printf("%s and mi50: %d pairs of keys of one workload, %d of two\n", source, twins, apart);
    EXPECT_EQ(twins, std::string(source) == "k80" ? 41 : 42) << source;  // the V100's 1x1 pairs twice
    EXPECT_EQ(apart, 2) << source;
  }
  // Within one device: the V100's two spellings of a 1x1 convolution, and nothing else.
  for (const char* device : {"k80", "v100", "mi50"}) {
    int same = 0;
    for (size_t i = 0; i < conv.at(device).size(); ++i) {
      for (size_t j = i + 1; j < conv.at(device).size(); ++j) same += conv.at(device)[i].workload == conv.at(device)[j].workload;
    }
    EXPECT_EQ(same, std::string(device) == "v100" ? 1 : 0) << device;
  }
}
