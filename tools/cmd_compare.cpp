// tools/cmd_compare.cpp: `tclm compare` (Mamba against the baselines on one dataset and split) and
// `tclm sweep` (the Mamba hyper-parameter study of the paper's Table 2).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <iostream>
#include <map>
#include <memory>
#include <simdjson.h>
#include <unistd.h>

#include "cli_common.h"
#include "common/bytes.h"
#include "common/timer.h"
#include "model/xgboost_model.h"
#include "plot.h"
#include "tclm/infer.h"
#include "train/trainer.h"

namespace tclm::cli {
namespace {

/// One trained model evaluated on the held-out test tasks.
struct Run {
  std::string model;    // kind, or the sweep's configuration label
  uint64_t seed = 0;
  RankingReport test;   // all test tasks
  int64_t params = 0;   // scalar parameters (0 for XGBoost: its size is in bytes only)
  int64_t bytes = 0;    // size of the deployable model file
  double train_seconds = 0;
  int best_epoch = 0;   // XGBoost: boosting rounds kept
  double candidates_per_second = 0;         // featurize + score the test programs (libtorch / XGBoost)
  double engine_candidates_per_second = 0;  // the same through the libtorch-free engine (Mamba only)
};

std::vector<uint32_t> programs_of(const Dataset& d, const std::vector<uint32_t>& tasks) {
  std::vector<uint32_t> p;
  for (uint32_t t : tasks) p.insert(p.end(), d.tasks()[t].programs.begin(), d.tasks()[t].programs.end());
  return p;
}

/// Programs per second of `score` over `programs` (best of two passes: the first warms caches).
template <class F>
double throughput(const std::vector<uint32_t>& programs, F&& score) {
  double best = 0;
  for (int rep = 0; rep < 2; ++rep) {
    const auto t0 = Clock::now();
    score(programs);
    best = std::max(best, static_cast<double>(programs.size()) / std::max(since(t0), 1e-9));
  }
  return best;
}

/// Trains a neural cost model with `to`, evaluates it on the test tasks, measures its size and speed.
Run run_neural(const Dataset& d, const Split& s, TrainOptions to, const std::string& label, const std::string& dir) {
  to.out_dir = dir;
  TrainResult r = train_cost_model(d, s, to);
  Run run;
  run.model = label;
  run.seed = to.seed;
  run.train_seconds = r.seconds;
  run.best_epoch = r.best_epoch;
  CostModel model = load_cost_model(r.best, label);
  run.params = model->num_parameters();
  run.bytes = static_cast<int64_t>(std::filesystem::file_size(dir + "/best.tclm"));
  run.test = evaluate_rankings(d, s.test, [&](const std::vector<uint32_t>& p) { return predict_programs(model, d, p); })
                 .back();
  const auto programs = programs_of(d, s.test);
  run.candidates_per_second = throughput(programs, [&](const auto& p) { predict_programs(model, d, p); });
  if (r.best.model_kind == kMambaModelKind) {
    CostModelEngine engine(r.best, label);
    engine.set_max_steps(d.max_steps());
    std::vector<float> scores(programs.size());
    run.engine_candidates_per_second = throughput(programs, [&](const auto& p) {
      engine.predict_views(p.size(), [&](size_t i, std::vector<StepView>* v) {
        thread_local std::vector<int64_t> ints;
        d.steps(p[i], v, &ints);
      }, scores.data());
    });
  }
  return run;
}

Run run_xgboost(const Dataset& d, const Split& s, uint64_t seed, int threads, SelectRule select, bool progress,
                const std::string& dir) {
  XgbOptions xo;
  xo.select = select;
  xo.seed = seed;
  xo.threads = threads;
  xo.progress = progress;
  XgbTrainResult r = train_xgboost(d, s, xo);
  Run run;
  run.model = "xgboost";
  run.seed = seed;
  run.train_seconds = r.seconds;
  run.best_epoch = r.best_rounds;
  const std::string blob = r.model.serialize();
  run.bytes = static_cast<int64_t>(blob.size());
  ensure_output_dir(dir);
  write_file_atomic(dir + "/model.ubj", blob);
  run.test = evaluate_rankings(d, s.test, [&](const std::vector<uint32_t>& p) { return r.model.predict(d, p); }).back();
  run.candidates_per_second = throughput(programs_of(d, s.test), [&](const auto& p) { r.model.predict(d, p); });
  return run;
}

std::string csv_header() {
  return "model,seed,params,bytes,train_seconds,best_epoch,test_tasks,top1,top5,top1_task_mean,top5_task_mean,"
         "pairwise,random_top1,random_top5,candidates_per_second,engine_candidates_per_second,random_top1_task_mean";
}

std::string csv_row(const Run& r) {
  const auto& t = r.test;
  return fmt::format("{},{},{},{},{:.2f},{},{},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.1f},{:.1f},{:.6f}",
                     r.model, r.seed, r.params, r.bytes, r.train_seconds, r.best_epoch, t.tasks, t.top1.pooled,
                     t.top5.pooled, t.top1.task_mean, t.top5.task_mean, t.pairwise, t.random_top1.pooled,
                     t.random_top5.pooled, r.candidates_per_second, r.engine_candidates_per_second,
                     t.random_top1.task_mean);
}

/// Inverse of csv_row (for --resume); throws on a row of another layout.
Run parse_csv_row(const std::string& row, const std::string& where) {
  std::vector<std::string> f;
  size_t start = 0;
  for (;;) {
    const size_t comma = row.find(',', start);
    f.push_back(row.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (f.size() != 17) throw Error(fmt::format("{}: expected 17 comma-separated fields, found {}", where, f.size()));
  try {
    Run r;
    RankingReport& t = r.test;
    r.model = f[0];
    r.seed = std::stoull(f[1]);
    r.params = std::stoll(f[2]);
    r.bytes = std::stoll(f[3]);
    r.train_seconds = std::stod(f[4]);
    r.best_epoch = std::stoi(f[5]);
    t.tasks = std::stoi(f[6]);
    t.top1.pooled = std::stod(f[7]);
    t.top5.pooled = std::stod(f[8]);
    t.top1.task_mean = std::stod(f[9]);
    t.top5.task_mean = std::stod(f[10]);
    t.pairwise = std::stod(f[11]);
    t.random_top1.pooled = std::stod(f[12]);
    t.random_top5.pooled = std::stod(f[13]);
    r.candidates_per_second = std::stod(f[14]);
    r.engine_candidates_per_second = std::stod(f[15]);
    t.random_top1.task_mean = std::stod(f[16]);
    return r;
  } catch (const std::logic_error&) {
    throw Error(where + ": a field is not a number; delete that file to train this run again, or run without --resume");
  }
}

/// One model run of a study, finished or reused. Every finished run leaves `<dir>/result.csv`: a line
/// naming the options that produced it (`fingerprint`), the CSV header and its row. With `resume`, a
/// result whose fingerprint matches is read back instead of training again, so an interrupted study
/// (hours on 2 cores) continues where it stopped; a result of other options is retrained, with a note.
template <class F>
Run run_or_resume(const std::string& dir, const std::string& fingerprint, bool resume, bool quiet, F&& run) {
  const std::string path = dir + "/result.csv";
  if (resume && std::filesystem::exists(path)) {
    const std::string text = read_file(path);
    const size_t a = text.find('\n'), b = a == std::string::npos ? a : text.find('\n', a + 1);
    if (b != std::string::npos && text.compare(0, a, "# " + fingerprint) == 0) {
      Run r = parse_csv_row(text.substr(b + 1, text.find('\n', b + 1) - b - 1), path + ":3");
      if (!quiet) std::fprintf(stderr, "   reusing %s\n", path.c_str());
      return r;
    }
    if (!quiet) std::fprintf(stderr, "   %s was made with other options; training again\n", path.c_str());
  }
  Run r = run();
  ensure_output_dir(dir);
  write_file_atomic(path, "# " + fingerprint + "\n" + csv_header() + "\n" + csv_row(r) + "\n");
  return r;
}

struct MeanStd {
  double mean = 0, std = 0;
};
template <class F>
MeanStd stats(const std::vector<const Run*>& runs, F&& get) {
  MeanStd m;
  for (const Run* r : runs) m.mean += get(*r);
  m.mean /= static_cast<double>(runs.size());
  for (const Run* r : runs) m.std += (get(*r) - m.mean) * (get(*r) - m.mean);
  m.std = runs.size() > 1 ? std::sqrt(m.std / static_cast<double>(runs.size() - 1)) : 0.0;
  return m;
}
std::string fmt_ms(MeanStd m, bool with_std) {
  return with_std ? fmt::format("{:.4f} ± {:.4f}", m.mean, m.std) : fmt::format("{:.4f}", m.mean);
}

/// A Markdown table with one line per model (mean over seeds, ± sample standard deviation).
std::string summary_table(const std::vector<Run>& runs) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const Run*>> by_model;
  for (const Run& r : runs) {
    if (by_model[r.model].empty()) order.push_back(r.model);
    by_model[r.model].push_back(&r);
  }
  std::string s =
      "| model | seeds | top-1 | top-5 | top-1 task mean | pairwise | parameters | size (bytes) | train s | "
      "candidates/s | engine candidates/s |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& m : order) {
    const auto& rs = by_model[m];
    const bool multi = rs.size() > 1;
    const Run& f = *rs.front();
    s += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {:.0f} | {:.0f} | {} |\n", m, rs.size(),
                     fmt_ms(stats(rs, [](const Run& r) { return r.test.top1.pooled; }), multi),
                     fmt_ms(stats(rs, [](const Run& r) { return r.test.top5.pooled; }), multi),
                     fmt_ms(stats(rs, [](const Run& r) { return r.test.top1.task_mean; }), multi),
                     fmt_ms(stats(rs, [](const Run& r) { return r.test.pairwise; }), multi),
                     f.params ? fmt::format("{}", f.params) : "-", f.bytes,
                     stats(rs, [](const Run& r) { return r.train_seconds; }).mean,
                     stats(rs, [](const Run& r) { return r.candidates_per_second; }).mean,
                     f.engine_candidates_per_second > 0
                         ? fmt::format("{:.0f}", stats(rs, [](const Run& r) { return r.engine_candidates_per_second; }).mean)
                         : "-");
  }
  if (!runs.empty()) {
    const auto& t = runs.front().test;
    s += fmt::format("| random ranking (exact expectation) | - | {:.4f} | {:.4f} | {:.4f} | 0.5 | - | - | - | - | - |\n",
                     t.random_top1.pooled, t.random_top5.pooled, t.random_top1.task_mean);
  }
  return s;
}

void write_outputs(const std::string& out, const std::string& name, const std::vector<Run>& runs,
                   const std::string& plot_kind) {
  std::string csv = csv_header() + "\n";
  for (const Run& r : runs) csv += csv_row(r) + "\n";
  write_file_atomic(out + "/" + name + ".csv", csv);
  write_file_atomic(out + "/" + name + ".md", summary_table(runs));
  if (!plot_kind.empty()) plot_csv(plot_kind, out + "/" + name + ".csv", out + "/" + name + ".png");
}

// Options of both commands.
struct StudyOptions {
  DataOptions data;
  TrainOptions train;
  std::string out;
  int seeds = 1;
  int first_seed = 0;
  bool quiet = false;
  bool resume = false;

  void add_to(CLI::App* cmd) {
    data.add_to(cmd, true);
    cmd->add_option("--epochs", train.epochs, "Maximum epochs per neural model")->check(CLI::Range(1, 100000));
    cmd->add_option("--patience", train.patience, "Early stopping: epochs without a better validation figure (--select)")
        ->check(CLI::Range(1, 100000));
    add_select_option(cmd, &train.select);
    cmd->add_option("--min-steps", train.min_steps,
                    "At least this many optimizer steps per neural model (more epochs and patience on small data)")
        ->check(CLI::Range(0, 100000000));
    cmd->add_option("--seeds", seeds,
                    "Train every model with N seeds, --first-seed .. --first-seed + N - 1 (mean ± standard deviation)")
        ->check(CLI::Range(1, 100));
    cmd->add_option("--first-seed", first_seed,
                    "First seed (default 0): e.g. --first-seed 1 --seeds 2 trains seeds 1 and 2 only, for an earlier "
                    "seed-0 study, into another --out (its table holds this run's seeds only; to extend one table, "
                    "rerun with --seeds 3 --resume in the same --out)")
        ->check(CLI::Range(0, 1000000));
    cmd->add_option("--threads", train.threads, "Threads (0 = all cores)")->check(CLI::Range(0, 4096));
    cmd->add_flag("--quiet", quiet, "No progress display");
    cmd->add_flag("--resume", resume,
                  "Reuse the result of every model already trained in --out with the same options (each run "
                  "leaves <dir>/result.csv), so an interrupted study continues where it stopped");
  }

  /// What a run's result depends on besides the model and seed (compared by --resume).
  std::string fingerprint(const std::string& label, int seed) const {
    std::string srcs;
    for (const auto& src : data.sources) srcs += src + ";";
    return fmt::format("{} seed={} data={} max_steps={} split={}:{}:{}:{}{} epochs={} patience={} min_steps={} select={}", label,
                       seed, srcs, data.max_steps, data.split, data.split_seed, data.test_fraction,
                       data.valid_fraction, data.tuning_split ? ":tuning" : "", train.epochs, train.patience, train.min_steps, to_string(train.select));
  }

  Dataset load_and_split(Split* s, const std::string& command, std::vector<PathOption> inputs = {}) {
    for (const PathOption& p : data_inputs(data.sources)) inputs.push_back(p);
    check_outputs(inputs, {{"--out", out}});
    claim_output_dir(out, command);
    train.progress = !quiet;
    Dataset d = data.load(!quiet && isatty(fileno(stderr)));
    *s = make_split(d, data.split_options());
    print_split(d, *s);
    if (s->test.empty()) throw Error("the split has no test tasks; raise --test-fraction or give more workloads");
    set_threads(train.threads);
    return d;
  }
};

}  // namespace

Command add_compare_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "compare",
      "Train Mamba and the baseline cost models on one dataset and split; table of top-1, top-5, pairwise accuracy, "
      "parameters, size, training time and inference speed (compare.csv, compare.md, compare.png)");
  auto o = std::make_shared<StudyOptions>();
  o->out = "out/compare";
  auto models = std::make_shared<std::string>("mamba,attention,lstm,mlp,xgboost");
  o->add_to(cmd);
  cmd->add_option("-o,--out", o->out, "Output directory (one sub-directory per model and seed)");
  cmd->add_option("--models", *models, "Comma-separated: mamba, attention, lstm, mlp, xgboost");
  return Command{cmd, [o, models]() {
                   const auto kinds = split_list(*models);
                   if (kinds.empty()) throw Error("--models lists no model; give e.g. mamba,xgboost");
                   for (const auto& k : kinds) {
                     if (k != "xgboost" && std::find(cost_model_kinds().begin(), cost_model_kinds().end(), k) ==
                                               cost_model_kinds().end()) {
                       throw Error("--models: unknown model '" + k + "' (mamba, attention, lstm, mlp, xgboost)");
                     }
                   }
                   Split s;
                   Dataset d = o->load_and_split(&s, "compare");
                   std::vector<Run> runs;
                   for (int seed = o->first_seed; seed < o->first_seed + o->seeds; ++seed) {
                     for (const auto& k : kinds) {
                       const std::string dir = fmt::format("{}/{}-s{}", o->out, k, seed);
                       if (!o->quiet) std::fprintf(stderr, "== %s, seed %d\n", k.c_str(), seed);
                       runs.push_back(run_or_resume(dir, o->fingerprint(k, seed), o->resume, o->quiet, [&] {
                         if (k == "xgboost") return run_xgboost(d, s, seed, o->train.threads, o->train.select, !o->quiet, dir);
                         TrainOptions to = o->train;
                         to.model_kind = parse_model_kind(k);
                         to.seed = static_cast<uint64_t>(seed);
                         return run_neural(d, s, to, k, dir);
                       }));
                       write_outputs(o->out, "compare", runs, "");  // partial results survive an interruption
                     }
                   }
                   write_outputs(o->out, "compare", runs, "compare");
                   std::cout << summary_table(runs) << "results: " << o->out << "/compare.{csv,md}\n";
                   return 0;
                 }};
}

namespace {

// A sweep configuration file:
//   {"base": {"d_model": 128, ...}, "vary": {"d_conv": [2, 4, 6, 8], ...}, "mode": "one-at-a-time" | "grid"}
// base: Mamba hyper-parameters (d_model, n_layers, d_state, d_conv, expand, dt_rank, head_hidden);
// one-at-a-time (the paper's Table 2) changes one parameter of the base at a time; grid takes every
// combination.
struct SweepConfig {
  MambaConfig base;
  std::vector<std::pair<std::string, std::vector<int>>> vary;
  bool grid = false;
};

int* mamba_field(MambaConfig& c, std::string_view name) {
  if (name == "d_model") return &c.d_model;
  if (name == "n_layers") return &c.n_layers;
  if (name == "d_state") return &c.d_state;
  if (name == "d_conv") return &c.d_conv;
  if (name == "expand") return &c.expand;
  if (name == "dt_rank") return &c.dt_rank;
  if (name == "head_hidden") return &c.head_hidden;
  return nullptr;
}

SweepConfig read_sweep_config(const std::string& path) {
  const std::string text = read_file(path);
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.parse(text).get(root)) {
    throw Error(fmt::format("{}: not valid JSON ({})", path, simdjson::error_message(err)));
  }
  SweepConfig c;
  auto int_of = [&](simdjson::dom::element v, const std::string& what) {
    int64_t x = 0;
    if (v.get_int64().get(x) || x < 0 || x > 65536) throw Error(fmt::format("{}: {} must be an integer in [0, 65536]", path, what));
    return static_cast<int>(x);
  };
  simdjson::dom::object obj;
  if (root.get_object().get(obj)) throw Error(path + ": expected a JSON object");
  for (auto [key, value] : obj) {
    if (key == "base") {
      simdjson::dom::object b;
      if (value.get_object().get(b)) throw Error(path + ": \"base\" must be an object");
      for (auto [k, v] : b) {
        int* f = mamba_field(c.base, k);
        if (!f) throw Error(fmt::format("{}: unknown Mamba parameter \"{}\" in base", path, k));
        *f = int_of(v, "base." + std::string(k));
      }
    } else if (key == "vary") {
      simdjson::dom::object b;
      if (value.get_object().get(b)) throw Error(path + ": \"vary\" must be an object of lists");
      for (auto [k, v] : b) {
        MambaConfig probe;
        if (!mamba_field(probe, k)) throw Error(fmt::format("{}: unknown Mamba parameter \"{}\" in vary", path, k));
        simdjson::dom::array a;
        if (v.get_array().get(a)) throw Error(fmt::format("{}: vary.{} must be a list", path, k));
        std::vector<int> values;
        for (auto e : a) values.push_back(int_of(e, "vary." + std::string(k)));
        if (values.empty()) throw Error(fmt::format("{}: vary.{} is empty", path, k));
        c.vary.emplace_back(std::string(k), values);
      }
    } else if (key == "mode") {
      std::string_view m;
      if (value.get_string().get(m) || (m != "one-at-a-time" && m != "grid")) {
        throw Error(path + ": \"mode\" must be \"one-at-a-time\" or \"grid\"");
      }
      c.grid = m == "grid";
    } else {
      throw Error(fmt::format("{}: unknown key \"{}\" (base, vary, mode)", path, key));
    }
  }
  if (c.vary.empty()) throw Error(path + ": \"vary\" lists no parameter");
  return c;
}

std::string config_label(const MambaConfig& c) {
  return fmt::format("d{}-l{}-n{}-k{}-e{}-r{}-h{}", c.d_model, c.n_layers, c.d_state, c.d_conv, c.expand, c.dt_rank,
                     c.head_hidden);
}

}  // namespace

Command add_sweep_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "sweep",
      "Mamba hyper-parameter study (the paper's Table 2): train one model per configuration of a grid file and write "
      "sweep.csv, sweep.md and sweep.png (top-1 against each parameter)");
  auto o = std::make_shared<StudyOptions>();
  o->out = "out/sweep";
  auto grid = std::make_shared<std::string>();
  o->add_to(cmd);
  cmd->add_option("-o,--out", o->out, "Output directory (one sub-directory per configuration and seed)");
  cmd->add_option("--grid", *grid,
                  "Sweep file (JSON): {\"base\": {...}, \"vary\": {\"d_conv\": [2,4,6,8], ...}, \"mode\": "
                  "\"one-at-a-time\"|\"grid\"}; see configs/sweep-table2.json")
      ->required();
  return Command{cmd, [o, grid]() {
                   const SweepConfig sc = read_sweep_config(*grid);
                   // The configurations, each with the parameter it varies ("" in grid mode).
                   std::vector<std::pair<std::string, MambaConfig>> configs;
                   if (sc.grid) {
                     std::vector<MambaConfig> all = {sc.base};
                     for (const auto& [name, values] : sc.vary) {
                       std::vector<MambaConfig> next;
                       for (const auto& c : all) {
                         for (int v : values) {
                           MambaConfig n = c;
                           *mamba_field(n, name) = v;
                           next.push_back(n);
                         }
                       }
                       all = std::move(next);
                     }
                     for (const auto& c : all) configs.emplace_back("grid", c);
                   } else {
                     for (const auto& [name, values] : sc.vary) {
                       for (int v : values) {
                         MambaConfig n = sc.base;
                         *mamba_field(n, name) = v;
                         configs.emplace_back(name, n);
                       }
                     }
                   }
                   for (auto& [_, c] : configs) {
                     c.n_features = kStepFeatureDim;
                     c.validate("sweep configuration " + config_label(c));
                   }
                   Split s;
                   Dataset d = o->load_and_split(&s, "sweep", {{"--grid", *grid}});
                   std::map<std::pair<std::string, int>, Run> done;  // one training per distinct config and seed
                   std::string csv = "parameter,value,d_model,n_layers,d_state,d_conv,expand,is_base," +
                                     csv_header() + "\n";
                   std::vector<Run> runs;
                   const std::string base_label = config_label([&] {
                     MambaConfig b = sc.base;
                     b.n_features = kStepFeatureDim;
                     return b;
                   }());
                   for (int seed = o->first_seed; seed < o->first_seed + o->seeds; ++seed) {
                     for (size_t i = 0; i < configs.size(); ++i) {
                       const auto& [param, c] = configs[i];
                       const std::string label = config_label(c);
                       auto key = std::make_pair(label, seed);
                       if (!done.count(key)) {
                         if (!o->quiet) {
                           std::fprintf(stderr, "== %s (%zu/%zu), seed %d\n", label.c_str(), i + 1, configs.size(), seed);
                         }
                         TrainOptions to = o->train;
                         to.model = c;
                         to.seed = static_cast<uint64_t>(seed);
                         const std::string dir = fmt::format("{}/{}-s{}", o->out, label, seed);
                         done[key] = run_or_resume(dir, o->fingerprint(label, seed), o->resume, o->quiet,
                                                   [&] { return run_neural(d, s, to, label, dir); });
                         runs.push_back(done[key]);
                       }
                       const int value = param == "grid" ? 0 : *mamba_field(const_cast<MambaConfig&>(c), param);
                       csv += fmt::format("{},{},{},{},{},{},{},{},{}\n", param, value, c.d_model, c.n_layers, c.d_state,
                                          c.d_conv, c.expand, label == base_label ? 1 : 0, csv_row(done[key]));
                       write_file_atomic(o->out + "/sweep.csv", csv);
                     }
                   }
                   write_file_atomic(o->out + "/sweep.md", summary_table(runs));
                   plot_csv("sweep", o->out + "/sweep.csv", o->out + "/sweep.png");
                   std::cout << summary_table(runs) << "results: " << o->out << "/sweep.{csv,md,png}\n";
                   return 0;
                 }};
}

}  // namespace tclm::cli
