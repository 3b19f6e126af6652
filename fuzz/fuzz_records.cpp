// fuzz/fuzz_records.cpp: libFuzzer harness of the Ansor record reader (tclm/record.h).
//
// Each input is a record file as a user could hand it to `tclm info/train/predict -d`:
//   1. every line goes through RecordParser::parse and parse_program_line (a line starting with '['
//      is read as a MetaSchedule trace there);
//   2. the whole input is written to a temporary file and read with read_record_file, which detects
//      gzip from the magic bytes (LineReader over zlib), so gzip streams, truncated ones included,
//      are reached too; the file name has no "tuning_record", so JSON-array lines are skipped as
//      MetaSchedule lines without a workload table (fuzz_ms_database covers those);
//   3. every record that parses is written back with record_to_json and parsed again: the re-parse
//      must succeed and give the same record (costs to 9 significant digits, as written);
//   4. every parsed program is featurized: no feature may be NaN or infinite.
// tclm::Error is the documented failure of the API and is caught; anything else escaping, a crash, a
// sanitizer report or a broken property (abort) is a finding.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "tclm/error.h"
#include "tclm/feature.h"
#include "tclm/record.h"

namespace {

using tclm::MeasureRecord;
using tclm::RecordParser;
using tclm::TransformStep;
using tclm_fuzz::fuzz_fail;

bool same_step(const TransformStep& a, const TransformStep& b) {
  return a.kind == b.kind && a.ints == b.ints && a.n_list == b.n_list && a.list_pos == b.list_pos && a.str == b.str;
}

bool close(double a, double b) {
  if (a == b) return true;
  // record_to_json writes 9 significant digits.
  return std::fabs(a - b) <= 1e-8 * std::max(std::fabs(a), std::fabs(b)) + 1e-300;
}

// Property 3: record_to_json writes one line that parses back to the same record.
void check_round_trip(const MeasureRecord& r, std::string_view source) {
  static RecordParser reparser;
  static MeasureRecord back;
  const std::string line = tclm::record_to_json(r);
  const std::string context = "input line: " + std::string(source.substr(0, 2000)) + "\nwritten: " + line.substr(0, 2000);
  if (line.find('\n') != std::string::npos) fuzz_fail("record_to_json wrote more than one line", context);
  const std::string why = reparser.parse(line, &back);
  if (!why.empty()) fuzz_fail("record_to_json output does not parse back", why + "\n" + context);
  std::string diff;
  if (back.workload_key != r.workload_key) diff += "workload_key ";
  if (back.target != r.target) diff += "target ";
  if (back.hw_params != r.hw_params) diff += "hw_params ";
  if (back.error_no != r.error_no) diff += "error_no ";
  if (back.timestamp != r.timestamp) diff += "timestamp ";
  if (back.version != (r.version.empty() ? "v0.6" : r.version)) diff += "version ";
  if (!close(back.all_cost, r.all_cost)) diff += "all_cost ";
  if (back.costs.size() != r.costs.size()) {
    diff += "costs(size) ";
  } else {
    for (size_t i = 0; i < r.costs.size(); ++i) {
      if (!close(back.costs[i], r.costs[i])) diff += "costs[" + std::to_string(i) + "] ";
    }
  }
  if (back.steps.size() != r.steps.size()) {
    diff += "steps(size) ";
  } else {
    for (size_t i = 0; i < r.steps.size(); ++i) {
      if (!same_step(back.steps[i], r.steps[i])) diff += "steps[" + std::to_string(i) + "] ";
    }
  }
  if (!diff.empty()) fuzz_fail("record_to_json -> parse changed the record", "fields: " + diff + "\n" + context);
}

void check_record(const MeasureRecord& r, std::string_view source) {
  if (r.workload_key.empty()) fuzz_fail("a record was delivered without a workload key", source);
  (void)r.valid();
  (void)r.mean_cost();
  check_round_trip(r, source);
  tclm_fuzz::check_finite_features(r.steps, "Ansor record");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  static RecordParser parser;  // reused across lines and inputs, as the readers do
  static MeasureRecord record, program;

  // 1. line by line
  tclm_fuzz::for_each_line(input, [&](std::string_view line) {
    if (parser.parse(line, &record).empty()) check_record(record, line);
    program.steps.clear();
    if (tclm::parse_program_line(line, parser, &program).empty()) {
      tclm_fuzz::check_finite_features(program.steps, "program line");
    }
  });

  // 2. as a file (plain or gzip)
  static const std::string path = tclm_fuzz::fuzz_temp_dir() + "/records.json";
  tclm_fuzz::write_bytes(path, data, size);
  tclm::ReadStats stats;
  try {
    tclm::read_record_file(
        path, [&](const MeasureRecord& r, const tclm::RecordOrigin& origin) {
          if (origin.file == nullptr || *origin.file != path || origin.line < 1) {
            fuzz_fail("read_record_file gave a wrong origin", path);
          }
          check_record(r, "(read_record_file)");
        },
        &stats);
  } catch (const tclm::Error&) {
    // documented: the file could not be opened
  }
  if (stats.skipped + stats.records > stats.lines + 1) {  // + 1: a gzip error is counted after the last line
    fuzz_fail("ReadStats counts more records and skipped lines than lines", stats.report());
  }
  (void)stats.report();
  return 0;
}
