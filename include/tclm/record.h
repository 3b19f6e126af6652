// tclm/record.h: measure records -> programs. Two formats:
//  * Ansor measure records (TVM auto_scheduler RecordToFile format);
//  * MetaSchedule JSON databases (database_tuning_record.json + database_workload.json), whose trace
//    instructions become steps of the kinds kTrace* below (docs/feature-encoding.md, "MetaSchedule").
//
// One JSON object per line (format versions v0.2 .. v0.6, see TVM src/auto_scheduler/measure_record.cc):
//   {"i": [[workload_key, target, hw_params, target_host, layout_rewrite, task_input_names],
//          [[], steps]],
//    "r": [[cost_sec, ...], error_no, all_cost_sec, timestamp],
//    "v": "v0.6"}
// v0.2-v0.5 have fewer elements in i[0] (v0.2/v0.3: workload_key and target only). Files may be gzip
// compressed (detected from the magic bytes, not the name). Lines that are empty or start with '#'
// are comments. A malformed line is skipped, counted and reported with file:line; it never aborts.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace tclm {

/// The Ansor transform-step kinds, in a fixed order that is part of the feature encoding
/// (docs/feature-encoding.md). Record prefixes: AN FU PR RE SP FSP FFSP SA CA CI CR CHR CHW RF.
enum class StepKind : uint8_t {
  kAnnotation = 0,    // AN  stage_id, iter_id, annotation enum
  kFuse,              // FU  stage_id, [fused iter ids]
  kPragma,            // PR  stage_id, iter_id, "pragma$value"
  kReorder,           // RE  stage_id, [after ids]
  kSplit,             // SP  stage_id, iter_id, extent (0 = undefined), [lengths], inner_to_outer
  kFollowSplit,       // FSP stage_id, iter_id, src_step_id, n_split
  kFollowFusedSplit,  // FFSP stage_id, iter_id, [src_step_ids], level, factor_or_nparts
  kStorageAlign,      // SA  stage_id, iter_id, factor, offset
  kComputeAt,         // CA  stage_id, target_stage_id, target_iter_id
  kComputeInline,     // CI  stage_id
  kComputeRoot,       // CR  stage_id
  kCacheRead,         // CHR stage_id, "scope", [reader stage ids]
  kCacheWrite,        // CHW stage_id, "scope"
  kRfactor,           // RF  stage_id, iter_id, factor_iter_id

  // MetaSchedule trace instructions (TVM s_tir/schedule instruction kinds). A program is either all
  // Ansor steps or all trace instructions. GetBlock (TVM <= 0.23) and GetSBlock (0.24+) are one kind;
  // GetProducers/GetConsumers/GetOutputBlocks are one; instructions not listed are kTraceOther.
  kTraceSamplePerfectTile = 14,
  kTraceSampleCategorical,
  kTraceSampleComputeLocation,
  kTraceSplit,
  kTraceFuse,
  kTraceReorder,
  kTraceParallel,
  kTraceVectorize,
  kTraceUnroll,
  kTraceBind,
  kTraceComputeAt,
  kTraceReverseComputeAt,
  kTraceComputeInline,
  kTraceReverseComputeInline,
  kTraceCacheRead,
  kTraceCacheWrite,
  kTraceAnnotate,
  kTraceUnannotate,
  kTraceGetBlock,
  kTraceGetLoops,
  kTraceGetChildBlocks,
  kTraceGetProducersConsumers,
  kTraceDecomposeReduction,
  kTraceRFactor,
  kTraceBlockize,
  kTraceTensorize,
  kTraceStorageAlign,
  kTraceSetScope,
  kTraceTransformLayout,
  kTraceAddUnitLoop,
  kTraceEnterPostproc,
  kTraceOther,
};
inline constexpr int kNumAnsorStepKinds = 14;
inline constexpr int kFirstTraceKind = 14;
inline constexpr int kNumTraceKinds = 32;
inline constexpr int kNumStepKinds = kFirstTraceKind + kNumTraceKinds;  // all kinds, both formats

inline bool is_trace_kind(StepKind k) { return static_cast<int>(k) >= kFirstTraceKind; }

/// Record prefix of an Ansor kind ("SP", ...) or instruction name of a trace kind ("Split", ...).
std::string_view step_kind_name(StepKind kind);
/// Kind of an Ansor record prefix; returns false for an unknown prefix.
bool parse_step_kind(std::string_view prefix, StepKind* kind);
/// Kind of a MetaSchedule instruction name (never fails: unknown names are kTraceOther).
StepKind trace_kind_of(std::string_view instruction_name);

/// One transform step. `ints` holds the integer arguments in record order with nested lists
/// flattened (e.g. SP: stage_id, iter_id, extent, l_0..l_{k-1}, inner_to_outer; `n_list` = k is the
/// length of the one nested list, -1 if the step has none). The step's single string argument, if
/// any (PR pragma, CHR/CHW scope), is in `str`. Booleans are stored as 0/1, null as 0.
struct TransformStep {
  StepKind kind = StepKind::kAnnotation;
  std::vector<int64_t> ints;
  int32_t n_list = -1;   // length of the nested list, or -1
  int32_t list_pos = -1; // index in `ints` where the nested list starts, or -1
  std::string str;
};

/// Layout of a trace instruction's TransformStep (the RVs of the trace resolved while parsing):
///   ints = [n_inputs, n_outputs, value, value_known, in_postproc, list...], list_pos = 5.
///   value: SamplePerfectTile max_innermost_factor; SampleCategorical the chosen candidate;
///   SampleComputeLocation the decision; Split/Fuse/Parallel/Vectorize/Unroll/Bind the extent of
///   the loop they act on or make, when the trace's splits determine it; Annotate its integer
///   value; CacheRead/CacheWrite the buffer index; ComputeAt/ReverseComputeAt preserve_unit_loops.
///   list: SamplePerfectTile the sampled tile sizes; Split the factors (0 = not known);
///   SampleCategorical [decision index, number of candidates].
///   str: Annotate/Unannotate the annotation key; Bind the thread axis; CacheRead/CacheWrite/
///   SetScope the storage scope; kTraceOther the instruction name.
namespace trace_slot {
inline constexpr int kNumInputs = 0, kNumOutputs = 1, kValue = 2, kValueKnown = 3, kInPostproc = 4, kList = 5;
}

/// Parses a MetaSchedule trace as TVM's Trace::AsJSON writes it, `[[inst...], [[inst_index,
/// decision]...]]` with inst = `[kind, inputs, attrs, outputs]`, into steps (layout above).
/// Returns an empty string on success, else the reason it is malformed.
std::string parse_trace_json(std::string_view trace_json, std::vector<TransformStep>* steps);

/// Error numbers of Ansor's MeasureErrorNO (0 = no error).
enum class MeasureError : int {
  kNoError = 0, kInstantiationError = 1, kCompileHostError = 2, kCompileDeviceError = 3,
  kRuntimeDeviceError = 4, kWrongAnswer = 5, kBuildTimeout = 6, kRunTimeout = 7, kUnknown = 8,
};

/// One measured program: the task it belongs to, its transform steps and its measured costs.
/// The smallest cost (seconds) taken as a measurement: no program runs in under a nanosecond (a
/// kernel launch alone takes microseconds), so a smaller cost (0, 1e-40) is a broken measurement, and
/// kept as valid it would become its task's best program.
constexpr double kMinPlausibleCost = 1e-9;
/// Costs from here up are failure markers (Ansor writes 1e10, MetaSchedule 1e9 for a failed run).
constexpr double kMaxPlausibleCost = 1e9;

struct MeasureRecord {
  std::string workload_key;           // i[0][0], verbatim (a JSON string holding a list)
  std::string target;                 // i[0][1], verbatim target string
  std::vector<int64_t> hw_params;     // i[0][2] (empty before v0.4): num_cores, vector_unit_bytes, ...
  std::vector<TransformStep> steps;   // i[1][1]
  std::vector<double> costs;          // r[0], seconds per repeat
  int error_no = 0;                   // r[1]
  double all_cost = 0;                // r[2], seconds (build + run)
  int64_t timestamp = 0;              // r[3], unix seconds
  std::string version;                // "v0.6", ...
  bool measured = true;               // false: a candidate without "r" (RecordReadOptions::allow_unmeasured)

  /// Empties every field but `steps`, which the parsers overwrite in place (reusing each step's
  /// storage from the previous line).
  void clear_all_but_steps();
  /// Mean of `costs` in seconds (the TenSet/TLP program cost); +inf when there is none.
  double mean_cost() const;
  /// True when the record measured successfully: error_no == 0 and every cost finite, at least
  /// kMinPlausibleCost and below kMaxPlausibleCost. Other records are "bad costs" (tclm info).
  bool valid() const;
};

/// Where a record came from: the file and its 1-based line.
struct RecordOrigin {
  const std::string* file = nullptr;
  int64_t line = 0;
};

/// Counts of what a reader saw. Skipped lines are counted by reason; the first few of each reason
/// are kept with file:line for the report.
struct ReadStats {
  int64_t files = 0;
  int64_t lines = 0;      // all lines, including comments and blanks
  int64_t records = 0;    // well-formed records delivered
  int64_t skipped = 0;    // malformed lines (sum of by_reason)
  int64_t workload_tables = 0;  // MetaSchedule database_workload.json files (read as lookup tables)
  std::map<std::string, int64_t> skipped_by_reason;
  std::vector<std::string> examples;  // "file:line: reason", at most `max_examples`
  /// Files and directories not read because they were reached before (collect_record_files): the
  /// same file given twice or through a link, a link back to a directory above it (a cycle).
  std::vector<std::string> left_out;
  size_t max_examples = 20;

  void skip(const std::string& file, int64_t line, const std::string& reason);
  void merge(const ReadStats& other);
  /// A human summary: one line per reason with its count, then the kept examples.
  std::string report() const;
};

/// Parses one record line. Returns an empty string on success, else the reason it is malformed
/// (e.g. "i[1][1][3]: unknown step kind 'XX'"). `record` is reused between calls so that its
/// vectors keep their capacity. Not thread-safe per RecordParser; use one per thread.
class RecordParser {
 public:
  RecordParser();
  ~RecordParser();
  RecordParser(const RecordParser&) = delete;
  RecordParser& operator=(const RecordParser&) = delete;
  std::string parse(std::string_view line, MeasureRecord* record);
  /// Accept Ansor lines without "r" (a candidate never measured): record->measured is false, it has
  /// no costs and is not valid(). Off by default: training and evaluation data must be measured.
  void set_allow_unmeasured(bool allow);

 private:
  struct Impl;
  Impl* impl_;
};

/// Parses a program given as one line, as a tuner hands candidates over: a MetaSchedule trace (a line
/// whose first non-blank character is '[', parse_trace_json; only record->steps is set) or an Ansor
/// record (anything else, `parser`). Returns an empty string on success, else the reason.
std::string parse_program_line(std::string_view line, RecordParser& parser, MeasureRecord* record);

/// Streams every record of one file (plain or gzip): Ansor record lines, or the lines of a
/// MetaSchedule `database_tuning_record.json` (`[workload_index, [trace, run_secs, target, args]]`;
/// the workload key is "ms:" + the structural hash of line workload_index of the sibling
/// `database_workload.json`, the target is the target JSON, the costs are run_secs, and a record
/// without run_secs, or with a cost >= 1e9 (what MetaSchedule commits for a failed run), gets error_no
/// kUnknown). A workload table file itself delivers no records; it is counted in
/// stats->workload_tables. `fn` is called with each well-formed record;
/// the record object is reused, copy what you keep. Malformed lines and a truncated gzip stream are
/// counted in `stats` with file:line. Throws tclm::Error only when the file cannot be opened.
struct RecordReadOptions {
  /// Ansor lines without "r" are candidates to score (`tclm predict`), not malformed lines
  /// (RecordParser::set_allow_unmeasured).
  bool allow_unmeasured = false;
};
void read_record_file(const std::string& path,
                      const std::function<void(const MeasureRecord&, const RecordOrigin&)>& fn,
                      ReadStats* stats, const RecordReadOptions& options = {});

/// The record files of several paths (files or directory trees), each file once by its real path.
struct RecordFiles {
  std::vector<std::pair<size_t, std::string>> files;  // (index into the paths, file), each path's sorted
  std::vector<std::string> left_out;  // one line per file or directory left out, and why
};
/// Lists the record files of `paths`: a file itself, or every regular file below a directory (sorted
/// per path, so that the order is deterministic), skipping names that start with '.' or end in
/// .md/.txt/.tsv/.py. Links are followed, but every file is listed once by its canonical path (the
/// same file given twice, a directory and a link to it, a hard link) and every directory is walked
/// once (a link to a directory above it, a cycle, is not followed); what was left out is listed with
/// the reason. Throws tclm::Error when a path does not exist or a directory cannot be listed.
RecordFiles collect_record_files(const std::vector<std::string>& paths);
/// collect_record_files of one path, the files only.
std::vector<std::string> list_record_files(const std::string& path);

/// Writes one record in the v0.6 line format (used by tests and `tclm` tools that emit records); a
/// record that is not `measured` is written without "r".
std::string record_to_json(const MeasureRecord& record);

}  // namespace tclm
