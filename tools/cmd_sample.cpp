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
#include <unistd.h>

#include "cli_common.h"
#include "common/bytes.h"
#include "common/timer.h"
#include "plot.h"
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
  int epochs = 0, best_epoch = 0;  // of the final model: epochs run, the one kept (by validation top-1)
  double best_valid_top1 = 0;      // its validation top-1 (task mean)
};

std::string study_table(const std::vector<StudyRow>& rows) {
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
        out += " " + (it == cell.end() ? std::string("") : fmt_cell(it->second, [&](const StudyRow& x) {
          return metric == "top-1" ? x.test.top1.pooled
                 : metric == "top-5" ? x.test.top5.pooled
                                     : x.test.top1.task_mean;
        })) + " |";
      }
      out += "\n";
    }
  }
  if (!rows.empty()) {
    out += fmt::format(
        "\nrandom ranking of the test tasks (exact expectation): top-1 {:.3f}, top-1 task mean {:.3f}, top-5 {:.3f}\n",
        rows.front().test.random_top1.pooled, rows.front().test.random_top1.task_mean,
        rows.front().test.random_top5.pooled);
  }
  return out;
}

}  // namespace

Command add_study_sampling_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "study-sampling",
      "Sampler study (the paper's Fig. 7 / Table 4): for every sampler, sampling rate and seed, pick that fraction "
      "of every training task's programs (labels hidden until picked), train the cost model on the picks and "
      "evaluate top-1/top-5 on the held-out test tasks. Writes sampling.csv, sampling.md, sampling.png");
  struct Opts {
    DataOptions data;
    TrainOptions train;
    ActiveSamplingOptions a;
    std::string out = "out/study-sampling", samplers = "random,rdu,kcenter,uncertainty,balto",
                rates = "0.05,0.1,0.2,0.5,1";
    int seeds = 3;
    bool quiet = false;
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
  o->train.min_steps = 150;
  cmd->add_option("--min-steps", o->train.min_steps,
                  "At least this many optimizer steps per model: a small budget gets more epochs (and patience)")
      ->check(CLI::Range(0, 100000000));
  cmd->add_option("--threads", o->train.threads, "Threads (0 = all cores)")->check(CLI::Range(0, 4096));
  cmd->add_flag("--quiet", o->quiet, "No progress display");
  add_sampler_options(cmd, &o->a, true);
  return Command{cmd, [o]() {
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

                   std::vector<StudyRow> rows;
                   std::string csv =
                       "sampler,rate,seed,measured,pool,top1,top5,top1_task_mean,top5_task_mean,pairwise,random_top1,"
                       "random_top5,select_seconds,model_seconds,train_seconds,epochs,best_epoch,best_valid_top1\n";
                   auto add_row = [&](StudyRow r) {
                     csv += fmt::format(
                         "{},{},{},{},{},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.3f},{:.3f},{:.3f},{},{},{:.6f}\n",
                         r.sampler, r.rate, r.seed, r.measured, r.pool, r.test.top1.pooled, r.test.top5.pooled,
                         r.test.top1.task_mean, r.test.top5.task_mean, r.test.pairwise, r.test.random_top1.pooled,
                         r.test.random_top5.pooled, r.select_seconds, r.model_seconds, r.train_seconds, r.epochs,
                         r.best_epoch, r.best_valid_top1);
                     write_file_atomic(o->out + "/sampling.csv", csv);
                     if (!o->quiet) {
                       std::fprintf(stderr, "%-12s rate %5.3f seed %d: %zu of %zu programs, test top-1 %.4f top-5 %.4f\n",
                                    r.sampler.c_str(), r.rate, r.seed, r.measured, r.pool, r.test.top1.pooled,
                                    r.test.top5.pooled);
                     }
                     rows.push_back(std::move(r));
                   };
                   auto train_eval = [&](const Dataset& sub, int seed, StudyRow* row) {
                     TrainOptions to = o->train;
                     to.seed = static_cast<uint64_t>(seed);
                     to.progress = false;
                     const auto t0 = Clock::now();
                     TrainResult tr = train_cost_model(sub, split, to);
                     row->train_seconds = since(t0);
                     row->epochs = static_cast<int>(tr.log.size());
                     row->best_epoch = tr.best_epoch;
                     row->best_valid_top1 = tr.best_valid_top1;
                     CostModel m = load_cost_model(tr.best, "model");
                     row->test = evaluate_rankings(d, split.test, [&](const std::vector<uint32_t>& p) {
                                   return predict_programs(m, d, p);
                                 }).back();
                   };
                   for (int seed = 0; seed < o->seeds; ++seed) {
                     for (double rate : rates) {
                       if (rate >= 1.0) {  // all data: the same for every sampler
                         StudyRow row{"all", 1.0, seed, pool_size, pool_size};
                         train_eval(d, seed, &row);
                         add_row(std::move(row));
                         continue;
                       }
                       for (SampleMethod m : methods) {
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
                         StudyRow row{sample_method_name(m), rate, seed, picked.size(), pool_size};
                         row.select_seconds = log.seconds_select;
                         row.model_seconds = log.seconds_model;
                         train_eval(d.subset(picked), seed, &row);
                         add_row(std::move(row));
                       }
                     }
                   }
                   const std::string table = study_table(rows);
                   write_file_atomic(o->out + "/sampling.md", table);
                   plot_csv("sampling", o->out + "/sampling.csv", o->out + "/sampling.png");
                   std::cout << table << "results: " << o->out << "/sampling.{csv,md,png}\n";
                   return 0;
                 }};
}

}  // namespace tclm::cli
