// record/trace_reader.h: internal helpers of the MetaSchedule database reader (trace_reader.cpp),
// used by read_record_file and the record cache. The public entry points are in tclm/record.h.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tclm/record.h"

namespace tclm {

/// Canonical instruction name of a trace kind ("Split", "GetBlock", ..., "Other").
std::string_view trace_kind_name(StepKind kind);

/// Parses one line of database_tuning_record.json. workload_keys[i] is the structural hash of line i
/// of the workload table `table_name` (for messages). Returns "" on success, else the reason.
std::string parse_tuning_record_json(std::string_view line, const std::vector<std::string>& workload_keys,
                                     const std::string& table_name, MeasureRecord* record);

/// True for a MetaSchedule workload table (a file named database_workload*).
bool is_workload_table(const std::string& path);
/// The workload table beside a tuning-record file: ".../X_tuning_record.json[.gz]" ->
/// ".../X_workload.json" or ".json.gz" (whichever exists; "" when the name has no "tuning_record").
std::string workload_table_of(const std::string& tuning_record_path);
/// The structural hashes of a workload table, in line order (empty when the file does not exist).
/// Malformed lines keep their index under a placeholder key and are counted in `stats`.
std::vector<std::string> read_workload_table(const std::string& path, ReadStats* stats);

}  // namespace tclm
