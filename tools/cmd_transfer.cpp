// tools/cmd_transfer.cpp: `tclm transfer`, the whole TCL pipeline (TCL-SPEC §7): learn the source
// platforms in sequence with continual knowledge distillation, RDU-sample the target's budget, learn the
// target, evaluate every platform after every phase; next to the baselines (target-only on the same
// budget, fine-tuning a source model, multi-task one-head-per-platform, full target data) and the
// ablations (Phi fixed to 1, no EWC).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <unistd.h>

#include "cli_common.h"
#include "common/bytes.h"
#include "common/timer.h"
#include "distill/ckd.h"
#include "plot.h"
#include "tclm/metrics.h"
#include "train/active_sampling.h"
#include "train/trainer.h"

namespace tclm::cli {
namespace {

const std::vector<std::string> kMethods = {"tcl", "tcl-no-phi", "tcl-no-ewc", "target-only", "finetune", "mtl", "full"};

/// One evaluation: a method's model after a phase, on one platform's test tasks.
struct Row {
  std::string method;
  int seed = 0;
  int phase_index = 0;
  std::string phase, platform;
  double top1 = 0, top5 = 0, pairwise = 0, random_top1 = 0;
  double top1_task_mean = 0, random_top1_task_mean = 0;
};

struct Opts {
  DataOptions data;
  CkdOptions ckd;
  TrainOptions train;  // the baselines
  ActiveSamplingOptions sampling;
  std::string sources, target, methods = "tcl,tcl-no-phi,tcl-no-ewc,target-only,finetune,mtl,full",
                               sampler = "rdu", out = "out/transfer", kd_data = "measured";
  double budget = 0.1;
  double source_fraction = 1.0;
  int seeds = 1, first_seed = 0;
  bool quiet = false;
};

}  // namespace

Command add_transfer_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "transfer",
      "The TCL pipeline: learn the --sources platforms in order (continual knowledge distillation: knowledge base + "
      "active column, dynamic Phi, EWC), RDU-sample --budget of the --target's programs, learn the target, and "
      "evaluate every platform after every phase, next to the baselines (the knowledge base after each KD "
      "phase; method '<tcl method>:ac' rows: the active column after each CL phase). Writes phases.csv, transfer.md "
      "(with tcl minus each other method, paired by seed), transfer.json, transfer.png, transfer_options.txt (every "
      "option's value) and, with method tcl, kb.tclm (the deployable knowledge base of the first seed)");
  // transfer_options.txt records every option's value, defaults included.
  cmd->option_defaults()->always_capture_default();
  auto o = std::make_shared<Opts>();
  o->train.epochs = 12;
  o->train.patience = 4;
  o->train.min_steps = 150;
  o->data.add_to(cmd, true);
  cmd->add_option("--sources", o->sources, "Source platforms in learning order, comma-separated (names of -d NAME=PATH)")
      ->required();
  cmd->add_option("--target", o->target, "Target platform (its programs are sampled at --budget)")->required();
  cmd->add_option("--budget", o->budget, "Fraction of every target task measured (RDU-sampled)")->check(CLI::Range(1e-4, 1.0));
  cmd->add_option("--source-fraction", o->source_fraction,
                  "Use this random fraction of the programs of every source training/validation task (1 = all; "
                  "a cheaper study, not a measurement budget: sources count as fully measured; test tasks stay whole)")
      ->check(CLI::Range(1e-4, 1.0));
  cmd->add_option("--sampler", o->sampler, "Sampler of the target budget: rdu, random, kcenter, uncertainty, balto");
  cmd->add_option("--methods", o->methods,
                  "Comma-separated: tcl, tcl-no-phi (Phi = 1), tcl-no-ewc (lambda = 0), target-only, finetune, mtl, full");
  cmd->add_option("--seeds", o->seeds,
                  "Run N seeds, --first-seed .. --first-seed + N - 1 (each seeds the target's sampling, the "
                  "initialisation and the batches; tables give mean ± standard deviation over them)")
      ->check(CLI::Range(1, 100));
  cmd->add_option("--first-seed", o->first_seed,
                  "First seed (default 0): e.g. --first-seed 2 --seeds 1 runs seed 2 alone, to run the seeds of one "
                  "study in parallel jobs (each into its own --out; a seed's figures do not depend on the others)")
      ->check(CLI::Range(0, 1000000));
  cmd->add_option("-o,--out", o->out, "Output directory");
  cmd->add_option("--epochs-cl", o->ckd.epochs_cl, "CL epochs per platform")->check(CLI::Range(1, 10000));
  cmd->add_option("--epochs-kd", o->ckd.epochs_kd, "KD epochs per platform")->check(CLI::Range(1, 10000));
  cmd->add_option("--beta", o->ckd.beta, fmt::format("Teacher weight in CL (default {:g})", o->ckd.beta))->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--lambda", o->ckd.lambda, fmt::format("EWC strength in KD (default {:g})", o->ckd.lambda))->check(CLI::Range(0.0, 1e12));
  cmd->add_option("--phi-floor", o->ckd.phi_floor, fmt::format("Lower bound of Phi (default {:g})", o->ckd.phi_floor))->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--phi-decay", o->ckd.phi_decay, fmt::format("Phi decay per CL epoch (default {:g}; 1 = none)", o->ckd.phi_decay))->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--kd-task-weight", o->ckd.kd_task_weight, fmt::format("LambdaRank on the labels during KD (default {:g})", o->ckd.kd_task_weight))->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--kd-temperature", o->ckd.kd_temperature,
                  fmt::format("Experimental: temperature of KD's listwise distillation over z-scored scores (default {:g}); "
                              "below 1 the active column's top programs weigh more in what the knowledge base "
                              "matches (docs/transfer.md)", o->ckd.kd_temperature))
      ->check(CLI::Range(0.01, 100.0));
  cmd->add_flag("--kd-from-ac", o->ckd.kd_from_ac,
                 "Experimental: KD starts the knowledge base from the active column's column weights (the same "
                 "architecture) instead of its own; EWC still pulls towards the earlier platforms' anchors");
  cmd->add_option("--kd-data", o->kd_data,
                  "What the target's KD phase distils on: 'measured' (the measured programs of its training tasks, "
                  "the default) or 'candidates' (experimental: every program of its training tasks, measured or not; "
                  "no label enters KD's loss; KD takes ~3x longer on the target; refused with --kd-task-weight > 0; "
                  "docs/transfer.md). Source phases always distil on the sources' training data")
      ->check(CLI::IsMember({"measured", "candidates"}));
  cmd->add_option("--lr-cl", o->ckd.lr_cl, fmt::format("CL learning rate (default {:g})", o->ckd.lr_cl))->check(CLI::Range(1e-7, 1.0));
  cmd->add_option("--lr-kd", o->ckd.lr_kd, fmt::format("KD learning rate (default {:g}; the spec's 1e-4 left the KB far behind the active column, docs/transfer.md)", o->ckd.lr_kd))->check(CLI::Range(1e-7, 1.0));
  cmd->add_option("--epochs", o->train.epochs, "Maximum epochs of each baseline model")->check(CLI::Range(1, 100000));
  cmd->add_option("--min-steps", o->train.min_steps,
                  "At least this many optimizer steps per model and CKD phase (small budgets get more epochs)")
      ->check(CLI::Range(0, 100000000));
  cmd->add_option("--threads", o->train.threads, "Threads (0 = all cores)")->check(CLI::Range(0, 4096));
  add_select_option(cmd, &o->train.select);  // the baselines' and the CKD phases' model selection
  cmd->add_flag("--quiet", o->quiet, "No progress display");
  return Command{cmd, [o, cmd]() {
    const auto sources = split_list(o->sources);
    const auto methods = split_list(o->methods);
    if (methods.empty()) throw Error("--methods lists no method; give e.g. tcl,target-only");
    for (const auto& m : methods) {
      if (std::find(kMethods.begin(), kMethods.end(), m) == kMethods.end()) {
        throw Error("--methods: unknown method '" + m + "' (tcl, tcl-no-phi, tcl-no-ewc, target-only, finetune, mtl, full)");
      }
    }
    if (sources.empty()) throw Error("--sources: no platform given");
    if (o->kd_data == "candidates" && o->ckd.kd_task_weight > 0) {
      throw Error("--kd-data candidates with --kd-task-weight > 0 would train on the labels of unmeasured programs; "
                  "use one or the other");
    }
    if (std::find(sources.begin(), sources.end(), o->target) != sources.end()) {
      throw Error("--target '" + o->target + "' is also a source; remove it from --sources");
    }
    ensure_output_dir(o->out);
    const bool progress = !o->quiet;
    const SampleMethod sampler = parse_sample_method(o->sampler);  // refuse a bad --sampler before any work
    Dataset d = o->data.load(progress && isatty(fileno(stderr)));
    set_threads(o->train.threads);
    const Split split = make_split(d, o->data.split_options());
    print_split(d, split);
    if (o->source_fraction < 1.0) {
      // Keep a seeded random fraction of the programs of every source training and validation task
      // (at least 2); test tasks and the target stay whole. Task indices survive subset(), so the
      // split still applies.
      std::vector<uint8_t> is_test(d.tasks().size(), 0);
      for (uint32_t t : split.test) is_test[t] = 1;
      std::set<int> source_ids;
      for (size_t i = 0; i < d.platforms().size(); ++i) {
        if (std::find(sources.begin(), sources.end(), d.platforms()[i]) != sources.end()) source_ids.insert(static_cast<int>(i));
      }
      std::mt19937_64 rng(0x50f7ULL);
      std::vector<uint32_t> keep;
      for (size_t ti = 0; ti < d.tasks().size(); ++ti) {
        const Task& t = d.tasks()[ti];
        std::vector<uint32_t> p = t.programs;
        if (source_ids.count(t.platform) && !is_test[ti]) {
          std::shuffle(p.begin(), p.end(), rng);
          p.resize(std::min(p.size(), std::max<size_t>(2, static_cast<size_t>(std::ceil(o->source_fraction * p.size())))));
        }
        keep.insert(keep.end(), p.begin(), p.end());
      }
      std::sort(keep.begin(), keep.end());
      if (progress) std::fprintf(stderr, "sources: keeping %.0f%% of their programs (%zu of %zu programs overall)\n",
                                 100 * o->source_fraction, keep.size(), d.num_programs());
      d = d.subset(keep);
    }
    // Tasks of each part, per platform name.
    std::map<std::string, int> pid;
    for (size_t i = 0; i < d.platforms().size(); ++i) pid[d.platforms()[i]] = static_cast<int>(i);
    std::vector<std::string> platforms = sources;
    platforms.push_back(o->target);
    for (const auto& p : platforms) {
      if (!pid.count(p)) {
        std::string have;
        for (const auto& n : d.platforms()) have += (have.empty() ? "" : ", ") + n;
        throw Error("platform '" + p + "' is not in the data (have: " + have + "); name sources with -d NAME=PATH");
      }
    }
    auto of = [&](const std::vector<uint32_t>& tasks, const std::string& p) {
      std::vector<uint32_t> r;
      for (uint32_t t : tasks) {
        if (d.tasks()[t].platform == pid[p]) r.push_back(t);
      }
      return r;
    };
    for (const auto& p : platforms) {
      if (of(split.train, p).empty() || of(split.test, p).empty()) {
        throw Error("platform '" + p + "' has no training or no test tasks in this split; give more workloads for it or "
                    "change --test-fraction / --split-seed");
      }
    }
    const std::string& target = o->target;

    std::vector<Row> rows;
    std::string phase_json;
    std::string csv =
        "method,seed,phase_index,phase,platform,top1,top5,pairwise,random_top1,top1_task_mean,random_top1_task_mean\n";
    auto evaluate_all = [&](const std::string& method, int seed, int phase_index, const std::string& phase,
                            const ProgramScorer& scorer, const std::vector<std::string>& on) {
      for (const auto& p : on) {
        const RankingReport r = evaluate_rankings(d, of(split.test, p), scorer).back();
        Row row{method, seed, phase_index, phase, p, r.top1.pooled, r.top5.pooled, r.pairwise, r.random_top1.pooled,
                r.top1.task_mean, r.random_top1.task_mean};
        csv += fmt::format("{},{},{},{},{},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f}\n", row.method, row.seed,
                           row.phase_index, row.phase, row.platform, row.top1, row.top5, row.pairwise, row.random_top1,
                           row.top1_task_mean, row.random_top1_task_mean);
        if (progress) {
          std::fprintf(stderr, "[%s seed %d] after %s: %s test top-1 %.4f top-5 %.4f\n", method.c_str(), seed,
                       phase.c_str(), p.c_str(), row.top1, row.top5);
        }
        rows.push_back(row);
      }
      write_file_atomic(o->out + "/phases.csv", csv);
    };
    auto train_eval = [&](const std::string& method, int seed, const Dataset& data, const std::vector<std::string>& on_platforms,
                          TrainOptions to, const std::vector<std::string>& eval_on) {
      Split s;
      for (const auto& p : on_platforms) {
        auto a = of(split.train, p), b = of(split.valid, p);
        s.train.insert(s.train.end(), a.begin(), a.end());
        s.valid.insert(s.valid.end(), b.begin(), b.end());
      }
      to.seed = static_cast<uint64_t>(seed);
      to.progress = false;
      if (progress) std::fprintf(stderr, "[%s seed %d] training on %zu tasks\n", method.c_str(), seed, s.train.size());
      TrainResult r = train_cost_model(data, s, to);
      CostModel m = load_cost_model(r.best, method);
      evaluate_all(method, seed, 0, "final", [&](const std::vector<uint32_t>& p) { return predict_programs(m, d, p); },
                   eval_on);
      return r.best;
    };

    size_t budget_programs = 0, target_pool = 0;
    bool kb_written = false;
    for (int seed = o->first_seed; seed < o->first_seed + o->seeds; ++seed) {
      // ---- the target's measured budget (the same picks for every method of this seed)
      std::vector<uint32_t> target_tasks = of(split.train, target);
      for (uint32_t t : of(split.valid, target)) target_tasks.push_back(t);
      ActiveSamplingOptions a = o->sampling;
      a.sampler.method = sampler;
      a.sampler.seed = static_cast<uint64_t>(seed);
      a.sampler.threads = o->train.threads;
      a.threads = o->train.threads;
      a.per_task.fraction = o->budget;
      a.round_min_steps = o->train.min_steps;
      a.progress = progress;
      const auto t0 = Clock::now();
      const std::vector<uint32_t> picked = o->budget >= 1.0 ? [&] {
        std::vector<uint32_t> all;
        for (uint32_t t : target_tasks) all.insert(all.end(), d.tasks()[t].programs.begin(), d.tasks()[t].programs.end());
        std::sort(all.begin(), all.end());
        return all;
      }() : active_select(d, target_tasks, a);
      budget_programs = picked.size();
      target_pool = 0;
      for (uint32_t t : target_tasks) target_pool += d.tasks()[t].programs.size();
      if (progress) {
        std::fprintf(stderr, "target %s: %zu of %zu programs picked (%s, %.1f s)\n", target.c_str(), picked.size(),
                     target_pool, o->sampler.c_str(), since(t0));
      }
      const Dataset target_data = d.subset(picked);

      for (const auto& method : methods) {
        if (method.rfind("tcl", 0) == 0) {
          CkdOptions co = o->ckd;
          co.min_steps = o->train.min_steps;
          co.select = o->train.select;
          co.seed = static_cast<uint64_t>(seed);
          co.progress = progress;
          if (method == "tcl-no-phi") co.dynamic_phi = false;
          if (method == "tcl-no-ewc") co.lambda = 0;
          KnowledgeBase kb(co.kb, static_cast<uint64_t>(seed));
          auto kb_scorer = [&](const std::vector<uint32_t>& p) { return predict_programs(kb.model(), d, p); };
          int phase = 0;
          // The active column after each CL phase, on every platform, as method "<method>:ac" (the same
          // phase index and name as the KB's row after the KD phase that follows).
          auto eval_ac = [&](const std::string& p) {
            return [&, p](const DatasetScorer& ac) {
              evaluate_all(method + ":ac", seed, phase + 1, "learn " + p,
                           [&](const std::vector<uint32_t>& progs) { return ac(d, progs); }, platforms);
            };
          };
          for (const auto& s : sources) {
            if (progress) std::fprintf(stderr, "[%s seed %d] learning source %s\n", method.c_str(), seed, s.c_str());
            CkdPhaseLog log = learn_platform(kb, d, of(split.train, s), of(split.valid, s), s, co, eval_ac(s));
            phase_json += fmt::format("{}{{\"method\": \"{}\", \"seed\": {}, \"phase\": {}}}", phase_json.empty() ? "" : ",\n ",
                                      method, seed, to_json(log));
            evaluate_all(method, seed, ++phase, "learn " + s, kb_scorer, platforms);
          }
          if (progress) std::fprintf(stderr, "[%s seed %d] learning target %s\n", method.c_str(), seed, target.c_str());
          // The target's unmeasured candidates (its training tasks whole, in d) for KD, if asked.
          KdPool pool;
          if (o->kd_data == "candidates") pool = KdPool{&d, of(split.train, target)};
          CkdPhaseLog log = learn_platform(kb, target_data, of(split.train, target), of(split.valid, target), target, co,
                                           eval_ac(target), pool);
          phase_json += fmt::format(",\n {{\"method\": \"{}\", \"seed\": {}, \"phase\": {}}}", method, seed, to_json(log));
          evaluate_all(method, seed, ++phase, "learn " + target, kb_scorer, platforms);
          if (method == "tcl" && seed == o->first_seed) {
            save_weights(kb.deployable(fmt::format("{{\"pipeline\": \"tcl\", \"sources\": \"{}\", \"target\": \"{}\", "
                                                   "\"budget\": {}, \"kd_data\": \"{}\"}}", json_escape(o->sources), json_escape(target),
                                                   o->budget, o->kd_data)),
                         o->out + "/kb.tclm");
            kb_written = true;
          }
        } else if (method == "target-only") {
          train_eval(method, seed, target_data, {target}, o->train, {target});
        } else if (method == "full") {
          train_eval(method, seed, d, {target}, o->train, {target});
        } else if (method == "finetune") {
          // A model of all sources together, then trained on the target budget from those weights.
          WeightsFile src = train_eval("source-model", seed, d, sources, o->train, platforms);
          TrainOptions ft = o->train;
          ft.init = std::make_shared<WeightsFile>(std::move(src));
          train_eval(method, seed, target_data, {target}, ft, platforms);
        } else if (method == "mtl") {
          // One trunk, one head per platform, all sources' data and the target budget together.
          std::vector<uint32_t> progs = picked;
          for (const auto& s : sources) {
            for (const auto* part : {&split.train, &split.valid}) {
              for (uint32_t t : of(*part, s)) progs.insert(progs.end(), d.tasks()[t].programs.begin(), d.tasks()[t].programs.end());
            }
          }
          std::sort(progs.begin(), progs.end());
          TrainOptions mt = o->train;
          mt.model_kind = ModelKind::kMambaMtl;
          train_eval(method, seed, d.subset(progs), platforms, mt, platforms);
        }
      }
    }

    // ---- summary: target top-1/top-5, and the sources' top-1 after their own phase and at the end
    std::string table = fmt::format(
        "target {} with {} of {} programs measured ({}), sources {} (test tasks: held-out workloads)\n\n"
        "| method | target top-1 | target top-1 task mean | target top-5 |",
        target, budget_programs, target_pool, o->sampler, o->sources);
    for (const auto& s : sources) table += fmt::format(" {} top-1 after learning it | {} top-1 at the end |", s, s);
    table += "\n|---|---|---|---|";
    for (size_t i = 0; i < sources.size(); ++i) table += "---|---|";
    table += "\n";
    // metric: 0 = top-1 (pooled), 1 = top-5 (pooled), 2 = top-1 task mean
    // One figure of every seed's row of `method` on `platform` in `phase` ("end": the last phase with
    // such a row). metric: 0 = top-1 (pooled), 1 = top-5 (pooled), 2 = top-1 task mean.
    auto seed_values = [&](const std::string& method, const std::string& platform, const std::string& phase,
                           int metric) {
      int last_phase = -1;
      for (const auto& r : rows) {
        if (r.method == method && r.platform == platform) last_phase = std::max(last_phase, r.phase_index);
      }
      std::map<int, double> v;
      for (const auto& r : rows) {
        if (r.method != method || r.platform != platform) continue;
        if (phase == "end" ? r.phase_index == last_phase : r.phase == phase) {
          v[r.seed] = metric == 1 ? r.top5 : metric == 2 ? r.top1_task_mean : r.top1;
        }
      }
      return v;
    };
    auto cell = [&](const std::string& method, const std::string& platform, const std::string& phase, int metric) {
      const std::map<int, double> by_seed = seed_values(method, platform, phase, metric);
      if (by_seed.empty()) return std::string("-");
      double m = 0, sd = 0;
      for (const auto& [seed, x] : by_seed) m += x;
      m /= static_cast<double>(by_seed.size());
      for (const auto& [seed, x] : by_seed) sd += (x - m) * (x - m);
      sd = by_seed.size() > 1 ? std::sqrt(sd / static_cast<double>(by_seed.size() - 1)) : 0;
      return by_seed.size() > 1 ? fmt::format("{:.4f} ± {:.4f}", m, sd) : fmt::format("{:.4f}", m);
    };
    // One row per method; after each tcl method, its active column (rows of method "<method>:ac").
    // The sources' "after learning it" is shown for the tcl rows, "at the end" for the models that
    // are the same model at the end (an AC's "end" would be the target's AC scored on the source).
    auto add_row = [&](const std::string& key, const std::string& label, bool after, bool end) {
      table += fmt::format("| {} | {} | {} | {} |", label, cell(key, target, "end", 0), cell(key, target, "end", 2),
                           cell(key, target, "end", 1));
      for (const auto& s : sources) {
        table += fmt::format(" {} | {} |", after ? cell(key, s, "learn " + s, 0) : "-", end ? cell(key, s, "end", 0) : "-");
      }
      table += "\n";
    };
    for (const auto& m : methods) {
      const bool tcl = m.rfind("tcl", 0) == 0;
      add_row(m, m, tcl, tcl || m == "finetune" || m == "mtl");
      if (tcl) add_row(m + ":ac", m + " (active column after CL)", true, false);
    }
    // Paired by seed (every method of a seed runs on the same split with the same target picks): each
    // tcl method minus each other method, on the target and on the sources at the end.
    std::string paired;
    for (const auto& m : methods) {
      if (m.rfind("tcl", 0) != 0) continue;
      for (const auto& other : methods) {
        if (other == m || (m != "tcl" && other.rfind("tcl", 0) == 0)) continue;
        paired += fmt::format("| {} - {} |", m, other);
        for (int metric : {0, 2, 1}) {
          const PairedDifference d = paired_by_seed(seed_values(m, target, "end", metric), seed_values(other, target, "end", metric));
          paired += fmt::format(" {} {} |", format_paired(d), d.verdict());
        }
        for (const auto& src : sources) {
          const PairedDifference d = paired_by_seed(seed_values(m, src, "end", 0), seed_values(other, src, "end", 0));
          paired += d.diffs.empty() ? std::string(" - |") : fmt::format(" {} {} |", format_paired(d), d.verdict());
        }
        paired += "\n";
      }
    }
    if (!paired.empty()) {
      table += "\npaired by seed: mean ± std of the per-seed differences (each seed's in brackets); ahead / behind "
               "when the mean is beyond one std of the differences (and at least 0.0005), else level\n\n"
               "| comparison | target top-1 | target top-1 task mean | target top-5 |";
      for (const auto& src : sources) table += fmt::format(" {} top-1 at the end |", src);
      table += "\n|---|---|---|---|";
      for (size_t i = 0; i < sources.size(); ++i) table += "---|";
      table += "\n" + paired;
    }
    if (!rows.empty()) {
      for (const auto& r : rows) {
        if (r.platform == target) {
          table += fmt::format("\nrandom ranking of the target's test tasks (exact expectation): top-1 {:.4f}\n", r.random_top1);
          break;
        }
      }
    }
    if (kb_written) {
      table += fmt::format("knowledge base: {} bytes ({} parameters), whatever the number of platforms\n",
                           std::filesystem::file_size(o->out + "/kb.tclm"), load_weights(o->out + "/kb.tclm").num_parameters());
    }
    // Every option's value, defaults included: which settings a directory of results came from.
    write_file_atomic(o->out + "/transfer_options.txt", cmd->config_to_str(true, false));
    write_file_atomic(o->out + "/transfer.md", table);
    write_file_atomic(o->out + "/transfer.json",
                      fmt::format("{{\"sources\": \"{}\", \"target\": \"{}\", \"budget\": {}, \"sampler\": \"{}\", "
                                  "\"kd_data\": \"{}\", \"first_seed\": {}, \"seeds\": {}, \"target_programs_measured\": {}, \"target_pool\": {}, "
                                  "\"ckd_phases\": [{}]}}\n",
                                  json_escape(o->sources), json_escape(target), o->budget, o->sampler, o->kd_data,
                                  o->first_seed, o->seeds,
                                  budget_programs, target_pool, phase_json));
    plot_csv("transfer", o->out + "/phases.csv", o->out + "/transfer.png");
    std::cout << table << "results: " << o->out << "/{transfer.md,transfer.json,phases.csv,transfer.png,transfer_options.txt,kb.tclm}\n";
    return 0;
  }};
}

}  // namespace tclm::cli
