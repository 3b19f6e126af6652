// tests/torch/study_test.cpp: the study layer's results table (mean ± std over seeds, paired
// differences) and its resumable CSV journal.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "common/bytes.h"
#include "study/journal.h"
#include "study/results.h"
#include "test_util.h"

namespace tclm {
namespace {

using study::CsvJournal;
using study::ResultRow;
using study::ResultsTable;

ResultRow row(const std::string& method, int seed, double top1, const std::string& phase = "final",
              const std::string& platform = "v100", int phase_index = 0) {
  return ResultRow{{method, phase, platform, seed}, phase_index, {{"top1", top1}}};
}

TEST(StudyResults, MeanAndStdOverSeeds) {
  ResultsTable t;
  t.add(row("a", 0, 0.8));
  t.add(row("a", 1, 0.6));
  t.add(row("a", 2, 0.7));
  const study::SeedSummary s = t.summary("a", "final", "v100", "top1");
  // mean 0.7; deviations 0.1, -0.1, 0: sample variance (0.01 + 0.01) / 2 = 0.01, std 0.1
  EXPECT_EQ(s.n, 3u);
  EXPECT_NEAR(s.mean, 0.7, 1e-12);
  EXPECT_NEAR(s.std, 0.1, 1e-12);
  EXPECT_EQ(study::format_summary(s, 4), "0.7000 ± 0.1000");
  // one seed: no spread to show; none: "-"
  EXPECT_EQ(study::format_summary(study::summarize({{0, 0.25}}), 3), "0.250");
  EXPECT_EQ(study::format_summary(t.summary("b", "final", "v100", "top1"), 4), "-");
  EXPECT_EQ(t.summary("a", "final", "k80", "top1").n, 0u);  // another platform
  EXPECT_EQ(t.summary("a", "final", "v100", "top5").n, 0u);  // a figure the rows lack
}

TEST(StudyResults, PairedDifferencesBySeed) {
  ResultsTable t;
  for (auto [seed, x] : {std::pair{0, 0.8}, {1, 0.6}, {2, 0.7}}) t.add(row("tcl", seed, x));
  for (auto [seed, x] : {std::pair{0, 0.5}, {1, 0.5}, {2, 0.6}, {3, 0.9}}) t.add(row("ref", seed, x));
  const PairedDifference d = t.paired("tcl", "final", "ref", "final", "v100", "top1");
  // seed 3 has no tcl run: left out. Differences 0.3, 0.1, 0.1: mean 1/6; deviations 2/15, -1/15, -1/15,
  // sample variance (4 + 1 + 1) / 225 / 2 = 1/75, std 0.11547
  ASSERT_EQ(d.seeds, (std::vector<int>{0, 1, 2}));
  EXPECT_NEAR(d.diffs[0], 0.3, 1e-12);
  EXPECT_NEAR(d.mean, 1.0 / 6, 1e-12);
  EXPECT_NEAR(d.std, std::sqrt(1.0 / 75), 1e-12);
  EXPECT_EQ(study::format_paired_cell(d), "+0.167 ± 0.115 (+0.300, +0.100, +0.100) ahead");  // 0.167 - 0.115 > 0
  // The reference minus tcl: behind by the same.
  EXPECT_EQ(t.paired("ref", "final", "tcl", "final", "v100", "top1").verdict(), "behind");
}

TEST(StudyResults, OneSeedGivesNoPairedVerdict) {
  ResultsTable t;
  t.add(row("tcl", 0, 0.9));
  t.add(row("ref", 0, 0.6));
  const PairedDifference d = t.paired("tcl", "final", "ref", "final", "v100", "top1");
  ASSERT_EQ(d.diffs.size(), 1u);
  EXPECT_EQ(study::format_paired_cell(d), "+0.300 (1 seed: no paired verdict)");
  // No common seed: no cell at all.
  EXPECT_EQ(study::format_paired_cell(t.paired("tcl", "final", "none", "final", "v100", "top1")), "-");
}

TEST(StudyResults, LastPhaseAndOrderAndRefusals) {
  ResultsTable t;
  t.add(row("tcl", 0, 0.5, "learn k80", "v100", 1));
  t.add(row("tcl", 0, 0.7, "learn v100", "v100", 2));
  t.add(row("target-only", 0, 0.6));
  EXPECT_EQ(t.last_phase("tcl", "v100"), "learn v100");
  EXPECT_EQ(t.last_phase("target-only", "v100"), "final");
  EXPECT_EQ(t.last_phase("tcl", "k80"), "");
  EXPECT_EQ(t.methods(), (std::vector<std::string>{"tcl", "target-only"}));
  EXPECT_NE(test::error_of([&] { t.add(row("tcl", 0, 0.1, "learn k80", "v100", 1)); }).find("added twice"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { t.add(row("x", 0, std::nan(""))); }).find("not finite"), std::string::npos);
}

const std::string kHeader = "run,value";

TEST(StudyJournal, AppendsRowsAndReadsThemBack) {
  test::TempDir dir;
  const std::string path = dir.file("runs.csv");
  {
    CsvJournal j(path, kHeader, /*resume=*/false);
    EXPECT_TRUE(j.lines().empty());
    j.append("a,1");
    // flushed at once: a reader sees the row while the journal is still open
    EXPECT_EQ(read_file(path), "run,value\na,1\n");
    j.append("b,2");
  }
  CsvJournal again(path, kHeader, /*resume=*/true);
  ASSERT_EQ(again.lines().size(), 2u);
  EXPECT_EQ(again.lines()[1].number, 3);
  EXPECT_EQ(again.lines()[1].text, "b,2");
  EXPECT_EQ(again.lines()[1].fields, (std::vector<std::string>{"b", "2"}));
  EXPECT_FALSE(again.dropped_tail());
  // Without resume the file starts anew.
  CsvJournal fresh(path, kHeader, /*resume=*/false);
  EXPECT_TRUE(fresh.lines().empty());
  fresh.keep({});
  EXPECT_EQ(read_file(path), "run,value\n");
}

// A study of runs a, b, c: the first attempt finishes a and b, the resumed one runs only c.
TEST(StudyJournal, ResumeSkipsTheRunsDone) {
  test::TempDir dir;
  const std::string path = dir.file("runs.csv");
  auto study = [&](const std::vector<std::string>& runs, bool resume) {
    CsvJournal j(path, kHeader, resume);
    std::set<std::string> done;
    std::vector<std::string> kept;
    for (const auto& l : j.lines()) {
      done.insert(l.fields[0]);
      kept.push_back(l.text);
    }
    j.keep(kept);
    std::vector<std::string> ran;
    for (const auto& r : runs) {
      if (done.count(r)) continue;
      j.append(r + "," + std::to_string(r.size()));
      ran.push_back(r);
    }
    return ran;
  };
  EXPECT_EQ(study({"a", "b"}, false), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(study({"a", "b", "c"}, true), (std::vector<std::string>{"c"}));
  EXPECT_EQ(study({"a", "b", "c"}, true), (std::vector<std::string>{}));
  EXPECT_EQ(read_file(path), "run,value\na,1\nb,1\nc,1\n");
}

// A row whose write was cut short (no '\n': the process died in the middle of it) is dropped and its
// run done again; the rows before it are kept.
TEST(StudyJournal, ACutLastLineIsDroppedAndRedone) {
  test::TempDir dir;
  const std::string path = dir.file("runs.csv");
  test::write_text(path, "run,value\na,1\nb,1\nc,");
  CsvJournal j(path, kHeader, /*resume=*/true);
  EXPECT_TRUE(j.dropped_tail());
  ASSERT_EQ(j.lines().size(), 2u);
  EXPECT_EQ(j.lines()[1].text, "b,1");
  j.keep({j.lines()[0].text, j.lines()[1].text});
  j.append("c,1");
  EXPECT_EQ(read_file(path), "run,value\na,1\nb,1\nc,1\n");
  // A file that ends in a newline has no cut line, and empty lines are skipped.
  test::write_text(path, "run,value\na,1\n\nb,1\n");
  CsvJournal whole(path, kHeader, /*resume=*/true);
  EXPECT_FALSE(whole.dropped_tail());
  ASSERT_EQ(whole.lines().size(), 2u);
  EXPECT_EQ(whole.lines()[1].number, 4);
}

TEST(StudyJournal, AnotherHeaderIsRefusedNamingTheFile) {
  test::TempDir dir;
  const std::string path = dir.file("runs.csv");
  test::write_text(path, "run,other\na,1\n");
  const std::string e = test::error_of([&] { CsvJournal j(path, kHeader, /*resume=*/true); });
  EXPECT_NE(e.find(path + ":1:"), std::string::npos) << e;
  EXPECT_NE(e.find("run,other"), std::string::npos) << e;
}

TEST(StudyJournal, FieldsKeepEmptyOnes) {
  EXPECT_EQ(study::split_csv_fields("a,,b,"), (std::vector<std::string>{"a", "", "b", ""}));
  EXPECT_EQ(study::split_csv_fields(""), (std::vector<std::string>{""}));
}

}  // namespace
}  // namespace tclm
