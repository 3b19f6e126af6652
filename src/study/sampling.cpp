// study/sampling.cpp: see sampling.h.
#include "study/sampling.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <tuple>

#include "common/bytes.h"
#include "common/timer.h"
#include "model/cost_model.h"
#include "study/journal.h"
#include "tclm/error.h"

namespace tclm::study {

const char* const kSamplingCsvHeader =
    "sampler,rate,seed,measured,pool,top1,top5,top1_task_mean,top5_task_mean,pairwise,random_top1,"
    "random_top5,select_seconds,model_seconds,train_seconds,epochs,best_epoch,best_valid_top1";

std::string rate_phase(double rate) { return fmt::format("{}", rate); }

namespace {

// The version of the study's runs, recorded in study_options.txt: 2 = the trainer never keeps a
// warm-up epoch as the best model; 3 = the final models' kept epoch follows --select (default
// pairwise; before, the validation top-1); the between-round models use the trainer's default rule
// (pairwise), whatever --select says.
constexpr int kStudyVersion = 3;

using RunKey = std::tuple<std::string, double, int>;

// A whole CSV field as a number (std::invalid_argument otherwise).
double parse_csv_number(const std::string& s) {
  size_t used = 0;
  const double v = std::stod(s, &used);
  if (used != s.size()) throw std::invalid_argument(s);
  return v;
}

std::string csv_row(const SamplingRun& r) {
  return fmt::format(
      "{},{},{},{},{},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.3f},{:.3f},{:.3f},{},{},{:.6f}", r.sampler,
      r.rate, r.seed, r.measured, r.pool, r.test.top1.pooled, r.test.top5.pooled, r.test.top1.task_mean,
      r.test.top5.task_mean, r.test.pairwise, r.test.random_top1.pooled, r.test.random_top5.pooled, r.select_seconds,
      r.model_seconds, r.train_seconds, r.epochs, r.best_epoch, r.best_valid_top1);
}

// A row of an earlier run's sampling.csv. A malformed row is an error naming the file and line: the
// study's table would otherwise mix runs silently.
SamplingRun parse_row(const std::string& path, const CsvJournal::Line& line) {
  const auto& f = line.fields;
  auto bad = [&](const std::string& why) { return Error(fmt::format("{}:{}: {}: '{}'", path, line.number, why, line.text)); };
  if (f.size() != 18) throw bad(fmt::format("{} fields, expected 18", f.size()));
  SamplingRun r;
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
  return r;
}

// The run (sampler, rate, seed) of a test_tasks.csv or curves.csv row: its first three fields.
RunKey run_of(const std::string& path, const CsvJournal::Line& line) {
  const auto& f = line.fields;
  try {
    if (f.size() < 3) throw std::invalid_argument(line.text);
    const double seed = parse_csv_number(f[2]);
    if (!(seed >= 0 && seed == std::floor(seed))) throw std::invalid_argument(line.text);
    return {f[0], parse_csv_number(f[1]), static_cast<int>(seed)};
  } catch (const std::exception&) {
    throw Error(fmt::format("{}:{}: not a sampler,rate,seed,... row: '{}'", path, line.number, line.text));
  }
}

void note_cut(const CsvJournal& j) {
  if (j.dropped_tail()) {
    std::fprintf(stderr, "resume: %s: its last line was cut short (no newline); dropped, its run is done again\n",
                 j.path().c_str());
  }
}

// study_options.txt: with resume, the file in `out` must hold the same options.
void check_options(const std::string& options_path, const std::string& csv_path, const std::string& out,
                   const std::string& options_text) {
  if (!std::filesystem::exists(options_path))
    throw Error(fmt::format("{}: no {} beside it (written by an older tclm), so its options cannot be checked; use "
                            "another --out",
                            csv_path, options_path));
  const std::string old_options = read_file(options_path);
  if (old_options == options_text) return;
  auto lines_of = [](const std::string& t) {
    const auto v = split_lines(t);
    return std::set<std::string>(v.begin(), v.end());
  };
  const auto was = lines_of(old_options), now = lines_of(options_text);
  std::string diff;
  for (const auto& l : was)
    if (!now.count(l)) diff += "  was: " + l + "\n";
  for (const auto& l : now)
    if (!was.count(l)) diff += "  now: " + l + "\n";
  throw Error(fmt::format("{}: the study in {} ran with other options; resume only with the same ones, or use another "
                          "--out:\n{}",
                          options_path, out, diff));
}

}  // namespace

SamplingStudyResult run_sampling_study(const Dataset& d, const Split& split, const SamplingStudyOptions& o) {
  if (o.samplers.empty() || o.rates.empty()) throw Error("--samplers and --rates must list something");
  if (split.test.empty()) throw Error("the split has no test tasks; raise --test-fraction");
  SamplingStudyResult result;
  // The pool: the training and validation tasks (validation programs cost measurements too).
  std::vector<uint32_t> pool_tasks = split.train;
  pool_tasks.insert(pool_tasks.end(), split.valid.begin(), split.valid.end());
  size_t pool_size = 0;
  for (uint32_t t : pool_tasks) pool_size += d.tasks()[t].programs.size();
  // The random ranking's expectation does not depend on the scores; kept rows must have the same (the
  // same test tasks).
  const RankingReport& random = result.random = evaluate_rankings(d, split.test, [](const std::vector<uint32_t>& p) {
                                                  return std::vector<float>(p.size(), 0.0f);
                                                }).back();
  const std::string options_path = o.out + "/study_options.txt";
  const std::string options_text = fmt::format("study_version={}\n", kStudyVersion) + o.options_text;
  const std::string csv_path = o.out + "/sampling.csv";
  const bool resume = o.resume && std::filesystem::exists(csv_path);
  if (resume) check_options(options_path, csv_path, o.out, options_text);

  // sampling.csv: the runs already done are kept, not repeated.
  CsvJournal runs_csv(csv_path, kSamplingCsvHeader, resume);
  note_cut(runs_csv);
  std::set<RunKey> done;
  std::vector<std::string> kept_rows;
  for (const auto& line : runs_csv.lines()) {
    SamplingRun r = parse_row(csv_path, line);
    if (r.pool != pool_size)
      throw Error(fmt::format("{}: its runs picked from a pool of {} programs, this run's pool has {}: other data or "
                              "another split; use another --out",
                              csv_path, r.pool, pool_size));
    if (std::abs(r.test.random_top1.pooled - random.random_top1.pooled) > 2e-6 ||
        std::abs(r.test.random_top5.pooled - random.random_top5.pooled) > 2e-6)
      throw Error(fmt::format("{}: run {} rate {:g} seed {} was evaluated on other test tasks (a random ranking scores "
                              "{:.6f} there, {:.6f} here): other data or another split; use another --out",
                              csv_path, r.sampler, r.rate, r.seed, r.test.random_top1.pooled, random.random_top1.pooled));
    if (!done.insert({r.sampler, r.rate, r.seed}).second)
      throw Error(fmt::format("{}: run {} rate {:g} seed {} appears twice", csv_path, r.sampler, r.rate, r.seed));
    kept_rows.push_back(line.text);
    result.runs.push_back(std::move(r));
  }
  result.kept = result.runs.size();
  if (resume) std::fprintf(stderr, "resume: %zu runs kept from %s\n", result.kept, csv_path.c_str());
  write_file_atomic(options_path, options_text);
  runs_csv.keep(kept_rows);

  // test_tasks.csv: every run's per-task results (which workloads decide the pooled score). The rows of
  // the kept runs are kept (a run killed between its test_tasks.csv rows and its sampling.csv row is run
  // again, and its rows must not appear twice).
  const std::string tasks_path = o.out + "/test_tasks.csv";
  CsvJournal tasks_csv(tasks_path, "sampler,rate,seed," + per_task_csv_header(), resume);
  note_cut(tasks_csv);
  {
    std::vector<std::string> keep;
    std::set<RunKey> with_rows;
    for (const auto& line : tasks_csv.lines()) {
      const RunKey key = run_of(tasks_path, line);
      if (done.count(key)) {
        keep.push_back(line.text);
        with_rows.insert(key);
      }
    }
    if (resume && !std::filesystem::exists(tasks_path) && !done.empty()) {
      std::fprintf(stderr, "resume: no %s: the %zu kept runs have no per-task rows\n", tasks_path.c_str(), done.size());
    } else if (with_rows.size() < done.size()) {
      std::fprintf(stderr, "resume: %zu of the %zu kept runs have no rows in %s\n", done.size() - with_rows.size(),
                   done.size(), tasks_path.c_str());
    }
    tasks_csv.keep(keep);
  }
  // curves.csv (curves): one row per run and epoch. A kept run's curve is kept only when whole: one row
  // per epoch it ran (a run killed under --curves and finished later without it has a partial curve).
  const std::string curves_path = o.out + "/curves.csv";
  std::unique_ptr<CsvJournal> curves_csv;
  if (o.curves) {
    curves_csv = std::make_unique<CsvJournal>(
        curves_path,
        "sampler,rate,seed,epoch,train_loss,valid_top1_task_mean,valid_top5_task_mean,valid_pairwise,test_top1,"
        "test_top5,test_top1_task_mean,test_top5_task_mean,test_pairwise",
        resume);
    note_cut(*curves_csv);
    std::map<RunKey, std::vector<std::string>> by_run;
    for (const auto& line : curves_csv->lines()) {
      if (line.fields.size() != 13)
        throw Error(fmt::format("{}:{}: not a curves.csv row: '{}'", curves_path, line.number, line.text));
      by_run[run_of(curves_path, line)].push_back(line.text);
    }
    std::vector<std::string> keep;
    size_t partial = 0;
    for (const SamplingRun& r : result.runs) {
      const auto it = by_run.find({r.sampler, r.rate, r.seed});
      if (it == by_run.end()) continue;
      if (it->second.size() != static_cast<size_t>(r.epochs)) {
        ++partial;
        continue;
      }
      keep.insert(keep.end(), it->second.begin(), it->second.end());
    }
    if (partial > 0)
      std::fprintf(stderr, "resume: %zu kept runs have a partial curve in %s (left out)\n", partial, curves_path.c_str());
    curves_csv->keep(keep);
  }

  auto train_eval = [&](const Dataset& sub, int seed, SamplingRun* row) {
    TrainOptions to = o.train;
    to.seed = static_cast<uint64_t>(seed);
    to.progress = false;
    if (curves_csv) {
      to.on_epoch = [&, seed, row](const EpochLog& e, CostModelImpl& model) {
        const RankingReport t = evaluate_rankings(d, split.test, [&](const std::vector<uint32_t>& p) {
                                  return predict_programs(model, d, p);
                                }).back();
        curves_csv->append(fmt::format("{},{},{},{},{:.6g},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f}",
                                       row->sampler, row->rate, seed, e.epoch, e.train_loss, e.valid_top1,
                                       e.valid_top5, e.valid_pairwise, t.top1.pooled, t.top5.pooled,
                                       t.top1.task_mean, t.top5.task_mean, t.pairwise));
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
    for (const auto& line : per_task_csv_rows(per_task, fmt::format("{},{},{},", row->sampler, row->rate, seed))) {
      tasks_csv.append(line);
    }
  };
  auto add_run = [&](SamplingRun r) {
    done.insert({r.sampler, r.rate, r.seed});  // a run listed twice runs once
    runs_csv.append(csv_row(r));
    if (o.progress) {
      std::fprintf(stderr, "%-12s rate %5.3f seed %d: %zu of %zu programs, test top-1 %.4f top-5 %.4f\n",
                   r.sampler.c_str(), r.rate, r.seed, r.measured, r.pool, r.test.top1.pooled, r.test.top5.pooled);
    }
    result.runs.push_back(std::move(r));
  };
  for (int seed = o.first_seed; seed < o.first_seed + o.seeds; ++seed) {
    for (double rate : o.rates) {
      if (rate >= 1.0) {  // all data: the same for every sampler
        if (done.count({"all", 1.0, seed})) continue;
        SamplingRun row{"all", 1.0, seed, pool_size, pool_size, {}};
        train_eval(d, seed, &row);
        add_run(std::move(row));
        continue;
      }
      for (SampleMethod m : o.samplers) {
        if (done.count({sample_method_name(m), rate, seed})) continue;
        ActiveSamplingOptions a = o.sampling;
        a.sampler.method = m;
        a.sampler.seed = static_cast<uint64_t>(seed);
        a.sampler.threads = o.train.threads;
        a.threads = o.train.threads;
        a.per_task.fraction = rate;
        a.round_min_steps = o.train.min_steps;
        a.progress = o.progress;
        ActiveSamplingLog log;
        const auto picked = active_select(d, pool_tasks, a, &log);
        SamplingRun row{sample_method_name(m), rate, seed, picked.size(), pool_size, {}};
        row.select_seconds = log.seconds_select;
        row.model_seconds = log.seconds_model;
        train_eval(d.subset(picked), seed, &row);
        add_run(std::move(row));
      }
    }
  }
  if (o.resume) {
    std::fprintf(stderr, "resume: %zu runs kept, %zu run now\n", result.kept, result.runs.size() - result.kept);
  }
  for (const SamplingRun& r : result.runs) {
    result.table.add(ResultRow{{r.sampler, rate_phase(r.rate), "", r.seed},
                               0,
                               {{"top1", r.test.top1.pooled},
                                {"top1_task_mean", r.test.top1.task_mean},
                                {"top5", r.test.top5.pooled}}});
  }
  return result;
}

std::string sampling_markdown(const SamplingStudyResult& result) {
  const ResultsTable& t = result.table;
  std::vector<double> rates;
  for (const auto& r : result.runs) {
    if (std::find(rates.begin(), rates.end(), r.rate) == rates.end()) rates.push_back(r.rate);
  }
  std::sort(rates.begin(), rates.end());
  const std::vector<std::string> samplers = t.methods();
  auto has = [&](const std::string& s, double rate) { return !t.by_seed(s, rate_phase(rate), "", "top1").empty(); };
  std::string out =
      "\ntop-1 (pooled): over all test tasks together, the sum of each task's best latency over the sum of the "
      "latencies of the programs the model ranks first (the slowest tasks weigh most, TLP's score); top-1 task "
      "mean: the mean over the test tasks of best latency / latency of the program ranked first (every task "
      "counts the same)\n";
  for (const std::string metric : {"top1", "top1_task_mean", "top5"}) {
    const std::string name = metric == "top1" ? "top-1 (pooled)" : metric == "top5" ? "top-5 (pooled)" : "top-1 task mean";
    out += fmt::format("\ntest {}, mean ± std over seeds\n\n| sampler |", name);
    for (double r : rates) out += fmt::format(" {:g}% |", 100 * r);
    out += "\n|---|";
    for (size_t i = 0; i < rates.size(); ++i) out += "---|";
    out += "\n";
    for (const auto& s : samplers) {
      out += "| " + s + " |";
      for (double r : rates) {
        out += " " + (has(s, r) ? format_summary(t.summary(s, rate_phase(r), "", metric), 3) : std::string()) + " |";
      }
      out += "\n";
    }
  }
  // Paired by seed: the runs of one seed share the split, initialisation and batch order, so the
  // differences tell whether a sampler is above random (or all data) by more than the seed-to-seed spread.
  std::string paired;
  for (const auto& s : samplers) {
    if (s == "all") continue;
    for (double r : rates) {
      if (!has(s, r)) continue;
      for (const std::string base : {"random", "all"}) {
        if (base == s) continue;
        const double base_rate = base == "all" ? 1.0 : r;
        if (!has(base, base_rate)) continue;
        paired += fmt::format("| {} - {} | {:g}% |", s, base == "all" ? "all data" : base, 100 * r);
        for (const char* metric : {"top1", "top1_task_mean", "top5"}) {
          paired += " " + format_paired_cell(t.paired(s, rate_phase(r), base, rate_phase(base_rate), "", metric)) + " |";
        }
        paired += "\n";
      }
    }
  }
  if (!paired.empty()) {
    out += std::string("\n") + kPairedLegend +
           "\n\n| comparison | rate | top-1 (pooled) | top-1 task mean | top-5 (pooled) |\n|---|---|---|---|---|\n" +
           paired;
  }
  out += fmt::format(
      "\nrandom ranking of the test tasks (exact expectation): top-1 {:.3f}, top-1 task mean {:.3f}, top-5 {:.3f}\n",
      result.random.random_top1.pooled, result.random.random_top1.task_mean, result.random.random_top5.pooled);
  return out;
}

}  // namespace tclm::study
