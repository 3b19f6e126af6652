// tools/cli_common.h: what the tclm commands share: dataset options, JSON helpers, the split log, and
// the Command type through which each command file registers itself (tools/cmd_*.cpp).
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/bytes.h"
#include "tclm/dataset.h"
#include "tclm/error.h"
#include "tclm/evaluation.h"
#include "tclm/selection.h"

#ifndef TCLM_DEFAULT_DATA
#define TCLM_DEFAULT_DATA "data/records"
#endif
#ifndef TCLM_MEASURED_DATA
#define TCLM_MEASURED_DATA "data/measured"
#endif

namespace tclm::cli {

/// For unsigned options (seeds): CLI11 would wrap "-1" around to 2^64 - 1.
inline const CLI::Validator kNonNegativeInteger(
    [](std::string& v) { return v.find('-') != std::string::npos ? std::string("must be a non-negative integer") : std::string(); },
    "UINT");

/// An option whose value is one of `names`, stored as an enum: CLI11 refuses other values (listing
/// the choices, exit code 2), `parse` (the enum's own parse_X) turns the name into the value, and the
/// help shows the default as its name.
template <class E, class Parse>
CLI::Option* add_enum_option(CLI::App* cmd, const std::string& flags, E* target, const std::vector<std::string>& names,
                             Parse parse, const std::string& description) {
  return cmd
      ->add_option_function<std::string>(flags, [target, parse](const std::string& s) { *target = parse(s, ""); },
                                         description)
      ->check(CLI::IsMember(names))
      ->default_str(to_string(*target));
}

/// --select: which validation figure picks the kept epoch (TrainOptions::select, tclm/selection.h);
/// `stopping` says in the help when training stops for want of a better epoch.
void add_select_option(CLI::App* cmd, SelectRule* select,
                       const std::string& stopping = "and stops training after --patience epochs without a better one");

/// "note: N record files or directories left out ..." and one line each on stderr; nothing when none.
void note_left_out(const std::vector<std::string>& left_out);

// Options shared by the commands that read a dataset.
struct DataOptions {
  std::vector<std::string> sources;
  std::string cache_dir;
  int max_steps = kDefaultMaxSteps;
  double test_fraction = 0.2;
  double valid_fraction = 0.1;
  uint64_t split_seed = 0;
  std::string split = "task";
  bool tuning_split = false;

  void add_to(CLI::App* app, bool with_split) {
    app->add_option("-d,--data", sources,
                    "Record source, repeatable: [PLATFORM=]PATH, a file or directory of Ansor records "
                    "(.json/.log, plain or .gz). PLATFORM names the hardware when the target string does "
                    "not (e.g. k80=path/to/k80). A bare NAME that is no file here is a platform tclm "
                    "measured itself: " TCLM_MEASURED_DATA "/NAME/records. Default: the embedded data, "
                    TCLM_DEFAULT_DATA "/*");
    app->add_option("--cache-dir", cache_dir,
                    "Cache parsed record files here (binary; rebuilt per file when a file changes)");
    app->add_option("--max-steps", max_steps, "Steps per program kept by the featurizer")->check(CLI::Range(1, 4096));
    if (with_split) {
      app->add_option("--test-fraction", test_fraction, "Fraction of workloads (or groups) held out for test")
          ->check(CLI::Range(0.0, 0.95));
      app->add_option("--valid-fraction", valid_fraction, "Fraction of workloads (or groups) for validation")
          ->check(CLI::Range(0.0, 0.95));
      app->add_option("--split-seed", split_seed, "Seed of the task split (hash-based, order independent)")
          ->check(kNonNegativeInteger);
      app->add_option("--split", split,
                      "Unit held out: 'task' (workload key, on every platform at once) or 'group' (a whole "
                      "data directory / network, e.g. tvm_ansor_bench/<net>)")
          ->check(CLI::IsMember({"task", "group"}));
      app->add_flag("--tuning-split,!--no-tuning-split", tuning_split,
                    "Choose options without touching the test tasks: leave the split's test tasks out entirely "
                    "and split the rest again (a second hash, the same fractions), so that the figures reported "
                    "as 'test' are on tasks taken from the training side. Report final figures without it "
                    "(--no-tuning-split: eval of a model trained with it, on the real split). docs/design.md, "
                    "'Tuning split'");
    }
  }

  std::vector<DataSource> resolve() const {
    std::vector<DataSource> out;
    if (sources.empty()) {
      namespace fs = std::filesystem;
      if (!fs::is_directory(TCLM_DEFAULT_DATA)) {
        throw Error(std::string("no --data given and the embedded data directory '") + TCLM_DEFAULT_DATA +
                    "' is missing; give records with -d [PLATFORM=]PATH");
      }
      std::vector<std::string> names;
      for (const auto& e : fs::directory_iterator(TCLM_DEFAULT_DATA)) {
        if (e.is_directory()) names.push_back(e.path().filename().string());
      }
      std::sort(names.begin(), names.end());
      for (const auto& n : names) out.push_back(DataSource{std::string(TCLM_DEFAULT_DATA) + "/" + n, n});
      return out;
    }
    for (const auto& s : sources) out.push_back(resolve_source(s));
    return out;
  }

  /// -d NAME, with no '=' or '/' and no file or directory of that name here: the records of the platform
  /// NAME that tclm measured itself (TCLM_MEASURED_DATA/NAME/records, data/README.md), as platform NAME.
  static DataSource resolve_source(const std::string& spec) {
    namespace fs = std::filesystem;
    DataSource s = DataSource::parse(spec);
    std::error_code ec;
    if (!s.platform.empty() || spec.find('/') != std::string::npos || fs::exists(spec, ec)) return s;
    const fs::path dir = fs::path(TCLM_MEASURED_DATA) / spec / "records";
    if (fs::is_directory(dir, ec)) return DataSource{dir.string(), spec};
    std::string have;
    if (fs::is_directory(TCLM_MEASURED_DATA, ec)) {
      std::vector<std::string> names;
      for (const auto& e : fs::directory_iterator(TCLM_MEASURED_DATA, ec)) {
        if (e.is_directory()) names.push_back(e.path().filename().string());
      }
      std::sort(names.begin(), names.end());
      for (const auto& n : names) have += (have.empty() ? "" : ", ") + n;
    }
    throw Error("-d/--data '" + spec + "': no such file or directory, and no platform of that name in " +
                TCLM_MEASURED_DATA + " (" + (have.empty() ? std::string("none there") : "it has: " + have) +
                "); give [PLATFORM=]PATH");
  }

  int shard = 0, shards = 1;  // data-parallel training: this process's shard of the tasks (LoadOptions)
  LoadOptions load_options(bool progress) const {
    LoadOptions lo;
    lo.max_steps = max_steps;
    lo.cache_dir = cache_dir;
    lo.progress = progress;
    lo.shard = shard;
    lo.shards = shards;
    return lo;
  }
  /// `note`: list the record files left out (read already) on stderr (note_left_out).
  Dataset load(bool progress, bool note = true) const {
    Dataset d = Dataset::load(resolve(), load_options(progress));
    if (note) note_left_out(d.read_stats().left_out);
    return d;
  }
  /// The counts only, streaming (memory bounded by the number of tasks): tclm info.
  DataSummary summarize(bool progress) const { return summarize_sources(resolve(), load_options(progress)); }

  SplitOptions split_options() const {
    SplitOptions so;
    so.test_fraction = test_fraction;
    so.valid_fraction = valid_fraction;
    so.seed = split_seed;
    so.mode = split == "group" ? SplitMode::kGroup : SplitMode::kTask;
    so.tuning = tuning_split;
    return so;
  }
};

/// The split a model was trained with, from its metadata ("extra" of tclm train), applied to the
/// options the user did not give on the command line, so that `eval` holds out the same tasks as the
/// training run did. Returns a description for the log, or "" if the metadata has no split.
std::string apply_model_split(const std::string& metadata_json, const CLI::App& cmd, DataOptions* d);
/// The record sources a model was trained on ([PLATFORM=]PATH, as -d takes them; its metadata's
/// extra.data, written by tclm train), or {} when the metadata has none.
std::vector<std::string> model_data_sources(const std::string& metadata_json);
/// The max_steps a model was trained with (its metadata's extra.max_steps), or `fallback`.
int model_max_steps(const std::string& metadata_json, int fallback);

/// Per-platform dataset statistics (tclm info), text and JSON.
std::string info_text(const DataSummary& d);
std::string info_json(const DataSummary& d);
inline std::string info_text(const Dataset& d) { return info_text(d.summary()); }

/// A JSON array of RankingReport::to_json_value(); reports_json() dumps it (dump_json).
nlohmann::json reports_json_value(const std::vector<RankingReport>& reports);
std::string reports_json(const std::vector<RankingReport>& reports);
/// The tool's JSON output: indented by one space, a newline at the end; bytes that are not UTF-8
/// (a path from the command line) become U+FFFD rather than failing.
std::string dump_json(const nlohmann::json& j);
std::string dump_json(const nlohmann::ordered_json& j);  // keys in the order they were added

/// "split: N train / N valid / N test tasks ..." on stderr.
void print_split(const Dataset& d, const Split& s);

/// "a,b,,c" -> {"a", "b", "c"} (empty items dropped).
std::vector<std::string> split_list(const std::string& s);

/// Creates `dir` (and parents) for a command's --out; throws tclm::Error naming --out if it cannot.
void ensure_output_dir(const std::string& dir);
/// ensure_output_dir, then an exclusive lock on `dir`/.lock (flock, held until the process exits):
/// a second run into the same directory is refused (tclm::Error naming the directory and the run that
/// holds it) instead of both writing there and the last one winning.
void claim_output_dir(const std::string& dir, const std::string& command);

/// A path given to an option: what check_outputs compares.
struct PathOption {
  std::string option;  // "--out", "-i", ...
  std::string path;
};
/// Refuses (tclm::Error, before any work) an output that is the same file or directory as one of the
/// command's inputs or as another output, after resolving links (std::filesystem::equivalent: symbolic
/// links, hard links, "./x" and "x"). "-" (standard output), paths that do not exist yet and character
/// devices or FIFOs (/dev/null, a pipe) are never the same as anything.
void check_outputs(const std::vector<PathOption>& inputs, const std::vector<PathOption>& outputs);
/// The input paths of -d sources (PLATFORM= removed), as PathOption{"--data", path}.
std::vector<PathOption> data_inputs(const std::vector<std::string>& sources);

/// The largest --threads used: more threads than this many times the cores only add switching.
constexpr int kThreadsPerCore = 4;
/// What every command's options get, in one place, after the commands are registered: every float
/// option refuses NaN and infinities (exit 2), and every --threads above kThreadsPerCore x the cores
/// is lowered to that with a note on stderr.
void harden_options(CLI::App& app);

/// A subcommand: registered on the app by an add_* function; `run` is called when it was parsed.
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

/// tools/cmd_info.cpp: tclm info.
Command add_info_command(CLI::App& app);
/// tools/cmd_train.cpp: tclm train and tclm export.
Command add_train_command(CLI::App& app);
Command add_export_command(CLI::App& app);
/// tools/cmd_eval.cpp: tclm eval.
Command add_eval_command(CLI::App& app);
/// tools/cmd_predict.cpp: tclm predict.
Command add_predict_command(CLI::App& app);
/// tools/cmd_compare.cpp: tclm compare and tclm sweep.
Command add_compare_command(CLI::App& app);
Command add_sweep_command(CLI::App& app);
/// tools/cmd_sample.cpp: tclm sample and tclm study-sampling.
Command add_sample_command(CLI::App& app);
Command add_study_sampling_command(CLI::App& app);
/// tools/cmd_transfer.cpp: tclm transfer (the TCL pipeline).
Command add_transfer_command(CLI::App& app);
// tools/cmd_tune.cpp
Command add_tune_bench_command(CLI::App& app);
Command add_collect_command(CLI::App& app);
Command add_tune_command(CLI::App& app);

}  // namespace tclm::cli
