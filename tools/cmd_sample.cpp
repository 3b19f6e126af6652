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
#include "study/journal.h"
#include "study/sampling.h"
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
    cmd->add_option("--w-fast", a->sampler.w_fast,
                    "RDU weight of predicted speed (the percentile of the between-round model's score): the cheap pass "
                    "keeps and the greedy pass prefers programs predicted fast inside every cluster; from round 2 on")
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
  cmd->add_option("-o,--output", o->output, "Picked records, one JSON line each (the programs to measure; '-' = stdout)")->required();
  cmd->add_option("--csv", o->csv, "Also write file,line,workload_key of every pick as CSV ('-' = stdout)");
  cmd->add_option("--fraction", o->fraction, "Fraction of every task to pick (at least --min-per-task)")
      ->check(CLI::Range(1e-6, 1.0));
  cmd->add_option("--method", o->method, "rdu, random, kcenter (core-set); uncertainty and balto need 'study-sampling'")
      ->check(CLI::IsMember({"rdu", "random", "kcenter"}));
  cmd->add_option("--seed", o->seed, "Seed");
  cmd->add_option("--threads", o->threads, "Threads (0 = all cores)")->check(CLI::Range(0, 4096));
  add_sampler_options(cmd, &o->a, false);
  return Command{cmd, [o]() {
                   std::vector<PathOption> inputs;
                   for (const auto& in : o->inputs) inputs.push_back({"--input", in});
                   for (const auto& in : collect_record_files(o->inputs).files) inputs.push_back({"--input", in.second});
                   check_outputs(inputs, {{"--output", o->output}, {"--csv", o->csv}});
                   struct Candidate {
                     MeasureRecord record;
                     std::string file;
                     int64_t line;
                   };
                   std::vector<Candidate> cands;
                   ReadStats stats;
                   RecordFiles listed = collect_record_files(o->inputs);  // each file once
                   note_left_out(listed.left_out);
                   for (const auto& in : listed.files) {
                     {
                       const std::string& f = in.second;
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
                   write_output(o->output, lines);
                   if (!o->csv.empty()) write_output(o->csv, csv);
                   std::fprintf(o->output == "-" || o->csv == "-" ? stderr : stdout, "picked %zu of %zu programs in %zu tasks (%s, fraction %.3g) in %.2f s -> %s\n", n,
                               cands.size(), groups.size(), o->method.c_str(), o->fraction, secs, o->output.c_str());
                   return 0;
                 }};
}

// ---- tclm study-sampling

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
    int seeds = 3, first_seed = 0;
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
  cmd->add_option("--first-seed", o->first_seed,
                  "Seeds --first-seed .. --first-seed + --seeds - 1: a run does not depend on the other seeds, so a "
                  "study can be split into jobs by seed (append their sampling.csv and test_tasks.csv rows to one "
                  "--out, then --resume with all the seeds writes the joint tables)")
      ->check(CLI::Range(0, 1000000));
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
    study::SamplingStudyOptions so;
    for (const auto& s : split_list(o->samplers)) so.samplers.push_back(parse_sample_method(s));
    for (const auto& s : split_list(o->rates)) so.rates.push_back(parse_rate(s));
    if (so.samplers.empty() || so.rates.empty()) throw Error("--samplers and --rates must list something");
    so.seeds = o->seeds;
    so.first_seed = o->first_seed;
    so.train = o->train;
    so.sampling = o->a;
    so.out = o->out;
    so.resume = o->resume;
    so.curves = o->curves;
    so.progress = !o->quiet;
    // Every option that changes a run's result (study_options.txt; --resume refuses rows written under
    // other options): all but the lists of runs and what does not touch a result.
    static const std::set<std::string> kRunLists = {"seeds", "first-seed", "rates", "samplers", "resume", "quiet",
                                                    "threads", "out", "cache-dir", "help", "curves"};
    for (const std::string& line : study::split_lines(cmd->config_to_str(true, false))) {
      if (!line.empty() && !kRunLists.count(line.substr(0, line.find('=')))) so.options_text += line + "\n";
    }
    check_outputs(data_inputs(o->data.sources), {{"--out", o->out}});
    claim_output_dir(o->out, "study-sampling");
    Dataset d = o->data.load(!o->quiet && isatty(fileno(stderr)));
    const Split split = make_split(d, o->data.split_options());
    print_split(d, split);
    set_threads(o->train.threads);
    const study::SamplingStudyResult result = study::run_sampling_study(d, split, so);
    const std::string table = study::sampling_markdown(result);
    write_file_atomic(o->out + "/sampling.md", table);
    plot_csv("sampling", o->out + "/sampling.csv", o->out + "/sampling.png");
    std::cout << table << "results: " << o->out << "/sampling.{csv,md,png}\n";
    return 0;
  }};
}

}  // namespace tclm::cli
