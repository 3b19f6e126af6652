// Tests of the Ansor record reader on known records (values read off the JSON by hand), every format
// version present in TVM's tutorial logs, and malformed input.
#include <gtest/gtest.h>

#include <cmath>

#include "test_util.h"
#include "tclm/record.h"

using namespace tclm;

namespace {

// A real v0.6 line from the Platinum 8358 logs (tlcbench), shortened to 4 steps.
const char* kLine =
    R"({"i": [["[\"97d6699a083ccfb8655170ee1eb94e98\", [1024, 128, 128], [1024, 128, 96], [1024, 128, 96]]", )"
    R"("llvm -keys=cpu -mcpu=icelake-server -model=platinum-8358", [32, 64, 64, 0, 0, 0, 0, 0], "", 2, []], )"
    R"([[], [["CHW", 2, "local"], ["SP", 2, 0, 1024, [1, 2, 8], 1], ["PR", 2, 0, "auto_unroll_max_step$16"], )"
    R"(["CHR", 1, "shared", [3]]]]], "r": [[0.0169891, 0.016989], 0, 2.63283, 1682115502], "v": "v0.6"})";

std::vector<MeasureRecord> read_all(const std::string& path, ReadStats* stats) {
  std::vector<MeasureRecord> out;
  read_record_file(path, [&](const MeasureRecord& r, const RecordOrigin&) { out.push_back(r); }, stats);
  return out;
}

}  // namespace

TEST(RecordParser, KnownRecord) {
  RecordParser parser;
  MeasureRecord r;
  ASSERT_EQ(parser.parse(kLine, &r), "");
  EXPECT_EQ(r.workload_key, R"(["97d6699a083ccfb8655170ee1eb94e98", [1024, 128, 128], [1024, 128, 96], [1024, 128, 96]])");
  EXPECT_EQ(r.target, "llvm -keys=cpu -mcpu=icelake-server -model=platinum-8358");
  EXPECT_EQ(r.hw_params, (std::vector<int64_t>{32, 64, 64, 0, 0, 0, 0, 0}));
  ASSERT_EQ(r.steps.size(), 4u);
  EXPECT_EQ(r.steps[0].kind, StepKind::kCacheWrite);
  EXPECT_EQ(r.steps[0].ints, (std::vector<int64_t>{2}));
  EXPECT_EQ(r.steps[0].str, "local");
  EXPECT_EQ(r.steps[1].kind, StepKind::kSplit);
  EXPECT_EQ(r.steps[1].ints, (std::vector<int64_t>{2, 0, 1024, 1, 2, 8, 1}));
  EXPECT_EQ(r.steps[1].list_pos, 3);
  EXPECT_EQ(r.steps[1].n_list, 3);
  EXPECT_EQ(r.steps[2].kind, StepKind::kPragma);
  EXPECT_EQ(r.steps[2].str, "auto_unroll_max_step$16");
  EXPECT_EQ(r.steps[3].kind, StepKind::kCacheRead);
  EXPECT_EQ(r.steps[3].ints, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(r.steps[3].list_pos, 1);
  ASSERT_EQ(r.costs.size(), 2u);
  EXPECT_DOUBLE_EQ(r.costs[0], 0.0169891);
  EXPECT_DOUBLE_EQ(r.mean_cost(), (0.0169891 + 0.016989) / 2);
  EXPECT_EQ(r.error_no, 0);
  EXPECT_DOUBLE_EQ(r.all_cost, 2.63283);
  EXPECT_EQ(r.timestamp, 1682115502);
  EXPECT_EQ(r.version, "v0.6");
  EXPECT_TRUE(r.valid());
}

TEST(RecordParser, RoundTripThroughWriter) {
  RecordParser parser;
  MeasureRecord a, b;
  ASSERT_EQ(parser.parse(kLine, &a), "");
  const std::string line = record_to_json(a);
  ASSERT_EQ(parser.parse(line, &b), "") << line;
  EXPECT_EQ(a.workload_key, b.workload_key);
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (size_t i = 0; i < a.steps.size(); ++i) {
    EXPECT_EQ(a.steps[i].kind, b.steps[i].kind);
    EXPECT_EQ(a.steps[i].ints, b.steps[i].ints);
    EXPECT_EQ(a.steps[i].str, b.steps[i].str);
    EXPECT_EQ(a.steps[i].list_pos, b.steps[i].list_pos);
  }
  EXPECT_EQ(a.costs, b.costs);
}

TEST(RecordParser, ErrorRecordIsParsedButInvalid) {
  RecordParser parser;
  MeasureRecord r;
  std::string line = R"({"i": [["[\"k\"]", "cuda", [-1, 16], "", 0, []], [[], [["CI", 1]]]], "r": [[1e+10], 6, 10.0, 1], "v": "v0.6"})";
  ASSERT_EQ(parser.parse(line, &r), "");
  EXPECT_EQ(r.error_no, 6);
  EXPECT_FALSE(r.valid());
}

TEST(RecordParser, MalformedLinesGiveReasons) {
  RecordParser parser;
  MeasureRecord r;
  struct Case { std::string line, expect; };
  const std::vector<Case> cases = {
      {"{\"i\": [", "invalid JSON"},
      {"[1, 2]", "a JSON array, not an Ansor record object"},
      {"\"text\"", "not a JSON object"},
      {R"({"r": [[0.1], 0, 1, 1], "v": "v0.6"})", "missing field \"i\""},
      {R"({"i": [["k", "llvm"], [[], []]], "v": "v0.6"})", "missing field \"r\""},
      {R"({"i": [["k", "llvm"], [[], [["XX", 1]]]], "r": [[0.1], 0, 1, 1]})", "unknown step kind 'XX'"},
      {R"({"i": [["k", "llvm"], [[], [["SP", 1.5]]]], "r": [[0.1], 0, 1, 1]})", "expected an integer"},
      {R"({"i": [["k", "llvm"], [[], [["SP", 1]]]], "r": [["fast"], 0, 1, 1]})", "expected a number"},
      {R"({"i": [[7, "llvm"], [[], []]], "r": [[0.1], 0, 1, 1]})", "i[0][0]"},
      {R"({"i": [["k", "llvm"]], "r": [[0.1], 0, 1, 1]})", "missing transform steps"},
      {R"({"i": [["k", "llvm"], [[], []]], "r": [[0.1], 0, 1, 1]} trailing)", "invalid JSON"},
  };
  for (const auto& c : cases) {
    std::string why = parser.parse(c.line, &r);
    EXPECT_NE(why.find(c.expect), std::string::npos) << "line: " << c.line << "\nreason: " << why;
  }
}

// Found with the fuzz harness (docs/reliability.md, "Fuzzing"; inputs in fuzz/regressions/records/):
// out-of-range numbers in r are malformed, not undefined behaviour or a silently different value.
TEST(RecordParser, OutOfRangeResultNumbersAreMalformed) {
  RecordParser parser;
  MeasureRecord r;
  auto line = [](const std::string& result) { return R"({"i": [["k", "t"], [[], []]], "r": )" + result + "}"; };
  EXPECT_NE(parser.parse(line("[[1], 0, 1, 1e300]"), &r).find("r[3]: timestamp 1e+300 out of range"), std::string::npos);
  EXPECT_NE(parser.parse(line("[[1], 0, 1, 18446744073709551615]"), &r).find("r[3]: timestamp out of range"),
            std::string::npos);
  EXPECT_NE(parser.parse(line("[[1], 4294967296]"), &r).find("r[1]: error number 4294967296 out of range"),
            std::string::npos);
  ASSERT_EQ(parser.parse(line("[[1], 0, 1, 1607112214.75]"), &r), "");  // older logs: float seconds
  EXPECT_EQ(r.timestamp, 1607112214);
  ASSERT_EQ(parser.parse(line("[[1], 0, 1, 9007199254740993]"), &r), "");  // integers are read exactly
  EXPECT_EQ(r.timestamp, 9007199254740993);
}

// Found with the fuzz harness's round-trip property: strings with escaped control characters and a
// version with a quote must be written back as valid, one-line JSON.
TEST(RecordParser, WriterEscapesControlCharactersAndQuotes) {
  RecordParser parser;
  MeasureRecord a, b;
  ASSERT_EQ(parser.parse(R"({"i": [["k\n\u0000", "t\u0001\t"], [[], [["PR", 0, 0, "p\r"]]]], "r": [[1], 0], "v": "v\"\\"})", &a), "");
  EXPECT_EQ(a.workload_key, std::string("k\n\0", 3));
  const std::string line = record_to_json(a);
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  ASSERT_EQ(parser.parse(line, &b), "") << line;
  EXPECT_EQ(b.workload_key, a.workload_key);
  EXPECT_EQ(b.target, "t\x01\t");
  EXPECT_EQ(b.steps.at(0).str, "p\r");
  EXPECT_EQ(b.version, "v\"\\");
}

TEST(RecordFile, AllTvmTutorialVersionsParse) {
  // tests/data/tvm_ci_logs: TVM's tutorial logs (Apache-2.0) in format versions v0.2, v0.3, v0.5, v0.6.
  const std::string dir = test::source_dir() + "/tests/data/tvm_ci_logs";
  ReadStats stats;
  std::map<std::string, int> versions;
  int64_t n = 0;
  for (const auto& f : list_record_files(dir)) {
    read_record_file(f, [&](const MeasureRecord& r, const RecordOrigin&) {
      ++versions[r.version];
      ++n;
      EXPECT_FALSE(r.steps.empty());
    }, &stats);
  }
  EXPECT_EQ(stats.skipped, 0) << stats.report();
  EXPECT_EQ(n, 1 + 1 + 24 + 26 + 1);  // zcat | grep -c '"i"' per file
  EXPECT_EQ(versions["v0.2"], 1);
  EXPECT_EQ(versions["v0.3"], 1);
  EXPECT_EQ(versions["v0.5"], 50);
  EXPECT_EQ(versions["v0.6"], 1);
}

TEST(RecordFile, SkipsAndCountsBadLinesWithLineNumbers) {
  test::TempDir dir;
  const std::string path = dir.file("mixed.json");
  test::write_text(path, std::string("# comment\n") + kLine + "\n\nnot json\n" + kLine + "\n{\"i\": 1, \"r\": 2}\n" + kLine);
  ReadStats stats;
  auto records = read_all(path, &stats);
  EXPECT_EQ(records.size(), 3u);
  EXPECT_EQ(stats.records, 3);
  EXPECT_EQ(stats.skipped, 2);
  EXPECT_EQ(stats.lines, 7);
  ASSERT_EQ(stats.examples.size(), 2u);
  EXPECT_EQ(stats.examples[0].rfind(path + ":4: not a JSON object", 0), 0u) << stats.examples[0];
  EXPECT_EQ(stats.examples[1].rfind(path + ":6: i: expected an array", 0), 0u) << stats.examples[1];
}

// A candidate never measured (an Ansor line without "r") is malformed for the training readers and
// a record with measured == false, no costs and not valid() where unmeasured lines are allowed
// (tclm predict); the writer leaves "r" out for it, so it reads back the same way. Other defects are
// still refused with the option on.
TEST(RecordFile, UnmeasuredCandidatesOnlyWhereAllowed) {
  std::string candidate = kLine;
  candidate.erase(candidate.find(", \"r\": "), candidate.find(", \"v\"") - candidate.find(", \"r\": "));
  ASSERT_EQ(candidate.find("\"r\""), std::string::npos) << candidate;
  test::TempDir dir;
  const std::string path = dir.file("candidates.json");
  test::write_text(path, candidate + "\n" + kLine + "\n{\"v\": \"v0.6\"}\n");
  ReadStats strict;
  auto records = read_all(path, &strict);
  ASSERT_EQ(records.size(), 1u);  // the measured line only
  EXPECT_TRUE(records[0].measured);
  EXPECT_EQ(strict.skipped_by_reason.count("missing field \"r\""), 1u);
  ReadStats loose;
  RecordReadOptions ro;
  ro.allow_unmeasured = true;
  std::vector<MeasureRecord> all;
  read_record_file(path, [&](const MeasureRecord& r, const RecordOrigin&) { all.push_back(r); }, &loose, ro);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_FALSE(all[0].measured);
  EXPECT_TRUE(all[0].costs.empty());
  EXPECT_FALSE(all[0].valid());
  EXPECT_EQ(all[0].steps.size(), 4u);
  EXPECT_EQ(all[0].workload_key, all[1].workload_key);
  EXPECT_TRUE(all[1].measured);  // the reused record is reset between lines
  EXPECT_EQ(loose.skipped, 1);    // {"v": ...}: still no "i"
  RecordParser parser;
  parser.set_allow_unmeasured(true);
  MeasureRecord back;
  const std::string line = record_to_json(all[0]);
  EXPECT_EQ(line.find("\"r\""), std::string::npos) << line;
  ASSERT_EQ(parser.parse(line, &back), "") << line;
  EXPECT_FALSE(back.measured);
}

TEST(RecordFile, GzipAndTruncatedGzip) {
  test::TempDir dir;
  std::string text;
  for (int i = 0; i < 200; ++i) text += std::string(kLine) + "\n";
  const std::string gz = dir.file("ok.json.gz");
  test::write_gzip(gz, text);
  ReadStats s1;
  EXPECT_EQ(read_all(gz, &s1).size(), 200u);
  EXPECT_EQ(s1.skipped, 0);

  // Cut the compressed file in half: the records before the cut are delivered, the damage is
  // reported once, and nothing throws.
  std::string bytes;
  {
    std::ifstream in(gz, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string cut = dir.file("cut.json.gz");
  test::write_text(cut, bytes.substr(0, bytes.size() / 2));
  ReadStats s2;
  auto got = read_all(cut, &s2);
  EXPECT_LT(got.size(), 200u);
  EXPECT_GE(s2.skipped, 1);
  bool reported = false;
  for (const auto& [reason, n] : s2.skipped_by_reason) reported |= reason.find("gzip") != std::string::npos;
  EXPECT_TRUE(reported) << s2.report();
}

TEST(RecordFile, MissingFileThrowsNamingIt) {
  ReadStats stats;
  try {
    read_all("/nonexistent/tclm.json", &stats);
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/tclm.json"), std::string::npos);
  }
  EXPECT_THROW(list_record_files("/nonexistent/dir"), std::exception);
}

TEST(RecordFile, ReadsAllOfSharedDataWithoutAborting) {
  const std::string root = test::shared_data_dir();
  if (root.empty()) GTEST_SKIP() << "../shared/data not present";
  ReadStats stats;
  int64_t n = 0;
  for (const auto& f : list_record_files(root + "/roller_osdi22/k80")) {
    read_record_file(f, [&](const MeasureRecord&, const RecordOrigin&) { ++n; }, &stats);
  }
  // MANIFEST.md: roller_osdi22/k80 holds 93,076 records, all well-formed.
  EXPECT_EQ(n, 93076);
  EXPECT_EQ(stats.skipped, 0) << stats.report();
}
