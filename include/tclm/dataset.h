// tclm/dataset.h: measured programs grouped into tasks, with labels and task-disjoint splits.
//
// Task     = (workload key, platform). Platform = a user-given name (the `NAME=` of a data source,
//            e.g. "k80") or else the normalized target (normalize_target).
// Label    = normalized throughput min_cost(task) / mean_cost(program), in (0, 1] (TenSet/TLP).
// Records with error_no != 0 or non-positive / non-finite costs are counted and kept out.
// Programs are stored as varint-coded transform steps in 4 MB blocks (~0.3 KB per program of Ansor
// records, docs/reliability.md "Scale") so that millions of them fit in memory; features are computed
// per batch (tclm/feature.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tclm/feature.h"
#include "tclm/record.h"

namespace tclm {

/// One input of a dataset: a record file or directory tree, with an optional platform name.
/// Parsed from "NAME=PATH" or "PATH".
struct DataSource {
  std::string path;
  std::string platform;  // empty = use the normalized target of each record
  static DataSource parse(const std::string& spec);
};

/// "llvm -keys=cpu -mcpu=skylake-avx512 -num_cores=..." -> "llvm -mcpu=skylake-avx512 cores=24":
/// the target kind plus the options that identify hardware (-mcpu, -model, -arch, -mtriple,
/// -device) and, for CPU targets, the core count from hw_params[0].
std::string normalize_target(const std::string& target, const std::vector<int64_t>& hw_params);

/// Per-platform counts for `tclm info`.
struct PlatformStats {
  int64_t records = 0;        // well-formed records read
  int64_t programs = 0;       // valid programs kept
  int64_t errors = 0;         // error_no != 0
  int64_t bad_costs = 0;      // error_no == 0 but a cost below 1e-9 s, non-finite or >= 1e9 (MeasureRecord::valid)
  int64_t truncated = 0;      // programs longer than max_steps (cut when featurized)
  int64_t duplicates = 0;     // a candidate pool's programs whose steps occurred before in their task (LoadOptions::candidates)
  std::map<int, int64_t> errors_by_code;
  int64_t tasks = 0;
};

/// Per-platform counts and the reader's statistics of some sources: what `tclm info` prints.
struct DataSummary {
  std::vector<std::string> platforms;
  std::vector<PlatformStats> platform_stats;  // one per platform
  ReadStats read_stats;
};

/// The workload a key names, for comparing tasks across platforms: the key itself, except where two
/// spellings of one computation occur. Roller's convolution workloads (["conv2d_layer", ..., kernel_h,
/// kernel_w, stride, padding] and the same for "depthwise_conv2d_layer") give the padding as "SAME" or
/// "VALID" in some machines' logs and as an integer per side in others'. TVM pads "SAME" by
/// kernel - 1 in all and "VALID" by 0 (topi get_pad_tuple), so with a square kernel an integer that
/// one of them means is written as it: 0 as "VALID", (kernel - 1) / 2 of an odd kernel as "SAME", and
/// for a 1x1 kernel, where both pad 0, "SAME" (so its "VALID" becomes "SAME" too). Every other key
/// (and any key that is not such a list) is its own identity.
std::string workload_identity(std::string_view workload_key);

struct Task {
  std::string workload_key;
  std::string workload;  // workload_identity(workload_key): what the split and CKD compare across platforms
  int platform = 0;
  std::vector<int> groups;         // indices into Dataset::groups (network / directory names)
  double min_cost = 0;             // seconds
  std::vector<uint32_t> programs;  // indices into the dataset's programs
};

struct LoadOptions {
  int max_steps = kDefaultMaxSteps;
  std::string cache_dir;  // empty = no cache; else parsed files are cached there (tclm binary cache)
  bool progress = false;  // print progress to stderr
  /// Data-parallel training (train/distributed.h): this process keeps the steps of the tasks it owns
  /// (Dataset::shard_of(task) == shard) and only the metadata (cost, label, task, length) of the others,
  /// so that every process can cut the same global batches. With shards > 1 the sources are read
  /// twice: first to count each task's valid programs, then the tasks are dealt to the shards, largest
  /// first, each to the shard with the fewest programs so far (the same on every process), and the
  /// second read keeps this shard's steps. shards = 1: everything is kept, read once.
  int shard = 0;
  int shards = 1;
  /// A candidate pool (`tclm transfer --candidates`, what `tclm collect` writes to OUT/pool): Ansor
  /// lines without "r" are read too, and every program is kept whether it was measured, failed or not,
  /// at a cost of 1 s, so its labels are all 1 and mean nothing (CKD's KD phase, the one reader of such
  /// a dataset, reads no label). A program whose transform steps occur twice in a task is kept once
  /// (PlatformStats::duplicates). The cache (cache_dir) is not used.
  bool candidates = false;
};

class Dataset;

/// Streams every record of `sources` (file by file; through the binary cache when options.cache_dir is
/// set, building it for files not cached yet) and counts them exactly as Dataset::load would, without
/// keeping any program: memory grows with the number of tasks, not of records (docs/reliability.md,
/// "Scale"). Throws tclm::Error only when a source path does not exist.
DataSummary summarize_sources(const std::vector<DataSource>& sources, const LoadOptions& options);

class Dataset {
 public:
  /// Reads every source. Malformed lines are skipped and counted (stats()); throws tclm::Error only
  /// when a source path does not exist.
  static Dataset load(const std::vector<DataSource>& sources, const LoadOptions& options);

  size_t num_programs() const { return cost_.size(); }
  const std::vector<Task>& tasks() const { return tasks_; }
  const std::vector<std::string>& platforms() const { return platforms_; }
  const std::vector<std::string>& groups() const { return groups_; }
  const std::vector<PlatformStats>& platform_stats() const { return platform_stats_; }
  const ReadStats& read_stats() const { return read_stats_; }
  /// The counts `tclm info` prints (a copy).
  DataSummary summary() const { return DataSummary{platforms_, platform_stats_, read_stats_}; }
  int max_steps() const { return max_steps_; }
  /// The feature encoding of the programs: kFeatureVersion (Ansor records) or kTraceFeatureVersion
  /// (MetaSchedule databases); kFeatureVersion when there is no program. Throws tclm::Error when the
  /// dataset mixes both (one model reads one family: load them as separate datasets).
  uint32_t feature_version() const;

  double cost(uint32_t p) const { return cost_[p]; }             // mean cost, seconds
  float label(uint32_t p) const { return label_[p]; }            // min_cost(task) / cost
  uint32_t task_of(uint32_t p) const { return task_of_[p]; }
  int num_steps(uint32_t p) const { return static_cast<int>(n_steps_[p]); }
  /// The program's steps, decoded: views whose integers live in `*ints` (overwritten) and whose strings
  /// live in the dataset; valid while both live and `*ints` is not touched. Throws tclm::Error for a
  /// program of a task another shard owns (has_steps).
  void steps(uint32_t p, std::vector<StepView>* out, std::vector<int64_t>* ints) const;
  /// False for the programs of tasks another shard owns (LoadOptions::shard): their steps are not kept.
  bool has_steps(uint32_t p) const { return code_at_[p] != kNoCode; }
  /// The shards the dataset was loaded as (LoadOptions::shards) and the shard that owns a task (0 when
  /// there is one).
  int shards() const { return shards_; }
  int shard_of(uint32_t task) const { return task_shard_.empty() ? 0 : task_shard_[task]; }
  /// Bytes held per program (programs' codes and per-program arrays, capacity included): what
  /// bench_scale reports.
  size_t program_bytes() const;

  /// Featurizes programs into x[n, L, F] and mask[n, L] (1 = real step), L = min(max_steps, longest
  /// program in the list). Returns L.
  int featurize(const std::vector<uint32_t>& programs, std::vector<float>* x, std::vector<float>* mask) const;

  /// The masked mean, masked max and log2(1 + length) of each program's step features: a fixed-size
  /// vector (kPooledFeatureDim floats, row-major [n, kPooledFeatureDim]) for models that do not read
  /// sequences (the MLP and XGBoost baselines) and for the sampler's clustering (pool_step_features).
  void pooled_features(const std::vector<uint32_t>& programs, std::vector<float>* out) const;
  /// A dataset holding only `programs` (program i of the result is programs[i]), with the same tasks
  /// (same indices, so a Split of this dataset still applies), platforms and groups; each task's
  /// min_cost and labels are recomputed from the programs kept, as if only they had been measured.
  /// Throws tclm::Error on an index out of range or a program listed twice.
  Dataset subset(const std::vector<uint32_t>& programs) const;
  /// Adds one record (used by load and by tests): a valid one becomes a program of its task; an
  /// error or bad-cost record is only counted in platform_stats().
  /// With keep_steps false only the program's metadata is kept (a task another shard owns).
  void add_record(const MeasureRecord& r, int platform, int group, bool keep_steps = true);
  int intern_platform(const std::string& name);
  int intern_group(const std::string& name);
  /// Computes min_cost and labels; call after the last add_record.
  void finalize();

 private:
  int max_steps_ = kDefaultMaxSteps;
  int shards_ = 1;
  std::vector<int> task_shard_;  // owner of each task; empty when shards_ == 1
  std::vector<std::string> platforms_, groups_, strings_;
  std::map<std::string, int> platform_index_, group_index_, string_index_;
  std::map<std::pair<int, std::string>, uint32_t> task_index_;
  std::vector<Task> tasks_;
  std::vector<PlatformStats> platform_stats_;
  ReadStats read_stats_;
  // Programs: each step coded as kind (1 byte), then varints: string id + 1 (0: none), zigzag
  // list_pos, zigzag n_list, n_ints, zigzag ints. A program's code is contiguous in one block of
  // 4 MB (a longer one gets a block of its own): no reallocation while loading, less than one block
  // unused. code_at_[p] = block << kBlockBits | offset, kNoCode for a program another shard keeps.
  static constexpr int kBlockBits = 22;
  static constexpr uint64_t kNoCode = ~uint64_t{0};
  void append_code(const std::vector<uint8_t>& code);  // pushes code_at_
  const uint8_t* code_begin(uint32_t p, const uint8_t** end) const;
  // steps(), returning the end of the program's code (nullptr for a program without steps).
  const uint8_t* decode(uint32_t p, std::vector<StepView>* out, std::vector<int64_t>* ints) const;
  std::vector<std::vector<uint8_t>> blocks_;
  std::vector<uint64_t> code_at_;
  std::vector<uint32_t> n_steps_;
  int64_t trace_programs_ = 0, ansor_programs_ = 0;  // for feature_version(), over every program
  std::vector<double> cost_;
  std::vector<float> label_;
  std::vector<uint32_t> task_of_;
};

/// How a split holds tasks out.
enum class SplitMode { kTask, kGroup };

struct SplitOptions {
  double test_fraction = 0.2;
  double valid_fraction = 0.1;  // of all units, taken from the non-test ones
  uint64_t seed = 0;
  SplitMode mode = SplitMode::kTask;
  int min_programs = 2;  // tasks with fewer valid programs are left out of every part (counted)
  /// Tuning split (nested; `--tuning-split`): the test units of the split above are left out of every
  /// part (counted in Split::held_out), and the remaining units are split again, by a second hash of
  /// (seed, unit), with the same fractions. Its train/valid/test all come from the outer train+valid
  /// side, so options (sampler weights, EWC strength, epochs) can be chosen on its test figures
  /// without the real test tasks ever being read; final figures are then reported without it.
  bool tuning = false;
};

/// Task indices of each part. Deterministic: a unit (the workload in kTask mode, Task::workload, so
/// the same workload is held out on every platform; group name in kGroup mode) goes to a part by a hash of
/// (seed, unit), independent of the order of the data. In kGroup mode a task that occurs in any
/// test group is a test task (no test task is ever seen in training). Throws tclm::Error when the
/// fractions are negative or sum to 1 or more.
struct Split {
  std::vector<uint32_t> train, valid, test;
  int64_t too_small = 0;  // tasks left out for having < min_programs programs
  int64_t held_out = 0;   // tuning split only: tasks of the outer test part, left out of every part
};
Split make_split(const Dataset& data, const SplitOptions& options);

/// 64-bit FNV-1a, used for deterministic splits and cache keys.
uint64_t fnv1a64(std::string_view s, uint64_t seed = 0);

}  // namespace tclm
