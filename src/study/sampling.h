// study/sampling.h: the sampler study (tclm study-sampling; the paper's Fig. 7 / Table 4): for every
// sampler, sampling rate and seed, pick that fraction of every training and validation task's programs
// (labels hidden until picked), train the cost model on the picks, evaluate it on the held-out test
// tasks. Resumable: each finished run is a row of sampling.csv (a CsvJournal), with its per-task rows in
// test_tasks.csv and, with curves, its per-epoch rows in curves.csv.
#pragma once

#include <string>
#include <vector>

#include "study/results.h"
#include "tclm/dataset.h"
#include "tclm/evaluation.h"
#include "tclm/sample.h"
#include "train/active_sampling.h"
#include "train/trainer.h"

namespace tclm::study {

struct SamplingStudyOptions {
  std::vector<SampleMethod> samplers;
  std::vector<double> rates;       // fractions in (0, 1]; 1 = all data (one run per seed, sampler "all")
  int seeds = 3;                   // seeds first_seed .. first_seed + seeds - 1
  int first_seed = 0;
  TrainOptions train;              // the final models (seed and progress set per run)
  ActiveSamplingOptions sampling;  // method, seed, fraction, threads set per run
  std::string out;                 // directory of sampling.csv, test_tasks.csv, curves.csv, study_options.txt
  bool resume = false;             // keep the runs already in out/sampling.csv, run the others
  bool curves = false;             // evaluate the test tasks after every epoch (curves.csv)
  bool progress = true;
  /// Every option that changes a run's result, one "key=value" line each (study_options.txt); with
  /// resume, the file in `out` must hold the same (else tclm::Error naming what differs).
  std::string options_text;
};

/// One run: a sampler at a rate with a seed, and its final model's figures.
struct SamplingRun {
  std::string sampler;
  double rate = 0;
  int seed = 0;
  size_t measured = 0, pool = 0;
  RankingReport test;
  double select_seconds = 0, model_seconds = 0, train_seconds = 0;
  int epochs = 0, best_epoch = 0;  // of the final model: epochs run, the one kept (TrainOptions::select)
  double best_valid_top1 = 0;      // its validation top-1 (task mean)
};

/// The sampling.csv columns.
extern const char* const kSamplingCsvHeader;

struct SamplingStudyResult {
  std::vector<SamplingRun> runs;  // kept ones first, then those run now
  size_t kept = 0;                // runs read back from sampling.csv (resume)
  RankingReport random;           // the test tasks' report of a constant scorer: its random_* fields
  /// method = sampler, phase = rate (rate_phase), platform "", figures top1, top1_task_mean, top5 (test).
  ResultsTable table;
};

/// The phase name of a rate in SamplingStudyResult::table ("0.5").
std::string rate_phase(double rate);

/// Runs (or resumes) the study. Throws tclm::Error when the split has no test tasks, the lists are
/// empty, or (resume) a file in `out` is of other options, data or split, or has a malformed row
/// (naming the file and line).
SamplingStudyResult run_sampling_study(const Dataset& data, const Split& split, const SamplingStudyOptions& options);

/// sampling.md: mean ± std over seeds of top-1 (pooled), top-1 task mean and top-5 per sampler and rate;
/// each sampler minus random and minus all data, paired by seed (a verdict with 2 seeds or more).
std::string sampling_markdown(const SamplingStudyResult& result);

}  // namespace tclm::study
