// study/transfer.cpp: see transfer.h.
#include "study/transfer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>

#include "common/timer.h"
#include "model/cost_model.h"
#include "model/multi_head.h"
#include "study/journal.h"
#include "tclm/error.h"
#include "tclm/evaluation.h"
#include "tclm/weights.h"

namespace tclm::study {

const std::vector<std::string>& transfer_methods() {
  static const std::vector<std::string> m = {"tcl", "tcl-no-phi", "target-only", "finetune", "mtl", "full"};
  return m;
}

const char* const kPhasesCsvHeader =
    "method,seed,phase_index,phase,platform,top1,top5,pairwise,random_top1,top1_task_mean,random_top1_task_mean";

namespace {

bool is_tcl(const std::string& method) { return method.rfind("tcl", 0) == 0; }

// Keeps a seeded random fraction (at least 2) of the programs of every training and validation task of
// the `sources`; test tasks and other platforms stay whole. Task indices survive subset(), so the split
// still applies.
Dataset keep_source_fraction(const Dataset& d, const Split& split, const std::vector<std::string>& sources,
                             double fraction, bool progress) {
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
      p.resize(std::min(p.size(), std::max<size_t>(2, static_cast<size_t>(std::ceil(fraction * p.size())))));
    }
    keep.insert(keep.end(), p.begin(), p.end());
  }
  std::sort(keep.begin(), keep.end());
  if (progress) {
    std::fprintf(stderr, "sources: keeping %.0f%% of their programs (%zu of %zu programs overall)\n", 100 * fraction,
                 keep.size(), d.num_programs());
  }
  return d.subset(keep);
}

}  // namespace

TransferStudyResult run_transfer_study(Dataset d, const Split& split, const TransferStudyOptions& o) {
  const auto& sources = o.sources;
  const std::string& target = o.target;
  // With N processes (o.train.dist) every process runs the whole study on its shard of the tasks and
  // takes part in every training step and evaluation; rank 0 alone writes.
  DataParallel* dist = o.train.dist && o.train.dist->world() > 1 ? o.train.dist.get() : nullptr;
  const bool writer = dist == nullptr || dist->rank() == 0;
  const bool progress = o.progress && writer;
  if (o.methods.empty()) throw Error("--methods lists no method; give e.g. tcl,target-only");
  for (const auto& m : o.methods) {
    if (std::find(transfer_methods().begin(), transfer_methods().end(), m) == transfer_methods().end()) {
      throw Error("--methods: unknown method '" + m + "' (tcl, tcl-no-phi, target-only, finetune, mtl, full)");
    }
  }
  if (sources.empty()) throw Error("--sources: no platform given");
  if (std::find(sources.begin(), sources.end(), target) != sources.end()) {
    throw Error("--target '" + target + "' is also a source; remove it from --sources");
  }
  if (o.source_fraction < 1.0) d = keep_source_fraction(d, split, sources, o.source_fraction, progress);
  // Tasks of each part, per platform name.
  std::map<std::string, int> pid;
  for (size_t i = 0; i < d.platforms().size(); ++i) pid[d.platforms()[i]] = static_cast<int>(i);
  std::vector<std::string> platforms = sources;
  platforms.push_back(target);
  for (const auto& p : platforms) {
    if (!pid.count(p)) {
      std::string have;
      for (const auto& [name, id] : pid) have += (have.empty() ? "" : ", ") + name;
      throw Error("platform '" + p + "' is not in the data (have: " + have + "); name it with -d " + p + "=PATH");
    }
  }
  auto of = [&](const std::vector<uint32_t>& tasks, const std::string& p) {
    std::vector<uint32_t> r;
    for (uint32_t t : tasks) {
      if (d.tasks()[t].platform == pid[p]) r.push_back(t);
    }
    return r;
  };
  // Without test tasks (--test-fraction 0: the knowledge base to deploy learns every task) there is
  // nothing to evaluate, and the baselines exist only to be compared on test tasks.
  const bool evaluated = !split.test.empty();
  if (!evaluated) {
    for (const auto& m : o.methods) {
      if (!is_tcl(m)) {
        throw Error("--methods " + m + ": --test-fraction 0 leaves no test tasks, so only the knowledge base (tcl, "
                    "tcl-no-phi) can be learned; the baselines exist to be compared on test tasks");
      }
    }
  }
  for (const auto& p : platforms) {
    if (of(split.train, p).empty() || (evaluated && of(split.test, p).empty())) {
      throw Error("platform '" + p + "' has no training or no test tasks in this split; give more workloads for it or "
                  "change --test-fraction / --split-seed");
    }
  }

  // Scores of programs of `d` with a model of this process: with N processes each process scores the
  // programs it keeps and the scores are combined (every process calls it with the same programs).
  auto shared_scorer = [&](ProgramScorer local) -> ProgramScorer {
    return dist != nullptr ? dist->sharded(d, std::move(local)) : local;
  };

  TransferStudyResult result;
  result.evaluated = evaluated;
  std::optional<CsvJournal> phases_csv, tasks_csv;
  if (writer && evaluated) {
    phases_csv.emplace(o.out + "/phases.csv", kPhasesCsvHeader, /*resume=*/false);
    phases_csv->keep({});
    // test_tasks.csv: every evaluation's per-task figures, so that a platform's loss can be traced to
    // the workloads it comes from (a phases.csv row's top1_task_mean is the mean of its rows' top1).
    tasks_csv.emplace(o.out + "/test_tasks.csv", "method,seed,phase_index,phase," + per_task_csv_header(),
                      /*resume=*/false);
    tasks_csv->keep({});
  }
  auto evaluate_all = [&](const std::string& method, int seed, int phase_index, const std::string& phase,
                          const ProgramScorer& scorer, const std::vector<std::string>& on) {
    if (!evaluated) return;
    for (const auto& p : on) {
      std::vector<TaskResult> per_task;
      const RankingReport r = evaluate_rankings(d, of(split.test, p), scorer, tasks_csv ? &per_task : nullptr).back();
      if (tasks_csv) {
        for (const auto& row : per_task_csv_rows(per_task, fmt::format("{},{},{},{},", method, seed, phase_index, phase))) {
          tasks_csv->append(row);
        }
      }
      ResultRow row{{method, phase, p, seed},
                    phase_index,
                    {{"top1", r.top1.pooled},
                     {"top5", r.top5.pooled},
                     {"pairwise", r.pairwise},
                     {"random_top1", r.random_top1.pooled},
                     {"top1_task_mean", r.top1.task_mean},
                     {"random_top1_task_mean", r.random_top1.task_mean}}};
      if (phases_csv) phases_csv->append(fmt::format("{},{},{},{},{},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f}", method, seed, phase_index,
                                    phase, p, r.top1.pooled, r.top5.pooled, r.pairwise, r.random_top1.pooled,
                                    r.top1.task_mean, r.random_top1.task_mean));
      if (progress) {
        std::fprintf(stderr, "[%s seed %d] after %s: %s test top-1 %.4f top-5 %.4f\n", method.c_str(), seed,
                     phase.c_str(), p.c_str(), r.top1.pooled, r.top5.pooled);
      }
      result.table.add(std::move(row));
    }
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
    evaluate_all(method, seed, 0, "final",
                 shared_scorer([&](const std::vector<uint32_t>& p) { return predict_programs(m, d, p); }), eval_on);
    return r.best;
  };

  // The pool's tasks of the target's training workloads (Task::workload: however a log spells the key).
  std::vector<uint32_t> candidate_tasks;
  if (o.candidates) {
    std::set<std::string> train_workloads;
    for (uint32_t t : of(split.train, target)) train_workloads.insert(d.tasks()[t].workload);
    const Dataset& c = *o.candidates;
    int64_t programs = 0;
    for (uint32_t t = 0; t < c.tasks().size(); ++t) {
      if (c.platforms()[c.tasks()[t].platform] != target) {
        throw Error(fmt::format("--candidates: the pool holds programs of platform '{}'; it must be the target's ('{}')",
                                c.platforms()[c.tasks()[t].platform], target));
      }
      if (train_workloads.count(c.tasks()[t].workload) == 0) continue;
      candidate_tasks.push_back(t);
      programs += static_cast<int64_t>(c.tasks()[t].programs.size());
    }
    if (candidate_tasks.empty()) {
      throw Error(fmt::format("--candidates: the pool has no program of the target's {} training tasks (it holds {} "
                              "tasks of other workloads); give the pool of the target's collection (OUT/pool of tclm "
                              "collect)", of(split.train, target).size(), c.tasks().size()));
    }
    if (progress) {
      std::fprintf(stderr, "target %s: the candidate pool has %lld programs of %zu of its %zu training tasks (of %zu "
                           "tasks in the pool)\n", target.c_str(), static_cast<long long>(programs),
                   candidate_tasks.size(), of(split.train, target).size(), c.tasks().size());
    }
  }

  for (int seed = o.first_seed; seed < o.first_seed + o.seeds; ++seed) {
    // ---- the target's measured budget (the same picks for every method of this seed)
    std::vector<uint32_t> target_tasks = of(split.train, target);
    for (uint32_t t : of(split.valid, target)) target_tasks.push_back(t);
    ActiveSamplingOptions a = o.sampling;
    a.sampler.method = o.sampler;
    a.sampler.seed = static_cast<uint64_t>(seed);
    a.sampler.threads = o.train.threads;
    a.threads = o.train.threads;
    a.per_task.fraction = o.budget;
    a.round_min_steps = o.train.min_steps;
    a.progress = progress;
    a.dist = o.train.dist;
    const auto t0 = Clock::now();
    const std::vector<uint32_t> picked = o.budget >= 1.0 ? [&] {
      std::vector<uint32_t> all;
      for (uint32_t t : target_tasks) all.insert(all.end(), d.tasks()[t].programs.begin(), d.tasks()[t].programs.end());
      std::sort(all.begin(), all.end());
      return all;
    }() : active_select(d, target_tasks, a);
    result.target_measured = picked.size();
    result.target_pool = 0;
    for (uint32_t t : target_tasks) result.target_pool += d.tasks()[t].programs.size();
    if (progress) {
      std::fprintf(stderr, "target %s: %zu of %zu programs picked (%s, %.1f s)\n", target.c_str(), picked.size(),
                   result.target_pool, sample_method_name(o.sampler), since(t0));
    }
    const Dataset target_data = d.subset(picked);

    for (const auto& method : o.methods) {
      if (is_tcl(method)) {
        CkdOptions co = o.ckd;
        co.min_steps = o.train.min_steps;
        co.select = o.train.select;
        co.seed = static_cast<uint64_t>(seed);
        co.progress = progress;
        co.dist = o.train.dist;
        if (method == "tcl-no-phi") co.dynamic_phi = false;
        KnowledgeBase kb(co.kb, static_cast<uint64_t>(seed));
        const ProgramScorer kb_scorer =
            shared_scorer([&](const std::vector<uint32_t>& p) { return predict_programs(kb.model(), d, p); });
        int phase = 0;
        // The active column after each CL phase, on every platform, as method "<method>:ac" (the same
        // phase index and name as the KB's row after the KD phase that follows; the scorer learn_platform
        // passes already combines the processes' scores).
        auto eval_ac = [&](const std::string& p) {
          return [&, p](const DatasetScorer& ac) {
            evaluate_all(method + ":ac", seed, phase + 1, "learn " + p,
                         [&](const std::vector<uint32_t>& progs) { return ac(d, progs); }, platforms);
          };
        };
        auto log_phase = [&](const CkdPhaseLog& log) {
          result.ckd_phases.push_back(
              nlohmann::ordered_json{{"method", method}, {"seed", seed}, {"phase", nlohmann::ordered_json::parse(to_json(log))}});
        };
        EarlierPrograms earlier{&d, {}};
        for (const auto& s : sources) {
          if (progress) std::fprintf(stderr, "[%s seed %d] learning source %s\n", method.c_str(), seed, s.c_str());
          log_phase(learn_platform(kb, d, of(split.train, s), of(split.valid, s), s, co, eval_ac(s), earlier));
          for (uint32_t t : of(split.train, s)) earlier.tasks.push_back(t);
          evaluate_all(method, seed, ++phase, "learn " + s, kb_scorer, platforms);
        }
        if (progress) std::fprintf(stderr, "[%s seed %d] learning target %s\n", method.c_str(), seed, target.c_str());
        // KD distils on every candidate program of the target's training tasks, measured or not (no
        // label is read): the pool given, else every program of those tasks in the data, which the
        // budget was picked from.
        CandidatePrograms candidates;
        if (o.candidates) {
          candidates = {o.candidates.get(), candidate_tasks};
        } else if (o.budget < 1.0) {
          candidates = {&d, of(split.train, target)};
        }
        log_phase(learn_platform(kb, target_data, of(split.train, target), of(split.valid, target), target, co,
                                 eval_ac(target), earlier, candidates));
        evaluate_all(method, seed, ++phase, "learn " + target, kb_scorer, platforms);
        if (method == "tcl" && seed == o.first_seed) {
          std::string joined;
          for (const auto& s : sources) joined += (joined.empty() ? "" : ",") + s;
          const nlohmann::ordered_json meta = {{"pipeline", "tcl"}, {"sources", joined}, {"target", target}, {"budget", o.budget}};
          result.kb_path = o.out + "/kb.tclm";
          if (writer) save_weights(kb.deployable(meta.dump()), result.kb_path);
        }
      } else if (method == "target-only") {
        train_eval(method, seed, target_data, {target}, o.train, {target});
      } else if (method == "full") {
        train_eval(method, seed, d, {target}, o.train, {target});
      } else if (method == "finetune") {
        // A model of all sources together, then trained on the target budget from those weights.
        WeightsFile src = train_eval("source-model", seed, d, sources, o.train, platforms);
        TrainOptions ft = o.train;
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
        TrainOptions mt = o.train;
        mt.model_kind = ModelKind::kMambaMtl;
        train_eval(method, seed, d.subset(progs), platforms, mt, platforms);
      }
    }
  }
  return result;
}

std::string transfer_markdown(const TransferStudyResult& result, const TransferStudyOptions& o) {
  const ResultsTable& t = result.table;
  const auto& sources = o.sources;
  const std::string& target = o.target;
  std::string joined;
  for (const auto& s : sources) joined += (joined.empty() ? "" : ",") + s;
  const std::string kb_size =
      result.kb_path.empty() ? std::string()
                             : fmt::format("knowledge base: {} bytes ({} parameters), whatever the number of platforms\n",
                                           std::filesystem::file_size(result.kb_path),
                                           load_weights(result.kb_path).num_parameters());
  if (!result.evaluated) {
    return fmt::format("target {} with {} of {} programs measured ({}), sources {}: no test tasks (--test-fraction 0), "
                       "so nothing was evaluated; every platform's training tasks were learned, and the epochs kept were "
                       "chosen on its validation tasks (--valid-fraction; on the training tasks when it is 0)\n{}",
                       target, result.target_measured, result.target_pool, sample_method_name(o.sampler), joined,
                       kb_size);
  }
  std::string table = fmt::format(
      "target {} with {} of {} programs measured ({}), sources {} (test tasks: held-out workloads)\n"
      "top-1 (pooled): over all test tasks of the platform together, the sum of each task's best latency over the "
      "sum of the latencies of the programs the model ranks first (the slowest tasks weigh most); top-1 task mean: "
      "the mean over the test tasks of best latency / latency of the program ranked first (every task counts the "
      "same)\n\n"
      "| method | target top-1 | target top-1 task mean | target top-5 |",
      target, result.target_measured, result.target_pool, sample_method_name(o.sampler), joined);
  for (const auto& s : sources) table += fmt::format(" {} top-1 after learning it | {} top-1 at the end |", s, s);
  table += "\n|---|---|---|---|";
  for (size_t i = 0; i < sources.size(); ++i) table += "---|---|";
  table += "\n";
  // mean ± std over seeds of `method`'s figure on `platform` in `phase` ("end": its last phase there)
  auto cell = [&](const std::string& method, const std::string& platform, const std::string& phase,
                  const std::string& figure) {
    const std::string ph = phase == "end" ? t.last_phase(method, platform) : phase;
    return format_summary(t.summary(method, ph, platform, figure), 4);
  };
  // One row per method; after each tcl method, its active column (rows of method "<method>:ac").
  // The sources' "after learning it" is shown for the tcl rows, "at the end" for the models that
  // are the same model at the end (an AC's "end" would be the target's AC scored on the source).
  auto add_row = [&](const std::string& key, const std::string& label, bool after, bool end) {
    table += fmt::format("| {} | {} | {} | {} |", label, cell(key, target, "end", "top1"),
                         cell(key, target, "end", "top1_task_mean"), cell(key, target, "end", "top5"));
    for (const auto& s : sources) {
      table += fmt::format(" {} | {} |", after ? cell(key, s, "learn " + s, "top1") : "-",
                           end ? cell(key, s, "end", "top1") : "-");
    }
    table += "\n";
  };
  for (const auto& m : o.methods) {
    const bool tcl = is_tcl(m);
    add_row(m, m, tcl, tcl || m == "finetune" || m == "mtl");
    if (tcl) add_row(m + ":ac", m + " (active column after CL)", true, false);
  }
  // Paired by seed: each tcl method minus each other method, on the target and on the sources at the end.
  auto pair_end = [&](const std::string& m, const std::string& other, const std::string& platform,
                      const std::string& figure) {
    return t.paired(m, t.last_phase(m, platform), other, t.last_phase(other, platform), platform, figure);
  };
  std::string paired;
  for (const auto& m : o.methods) {
    if (!is_tcl(m)) continue;
    for (const auto& other : o.methods) {
      if (other == m || (m != "tcl" && is_tcl(other))) continue;
      paired += fmt::format("| {} - {} |", m, other);
      for (const char* figure : {"top1", "top1_task_mean", "top5"}) {
        paired += " " + format_paired_cell(pair_end(m, other, target, figure)) + " |";
      }
      for (const auto& src : sources) paired += " " + format_paired_cell(pair_end(m, other, src, "top1")) + " |";
      paired += "\n";
    }
  }
  if (!paired.empty()) {
    table += std::string("\n") + kPairedLegend + "\n\n| comparison | target top-1 | target top-1 task mean | target top-5 |";
    for (const auto& src : sources) table += fmt::format(" {} top-1 at the end |", src);
    table += "\n|---|---|---|---|";
    for (size_t i = 0; i < sources.size(); ++i) table += "---|";
    table += "\n" + paired;
  }
  for (const auto& r : t.rows()) {
    if (r.key.platform == target) {
      table += fmt::format("\nrandom ranking of the target's test tasks (exact expectation): top-1 {:.4f}\n",
                           r.figures.at("random_top1"));
      break;
    }
  }
  return table + kb_size;
}

nlohmann::ordered_json transfer_json(const TransferStudyResult& result, const TransferStudyOptions& o) {
  std::string joined;
  for (const auto& s : o.sources) joined += (joined.empty() ? "" : ",") + s;
  return {{"sources", joined},
          {"target", o.target},
          {"budget", o.budget},
          {"sampler", sample_method_name(o.sampler)},
          {"first_seed", o.first_seed},
          {"seeds", o.seeds},
          {"target_programs_measured", result.target_measured},
          {"target_pool", result.target_pool},
          {"ckd_phases", result.ckd_phases}};
}

}  // namespace tclm::study
