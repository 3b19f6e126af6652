// fuzz/fuzz_ms_database.cpp: libFuzzer harness of the MetaSchedule database reader
// (src/record/trace_reader.cpp through tclm/record.h).
//
// An input is a database directory in one piece: the bytes before the first 0x00 are the workload
// table (database_workload.json), the bytes after it the tuning records
// (database_tuning_record.json). Without a 0x00 the whole input is the tuning records and there is
// no workload table beside them (the "no workload table" path). Both are written to a private
// temporary directory and read as a user's `tclm info -d DIR` would (read_record_file on both files;
// either may be gzip). Besides that, every tuning-record line goes through parse_program_line, and
// its trace (rec[1][0], re-serialized) and the line itself through parse_trace_json.
// Properties: a delivered record has a workload key "ms:<hash>", version "ms" and only trace steps;
// the workload table delivers no record; features are finite.
#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "tclm/error.h"
#include "tclm/feature.h"
#include "tclm/record.h"

namespace {

using tclm::MeasureRecord;
using tclm_fuzz::fuzz_fail;

void check_trace_steps(const std::vector<tclm::TransformStep>& steps, const char* what) {
  for (const tclm::TransformStep& st : steps) {
    if (!tclm::is_trace_kind(st.kind)) fuzz_fail("a trace produced an Ansor step kind", what);
    if (st.list_pos != tclm::trace_slot::kList || st.n_list < 0 ||
        static_cast<size_t>(st.list_pos) + static_cast<size_t>(st.n_list) != st.ints.size()) {
      fuzz_fail("a trace step breaks the layout of tclm/record.h (trace_slot)", what);
    }
  }
  tclm_fuzz::check_finite_features(steps, what);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t sep = input.find('\0');
  const bool have_table = sep != std::string_view::npos;
  const std::string_view table = have_table ? input.substr(0, sep) : std::string_view();
  const std::string_view tuning = have_table ? input.substr(sep + 1) : input;

  static const std::string dir = tclm_fuzz::fuzz_temp_dir();
  static const std::string table_path = dir + "/database_workload.json";
  static const std::string tuning_path = dir + "/database_tuning_record.json";
  if (have_table) {
    tclm_fuzz::write_bytes(table_path, table.data(), table.size());
  } else {
    std::remove(table_path.c_str());
  }
  tclm_fuzz::write_bytes(tuning_path, tuning.data(), tuning.size());

  // 1. the database as files
  tclm::ReadStats stats;
  try {
    tclm::read_record_file(
        tuning_path, [&](const MeasureRecord& r, const tclm::RecordOrigin&) {
          if (r.version == "ms") {
            if (r.workload_key.rfind("ms:", 0) != 0) fuzz_fail("MetaSchedule record without an ms: key", r.workload_key);
            check_trace_steps(r.steps, "tuning record");
          } else {
            tclm_fuzz::check_finite_features(r.steps, "Ansor line in a tuning-record file");
          }
          (void)r.valid();
        },
        &stats);
    if (have_table) {
      tclm::read_record_file(
          table_path, [&](const MeasureRecord&, const tclm::RecordOrigin&) {
            fuzz_fail("a workload table delivered a record", table_path);
          },
          &stats);
    }
  } catch (const tclm::Error&) {
    // documented: a file could not be opened
  }
  (void)stats.report();

  // 2. line by line: the tuning record's trace, the line as a trace, the line as a program line
  static simdjson::dom::parser json;
  static tclm::RecordParser parser;
  static MeasureRecord program;
  std::vector<tclm::TransformStep> steps;
  tclm_fuzz::for_each_line(tuning, [&](std::string_view line) {
    simdjson::dom::element root;
    simdjson::dom::array top, rec;
    if (!json.parse(line.data(), line.size(), true).get(root) && !root.get_array().get(top) && top.size() == 2 &&
        !top.at(1).get_array().get(rec) && rec.size() >= 1) {
      const std::string trace = simdjson::minify(rec.at(0).value_unsafe());
      if (tclm::parse_trace_json(trace, &steps).empty()) check_trace_steps(steps, "trace of a tuning record");
    }
    if (tclm::parse_trace_json(line, &steps).empty()) check_trace_steps(steps, "line as a trace");
    program.steps.clear();
    if (tclm::parse_program_line(line, parser, &program).empty()) {
      tclm_fuzz::check_finite_features(program.steps, "program line");
    }
  });
  return 0;
}
