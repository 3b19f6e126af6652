// tools/cmd_sample.cpp: `tclm sample` (choose which candidate programs to measure) and
// `tclm study-sampling` (samplers x sampling rates x seeds, each training the cost model on the picks:
// the paper's Fig. 7 and Table 4).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <unistd.h>

#include "cli_common.h"
#include "common/bytes.h"
#include "common/timer.h"
#include "plot.h"
#include "tclm/metrics.h"
#include "tclm/sample.h"
#include "train/active_sampling.h"
#include "train/trainer.h"

namespace tclm::cli {
namespace {

double parse_rate(const std::string& s) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s.size() || !(v > 0 && v <= 1)) throw Error("--rates: '" + s + "' is not a fraction in (0, 1]");
  return v;
}

// Sampler options; `with_model`: also those that need a model between rounds (study-sampling only).
void add_sampler_options(CLI::App* cmd, ActiveSamplingOptions* a, bool with_model) {
  cmd->add_option("--w-repr", a->sampler.w_repr, "RDU weight of representativeness")->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--w-div", a->sampler.w_div, "RDU weight of diversity")->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--prefilter", a->sampler.prefilter_fraction,
                  "RDU: fraction of every cluster kept by the representativeness pass")
      ->check(CLI::Range(0.001, 1.0));
  cmd->add_option("--picks-per-cluster", a->sampler.picks_per_cluster,
                  "RDU: k-means clusters = ceil(budget / this), at most 1024 (per task in the per-task selection). "
                  "1 (the default, chosen on a tuning split; docs/sampler.md): one cluster per pick")
      ->check(CLI::Range(1.0, 1e9));
  cmd->add_option("--min-per-task", a->per_task.min_per_task, "Programs picked at least per task")
      ->check(CLI::Range(0, 1000000));
  if (with_model) {
    cmd->add_option("--w-unc", a->sampler.w_unc, "RDU weight of uncertainty (MC dropout of the between-round model)")
        ->check(CLI::Range(0.0, 1e6));
    cmd->add_option("--rounds", a->rounds, "Rounds for the samplers that use a model (rdu, uncertainty, balto)")
        ->check(CLI::Range(1, 100));
  }
}

}  // namespace

// ---- tclm sample

Command add_sample_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "sample",
      "Choose which candidate programs to measure: reads a pool of Ansor records (their costs are ignored), "
      "picks a fraction of every task with the RDU sampler (or a baseline) and writes the picked records (the "
      "list to measure) and a CSV of where they came from");
  struct Opts {
    std::vector<std::string> inputs;
    std::string output, csv, method = "rdu";
    double fraction = 0.1;
    uint64_t seed = 0;
    int threads = 0;
    ActiveSamplingOptions a;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("-i,--input", o->inputs, "Pool: Ansor record files or directories (repeatable)")->required();
  cmd->add_option("-o,--output", o->output, "Picked records, one JSON line each (the programs to measure)")->required();
  cmd->add_option("--csv", o->csv, "Also write file,line,workload_key of every pick as CSV");
  cmd->add_option("--fraction", o->fraction, "Fraction of every task to pick (at least --min-per-task)")
      ->check(CLI::Range(1e-6, 1.0));
  cmd->add_option("--method", o->method, "rdu, random, kcenter (core-set); uncertainty and balto need 'study-sampling'")
      ->check(CLI::IsMember({"rdu", "random", "kcenter"}));
  cmd->add_option("--seed", o->seed, "Seed");
  cmd->add_option("--threads", o->threads, "Threads (0 = all cores)")->check(CLI::Range(0, 4096));
  add_sampler_options(cmd, &o->a, false);
  return Command{cmd, [o]() {
                   struct Candidate {
                     MeasureRecord record;
                     std::string file;
                     int64_t line;
                   };
                   std::vector<Candidate> cands;
                   ReadStats stats;
                   for (const auto& in : o->inputs) {
                     for (const auto& f : list_record_files(in)) {
                       read_record_file(f, [&](const MeasureRecord& r, const RecordOrigin& origin) {
                         // The picks are written back as Ansor record lines; a trace cannot be (its
                         // workload lives in the database's table). Say what to use instead.
                         if (!r.steps.empty() && is_trace_kind(r.steps[0].kind)) {
                           throw Error(fmt::format("{}:{}: a MetaSchedule tuning record; tclm sample writes Ansor "
                                                   "records. For MetaSchedule candidates use tclm collect (or "
                                                   "tclm.select_samples in Python)",
                                                   f, origin.line));
                         }
                         cands.push_back(Candidate{r, f, origin.line});
                       }, &stats);
                     }
                   }
                   if (stats.skipped > 0) std::fprintf(stderr, "%s", stats.report().c_str());
                   if (cands.empty()) {
                     throw Error("--input: no well-formed record in the pool (see the skipped lines above); give Ansor "
                                 "record files of candidate programs");
                   }
                   // Tasks: (workload key, target); rows in input order.
                   std::map<std::pair<std::string, std::string>, uint32_t> task_of;
                   std::vector<std::vector<uint32_t>> groups;
                   std::vector<float> points(cands.size() * kPooledFeatureDim);
                   std::vector<float> x(static_cast<size_t>(kDefaultMaxSteps) * kStepFeatureDim);
                   for (size_t i = 0; i < cands.size(); ++i) {
                     auto key = std::make_pair(cands[i].record.workload_key, cands[i].record.target);
                     auto [it, inserted] = task_of.emplace(key, static_cast<uint32_t>(groups.size()));
                     if (inserted) groups.emplace_back();
                     groups[it->second].push_back(static_cast<uint32_t>(i));
                     const int used = featurize_program(cands[i].record.steps, kDefaultMaxSteps, x.data());
                     pool_step_features(x.data(), used, points.data() + i * kPooledFeatureDim);
                   }
                   SamplerOptions so = o->a.sampler;
                   so.method = parse_sample_method(o->method);
                   so.seed = o->seed;
                   so.threads = o->threads;
                   PerTaskOptions pt = o->a.per_task;
                   pt.fraction = o->fraction;
                   SamplePool sp;
                   sp.points = points;
                   sp.dim = kPooledFeatureDim;
                   const auto t0 = Clock::now();
                   const auto picks = select_per_task(sp, groups, pt, so);
                   const double secs = since(t0);
                   std::string lines, csv = "file,line,workload_key\n";
                   size_t n = 0;
                   for (const auto& g : picks) {
                     for (uint32_t r : g) {
                       lines += record_to_json(cands[r].record) + "\n";
                       csv += fmt::format("\"{}\",{},\"{}\"\n", cands[r].file, cands[r].line,
                                          json_escape(cands[r].record.workload_key));
                       ++n;
                     }
                   }
                   write_file_atomic(o->output, lines);
                   if (!o->csv.empty()) write_file_atomic(o->csv, csv);
                   std::printf("picked %zu of %zu programs in %zu tasks (%s, fraction %.3g) in %.2f s -> %s\n", n,
                               cands.size(), groups.size(), o->method.c_str(), o->fraction, secs, o->output.c_str());
                   return 0;
                 }};
}

// ---- tclm study-sampling

namespace {

struct StudyRow {
  std::string sampler;
  double rate = 0;
  int seed = 0;
  size_t measured = 0, pool = 0;
  RankingReport test;
  double select_seconds = 0, model_seconds = 0, train_seconds = 0;
  int epochs = 0, best_epoch = 0;  // of the final model: epochs run, the one kept (by --select)
  double best_valid_top1 = 0;      // its validation top-1 (task mean)
};

// `random`: the test tasks' report of any scorer (its random_* fields: the exact expectation of a
// random ranking, which the rows read back by --resume do not all carry).
std::string study_table(const std::vector<StudyRow>& rows, const RankingReport& random) {
  // mean ± std of top-1 (pooled) per sampler and rate
  std::vector<double> rates;
  std::vector<std::string> samplers;
  std::map<std::pair<std::string, double>, std::vector<const StudyRow*>> cell;
  for (const auto& r : rows) {
    if (std::find(rates.begin(), rates.end(), r.rate) == rates.end()) rates.push_back(r.rate);
    if (std::find(samplers.begin(), samplers.end(), r.sampler) == samplers.end()) samplers.push_back(r.sampler);
    cell[{r.sampler, r.rate}].push_back(&r);
  }
  std::sort(rates.begin(), rates.end());
  auto fmt_cell = [](const std::vector<const StudyRow*>& v, auto get) {
    if (v.empty()) return std::string("");
    double m = 0, s = 0;
    for (auto* r : v) m += get(*r);
    m /= static_cast<double>(v.size());
    for (auto* r : v) s += (get(*r) - m) * (get(*r) - m);
    s = v.size() > 1 ? std::sqrt(s / static_cast<double>(v.size() - 1)) : 0;
    return fmt::format("{:.3f} ± {:.3f}", m, s);
  };
  std::string out;
  // Pooled top-k is TLP's score (dominated by the slowest test tasks); the task mean weighs every
  // task alike (TCL-SPEC §5 asks for both).
  for (const std::string metric : {"top-1", "top-1 task mean", "top-5"}) {
    out += fmt::format("\ntest {}{}, mean ± std over seeds\n\n| sampler |", metric,
                       metric == "top-1 task mean" ? "" : " (pooled)");
    for (double r : rates) out += fmt::format(" {:g}% |", 100 * r);
    out += "\n|---|";
    for (size_t i = 0; i < rates.size(); ++i) out += "---|";
    out += "\n";
    for (const auto& s : samplers) {
      out += "| " + s + " |";
      for (double r : rates) {
        const auto it = cell.find({s, r});
        const std::string value = it == cell.end() ? std::string() : fmt_cell(it->second, [&](const StudyRow& x) {
          return metric == "top-1" ? x.test.top1.pooled : metric == "top-5" ? x.test.top5.pooled : x.test.top1.task_mean;
        });
        out += fmt::format(" {} |", value);
      }
      out += "\n";
    }
  }
  // Paired by seed: the runs of one seed share the split, initialisation and batch order, so the
  // differences are what the "above random by more than the seed-to-seed spread" asks about.
  std::string paired;
  auto by_seed = [&](const std::string& sampler, double rate, int metric) {
    std::map<int, double> m;
    const auto it = cell.find({sampler, rate});
    if (it == cell.end()) return m;
    for (const StudyRow* x : it->second) {
      m[x->seed] = metric == 0 ? x->test.top1.pooled : metric == 1 ? x->test.top1.task_mean : x->test.top5.pooled;
    }
    return m;
  };
  const double all_rate = cell.count({"all", 1.0}) ? 1.0 : -1.0;
  for (const auto& s : samplers) {
    if (s == "all") continue;
    for (double r : rates) {
      if (!cell.count({s, r})) continue;
      for (const std::string base : {"random", "all"}) {
        if (base == s) continue;
        const double base_rate = base == "all" ? all_rate : r;
        if (!cell.count({base, base_rate})) continue;
        paired += fmt::format("| {} - {} | {:g}% |", s, base == "all" ? "all data" : base, 100 * r);
        for (int metric = 0; metric < 3; ++metric) {
          const PairedDifference d = paired_by_seed(by_seed(s, r, metric), by_seed(base, base_rate, metric));
          paired += fmt::format(" {} {} |", format_paired(d), d.verdict());
        }
        paired += "\n";
      }
    }
  }
  if (!paired.empty()) {
    out += "\npaired by seed: mean ± std of the per-seed differences (each seed's in brackets); ahead / behind "
           "when the mean is beyond one std of the differences (and at least 0.0005), else level\n\n"
           "| comparison | rate | top-1 (pooled) | top-1 task mean | top-5 (pooled) |\n|---|---|---|---|---|\n" +
           paired;
  }
  out += fmt::format(
      "\nrandom ranking of the test tasks (exact expectation): top-1 {:.3f}, top-1 task mean {:.3f}, top-5 {:.3f}\n",
      random.random_top1.pooled, random.random_top1.task_mean, random.random_top5.pooled);
  return out;
}

// The version of the study's runs, recorded in study_options.txt: 2 = the trainer never keeps a
// warm-up epoch as the best model (2026-12-01); 3 = the final models' kept epoch follows --select
// (default pairwise; before, the validation top-1); the between-round models use the trainer's
// default rule (pairwise), whatever --select says.
constexpr int kStudyVersion = 3;

constexpr const char* kStudyCsvHeader =
    "sampler,rate,seed,measured,pool,top1,top5,top1_task_mean,top5_task_mean,pairwise,random_top1,"
    "random_top5,select_seconds,model_seconds,train_seconds,epochs,best_epoch,best_valid_top1";

// A whole CSV field as a number (std::invalid_argument otherwise).
double parse_csv_number(const std::string& s) {
  size_t used = 0;
  const double v = std::stod(s, &used);
  if (used != s.size()) throw std::invalid_argument(s);
  return v;
}

// The lines of a text, without their '\n' (a last line without one included).
std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  for (size_t a = 0, b; a < text.size(); a = b + 1) {
    b = text.find('\n', a);
    if (b == std::string::npos) b = text.size();
    lines.push_back(text.substr(a, b - a));
  }
  return lines;
}

// Rows of an earlier run's sampling.csv (--resume). A file of another header (another tclm version)
// or a malformed row is an error naming the file and line: the study's table would otherwise mix
// runs silently.
std::vector<StudyRow> read_study_csv(const std::string& path) {
  std::vector<StudyRow> rows;
  int line_no = 0;
  for (const std::string& line : split_lines(read_file(path))) {
    ++line_no;
    if (line_no == 1) {
      if (line != kStudyCsvHeader)
        throw Error(fmt::format("{}:1: not a sampling.csv with this tclm's columns (header '{}'); move it away or "
                                "drop --resume", path, line));
      continue;
    }
    if (line.empty()) continue;
    const std::vector<std::string> f = split_list(line);  // no field of a study row is empty
    auto bad = [&](const std::string& why) { return Error(fmt::format("{}:{}: {}: '{}'", path, line_no, why, line)); };
    if (f.size() != 18) throw bad(fmt::format("{} fields, expected 18", f.size()));
    StudyRow r;
    try {
      const auto num = parse_csv_number;
      auto count = [](const std::string& s) {
        const double v = parse_csv_number(s);
        if (!(v >= 0 && v == std::floor(v) && v < 9e15)) throw std::invalid_argument(s);
        return v;
      };
      r.sampler = f[0];
      r.rate = num(f[1]);
      r.seed = static_cast<int>(count(f[2]));
      r.measured = static_cast<size_t>(count(f[3]));
      r.pool = static_cast<size_t>(count(f[4]));
      r.test.top1.pooled = num(f[5]);
      r.test.top5.pooled = num(f[6]);
      r.test.top1.task_mean = num(f[7]);
      r.test.top5.task_mean = num(f[8]);
      r.test.pairwise = num(f[9]);
      r.test.random_top1.pooled = num(f[10]);
      r.test.random_top5.pooled = num(f[11]);
      r.select_seconds = num(f[12]);
      r.model_seconds = num(f[13]);
      r.train_seconds = num(f[14]);
      r.epochs = static_cast<int>(count(f[15]));
      r.best_epoch = static_cast<int>(count(f[16]));
      r.best_valid_top1 = num(f[17]);
    } catch (const std::exception&) {
      throw bad("not a number where one is expected");
    }
    if (r.sampler.empty() || !(r.rate > 0 && r.rate <= 1)) throw bad("no sampler or a rate outside (0, 1]");
    rows.push_back(std::move(r));
  }
  return rows;
}

}  // namespace

Command add_study_sampling_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "study-sampling",
      "Sampler study (the paper's Fig. 7 / Table 4): for every sampler, sampling rate and seed, pick that fraction "
      "of every training task's programs (labels hidden until picked), train the cost model on the picks and "
      "evaluate top-1/top-5 on the held-out test tasks. Writes sampling.csv (one row per run), test_tasks.csv (one "
      "row per run and test task), sampling.md and sampling.png");
  // Record every option's value, defaults included (study_options.txt, checked by --resume).
  cmd->option_defaults()->always_capture_default();
  struct Opts {
    DataOptions data;
    TrainOptions train;
    ActiveSamplingOptions a;
    std::string out = "out/study-sampling", samplers = "random,rdu,kcenter,uncertainty,balto",
                rates = "0.05,0.1,0.2,0.5,1";
    int seeds = 3;
    bool quiet = false, resume = false, curves = false;
  };
  auto o = std::make_shared<Opts>();
  o->train.epochs = 12;
  o->train.patience = 4;
  o->data.add_to(cmd, true);
  cmd->add_option("-o,--out", o->out, "Output directory");
  cmd->add_option("--samplers", o->samplers, "Comma-separated: rdu, random, kcenter, uncertainty, balto");
  cmd->add_option("--rates", o->rates, "Comma-separated fractions of every task's programs (1 = all data)");
  cmd->add_option("--seeds", o->seeds, "Seeds per sampler and rate (sampling and training)")->check(CLI::Range(1, 100));
  cmd->add_option("--epochs", o->train.epochs, "Maximum epochs of each final model")->check(CLI::Range(1, 100000));
  cmd->add_option("--patience", o->train.patience, "Early stopping patience")->check(CLI::Range(1, 100000));
  add_select_option(cmd, &o->train.select);
  o->train.min_steps = 150;
  cmd->add_option("--min-steps", o->train.min_steps,
                  "At least this many optimizer steps per model: a small budget gets more epochs (and patience)")
      ->check(CLI::Range(0, 100000000));
  cmd->add_option("--threads", o->train.threads, "Threads (0 = all cores)")->check(CLI::Range(0, 4096));
  cmd->add_flag("--quiet", o->quiet, "No progress display");
  cmd->add_flag("--resume", o->resume,
                "Keep the rows of the sampling.csv already in --out (an earlier or interrupted run on the same data "
                "and split) and run only the (sampler, rate, seed) runs it lacks: e.g. rerun with --seeds 5 after "
                "--seeds 3 to add seeds 3 and 4. The sampler and training options are not recorded in the CSV: resume "
                "only with the same ones");
  cmd->add_flag("--curves", o->curves,
                "Also evaluate every final model's test tasks after every epoch and write curves.csv (sampler, rate, "
                "seed, epoch, the validation and the test figures): the learning curves, to see which validation "
                "figure picks good epochs. Only logged; selection and stopping still use the validation tasks. Costs "
                "one test evaluation per epoch (counted in train_seconds); with a large --patience every planned "
                "epoch runs");
  add_sampler_options(cmd, &o->a, true);
  return Command{cmd, [o, cmd]() {
                   std::vector<SampleMethod> methods;
                   for (const auto& s : split_list(o->samplers)) methods.push_back(parse_sample_method(s));
                   std::vector<double> rates;
                   for (const auto& s : split_list(o->rates)) rates.push_back(parse_rate(s));
                   if (methods.empty() || rates.empty()) throw Error("--samplers and --rates must list something");
                   ensure_output_dir(o->out);
                   Dataset d = o->data.load(!o->quiet && isatty(fileno(stderr)));
                   const Split split = make_split(d, o->data.split_options());
                   print_split(d, split);
                   if (split.test.empty()) throw Error("the split has no test tasks; raise --test-fraction");
                   set_threads(o->train.threads);
                   // The pool: the training and validation tasks (validation programs cost measurements too).
                   std::vector<uint32_t> pool_tasks = split.train;
                   pool_tasks.insert(pool_tasks.end(), split.valid.begin(), split.valid.end());
                   size_t pool_size = 0;
                   for (uint32_t t : pool_tasks) pool_size += d.tasks()[t].programs.size();

                   // The random ranking's expectation does not depend on the scores; kept rows must
                   // have the same (the same test tasks).
                   const RankingReport random = evaluate_rankings(d, split.test, [](const std::vector<uint32_t>& p) {
                                                  return std::vector<float>(p.size(), 0.0f);
                                                }).back();
                   // study_options.txt: every option that changes a run's result, and the version of the
                   // study's training (bumped when a change makes earlier rows incomparable).
                   // --resume refuses rows written under other options.
                   const std::string options_path = o->out + "/study_options.txt";
                   std::string options_text = fmt::format("study_version={}\n", kStudyVersion);
                   {
                     for (const std::string& line : split_lines(cmd->config_to_str(true, false))) {
                       const std::string key = line.substr(0, line.find('='));
                       static const std::set<std::string> kRunLists = {"seeds", "rates", "samplers", "resume", "quiet",
                                                                       "threads", "out", "cache-dir", "help", "curves"};
                       if (!line.empty() && !kRunLists.count(key)) options_text += line + "\n";
                     }
                   }

                   std::vector<StudyRow> rows;
                   std::string csv = std::string(kStudyCsvHeader) + "\n";
                   auto append_csv = [&](const StudyRow& r) {
                     csv += fmt::format(
                         "{},{},{},{},{},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.3f},{:.3f},{:.3f},{},{},{:.6f}\n",
                         r.sampler, r.rate, r.seed, r.measured, r.pool, r.test.top1.pooled, r.test.top5.pooled,
                         r.test.top1.task_mean, r.test.top5.task_mean, r.test.pairwise, r.test.random_top1.pooled,
                         r.test.random_top5.pooled, r.select_seconds, r.model_seconds, r.train_seconds, r.epochs,
                         r.best_epoch, r.best_valid_top1);
                   };
                   // --resume: the runs already in sampling.csv are kept, not repeated.
                   std::set<std::tuple<std::string, double, int>> done;
                   const std::string csv_path = o->out + "/sampling.csv";
                   if (o->resume && std::filesystem::exists(csv_path)) {
                     if (!std::filesystem::exists(options_path))
                       throw Error(fmt::format("{}: no {} beside it (written by an older tclm), so its options cannot "
                                               "be checked; use another --out", csv_path, options_path));
                     const std::string old_options = read_file(options_path);
                     if (old_options != options_text) {
                       std::string diff;
                       auto lines_of = [](const std::string& t) {
                         const auto v = split_lines(t);
                         return std::set<std::string>(v.begin(), v.end());
                       };
                       const auto was = lines_of(old_options), now = lines_of(options_text);
                       for (const auto& l : was)
                         if (!now.count(l)) diff += "  was: " + l + "\n";
                       for (const auto& l : now)
                         if (!was.count(l)) diff += "  now: " + l + "\n";
                       throw Error(fmt::format("{}: the study in {} ran with other options; resume only with the same "
                                               "ones, or use another --out:\n{}", options_path, o->out, diff));
                     }
                     for (StudyRow& r : read_study_csv(csv_path)) {
                       if (r.pool != pool_size)
                         throw Error(fmt::format("{}: its runs picked from a pool of {} programs, this run's pool has "
                                                 "{}: other data or another split; use another --out",
                                                 csv_path, r.pool, pool_size));
                       if (std::abs(r.test.random_top1.pooled - random.random_top1.pooled) > 2e-6 ||
                           std::abs(r.test.random_top5.pooled - random.random_top5.pooled) > 2e-6)
                         throw Error(fmt::format("{}: run {} rate {:g} seed {} was evaluated on other test tasks (a "
                                                 "random ranking scores {:.6f} there, {:.6f} here): other data or "
                                                 "another split; use another --out", csv_path, r.sampler, r.rate,
                                                 r.seed, r.test.random_top1.pooled, random.random_top1.pooled));
                       if (!done.insert({r.sampler, r.rate, r.seed}).second)
                         throw Error(fmt::format("{}: run {} rate {:g} seed {} appears twice", csv_path, r.sampler,
                                                 r.rate, r.seed));
                       append_csv(r);
                       rows.push_back(std::move(r));
                     }
                     std::fprintf(stderr, "resume: %zu runs kept from %s\n", rows.size(), csv_path.c_str());
                   }
                   const size_t kept = rows.size();
                   write_file_atomic(options_path, options_text);
                   auto add_row = [&](StudyRow r) {
                     done.insert({r.sampler, r.rate, r.seed});  // a run listed twice on the command line runs once
                     append_csv(r);
                     write_file_atomic(csv_path, csv);
                     if (!o->quiet) {
                       std::fprintf(stderr, "%-12s rate %5.3f seed %d: %zu of %zu programs, test top-1 %.4f top-5 %.4f\n",
                                    r.sampler.c_str(), r.rate, r.seed, r.measured, r.pool, r.test.top1.pooled,
                                    r.test.top5.pooled);
                     }
                     rows.push_back(std::move(r));
                   };
                   // test_tasks.csv: every run's per-task results (which workloads decide the pooled score).
                   const std::string tasks_path = o->out + "/test_tasks.csv";
                   const std::string per_task_header = per_task_csv({});
                   std::string tasks_csv = "sampler,rate,seed," + per_task_header;
                   if (o->resume && std::filesystem::exists(tasks_path)) {
                     // Keep the rows of the runs kept from sampling.csv (a run killed between the two
                     // files is run again, and its rows must not appear twice).
                     const std::string old = read_file(tasks_path);
                     if (old.compare(0, tasks_csv.size(), tasks_csv) != 0)
                       throw Error(tasks_path + ":1: not a test_tasks.csv of this tclm version; move it away or drop "
                                   "--resume");
                     std::set<std::tuple<std::string, double, int>> with_rows;
                     int line_no = 1;
                     for (const std::string& line : split_lines(old.substr(tasks_csv.size()))) {
                       ++line_no;
                       if (line.empty()) continue;
                       const size_t c1 = line.find(','), c2 = line.find(',', c1 + 1), c3 = line.find(',', c2 + 1);
                       std::tuple<std::string, double, int> key;
                       try {
                         if (c3 == std::string::npos) throw std::invalid_argument(line);
                         const double seed = parse_csv_number(line.substr(c2 + 1, c3 - c2 - 1));
                         if (!(seed >= 0 && seed == std::floor(seed))) throw std::invalid_argument(line);
                         key = {line.substr(0, c1), parse_csv_number(line.substr(c1 + 1, c2 - c1 - 1)),
                                static_cast<int>(seed)};
                       } catch (const std::exception&) {
                         throw Error(fmt::format("{}:{}: not a sampler,rate,seed,... row: '{}'", tasks_path, line_no,
                                                 line));
                       }
                       if (done.count(key)) {  // rows of a run not in sampling.csv (killed before it) are dropped
                         tasks_csv += line + "\n";
                         with_rows.insert(key);
                       }
                     }
                     if (with_rows.size() < done.size())
                       std::fprintf(stderr, "resume: %zu of the %zu kept runs have no rows in %s\n",
                                    done.size() - with_rows.size(), done.size(), tasks_path.c_str());
                   } else if (!done.empty()) {
                     std::fprintf(stderr, "resume: no %s: the %zu kept runs have no per-task rows\n", tasks_path.c_str(),
                                  done.size());
                   }
                   // curves.csv (--curves): one row per run and epoch. A resumed study appends to it; rows of
                   // a run killed before its sampling.csv row are dropped like its test_tasks.csv rows.
                   const std::string curves_path = o->out + "/curves.csv";
                   const std::string curves_header =
                       "sampler,rate,seed,epoch,train_loss,valid_top1_task_mean,valid_top5_task_mean,valid_pairwise,"
                       "test_top1,test_top5,test_top1_task_mean,test_top5_task_mean,test_pairwise\n";
                   std::string curves_csv = curves_header;
                   if (o->curves && o->resume && std::filesystem::exists(curves_path)) {
                     const std::string old = read_file(curves_path);
                     if (old.compare(0, curves_header.size(), curves_header) != 0)
                       throw Error(curves_path + ":1: not a curves.csv of this tclm version; move it away or drop "
                                   "--resume");
                     // A kept run's curve is kept only when whole: one row per epoch it ran (a run killed
                     // under --curves and finished later without it has a partial curve).
                     std::map<std::tuple<std::string, double, int>, std::vector<std::string>> by_run;
                     int line_no = 1;
                     for (const std::string& line : split_lines(old.substr(curves_header.size()))) {
                       ++line_no;
                       if (line.empty()) continue;
                       const std::vector<std::string> f = split_list(line);
                       try {
                         if (f.size() != 13) throw std::invalid_argument(line);
                         by_run[{f[0], parse_csv_number(f[1]), static_cast<int>(parse_csv_number(f[2]))}].push_back(line);
                       } catch (const std::exception&) {
                         throw Error(fmt::format("{}:{}: not a curves.csv row: '{}'", curves_path, line_no, line));
                       }
                     }
                     size_t partial = 0;
                     for (const StudyRow& r : rows) {
                       const auto it = by_run.find({r.sampler, r.rate, r.seed});
                       if (it == by_run.end()) continue;
                       if (it->second.size() != static_cast<size_t>(r.epochs)) {
                         ++partial;
                         continue;
                       }
                       for (const std::string& line : it->second) curves_csv += line + "\n";
                     }
                     if (partial > 0)
                       std::fprintf(stderr, "resume: %zu kept runs have a partial curve in %s (left out)\n", partial,
                                    curves_path.c_str());
                   }
                   auto train_eval = [&](const Dataset& sub, int seed, StudyRow* row) {
                     TrainOptions to = o->train;
                     to.seed = static_cast<uint64_t>(seed);
                     to.progress = false;
                     if (o->curves) {
                       to.on_epoch = [&, seed, row](const EpochLog& e, CostModelImpl& model) {
                         const RankingReport t = evaluate_rankings(d, split.test, [&](const std::vector<uint32_t>& p) {
                                                   return predict_programs(model, d, p);
                                                 }).back();
                         curves_csv += fmt::format(
                             "{},{},{},{},{:.6g},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f}\n", row->sampler,
                             row->rate, seed, e.epoch, e.train_loss, e.valid_top1, e.valid_top5, e.valid_pairwise,
                             t.top1.pooled, t.top5.pooled, t.top1.task_mean, t.top5.task_mean, t.pairwise);
                         write_file_atomic(curves_path, curves_csv);
                       };
                     }
                     const auto t0 = Clock::now();
                     TrainResult tr = train_cost_model(sub, split, to);
                     row->train_seconds = since(t0);
                     row->epochs = static_cast<int>(tr.log.size());
                     row->best_epoch = tr.best_epoch;
                     row->best_valid_top1 = tr.best_valid_top1;
                     CostModel m = load_cost_model(tr.best, "model");
                     std::vector<TaskResult> per_task;
                     row->test = evaluate_rankings(d, split.test, [&](const std::vector<uint32_t>& p) {
                                   return predict_programs(m, d, p);
                                 }, &per_task).back();
                     for (const std::string& line : split_lines(per_task_csv(per_task).substr(per_task_header.size())))
                       tasks_csv += fmt::format("{},{},{},{}\n", row->sampler, row->rate, seed, line);
                     write_file_atomic(tasks_path, tasks_csv);
                   };
                   for (int seed = 0; seed < o->seeds; ++seed) {
                     for (double rate : rates) {
                       if (rate >= 1.0) {  // all data: the same for every sampler
                         if (done.count({"all", 1.0, seed})) continue;
                         StudyRow row{"all", 1.0, seed, pool_size, pool_size, {}};
                         train_eval(d, seed, &row);
                         add_row(std::move(row));
                         continue;
                       }
                       for (SampleMethod m : methods) {
                         if (done.count({sample_method_name(m), rate, seed})) continue;
                         ActiveSamplingOptions a = o->a;
                         a.sampler.method = m;
                         a.sampler.seed = static_cast<uint64_t>(seed);
                         a.sampler.threads = o->train.threads;
                         a.threads = o->train.threads;
                         a.per_task.fraction = rate;
                         a.round_min_steps = o->train.min_steps;
                         a.progress = !o->quiet;
                         ActiveSamplingLog log;
                         const auto picked = active_select(d, pool_tasks, a, &log);
                         StudyRow row{sample_method_name(m), rate, seed, picked.size(), pool_size, {}};
                         row.select_seconds = log.seconds_select;
                         row.model_seconds = log.seconds_model;
                         train_eval(d.subset(picked), seed, &row);
                         add_row(std::move(row));
                       }
                     }
                   }
                   if (rows.size() == kept) {  // nothing new: the files as read (less rows of unfinished runs)
                     write_file_atomic(csv_path, csv);
                     write_file_atomic(tasks_path, tasks_csv);
                     if (o->curves) write_file_atomic(curves_path, curves_csv);
                   }
                   if (o->resume) std::fprintf(stderr, "resume: %zu runs kept, %zu run now\n", kept, rows.size() - kept);
                   const std::string table = study_table(rows, random);
                   write_file_atomic(o->out + "/sampling.md", table);
                   plot_csv("sampling", o->out + "/sampling.csv", o->out + "/sampling.png");
                   std::cout << table << "results: " << o->out << "/sampling.{csv,md,png}\n";
                   return 0;
                 }};
}

}  // namespace tclm::cli
