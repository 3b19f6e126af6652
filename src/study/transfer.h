// study/transfer.h: the transfer study (tclm transfer): the whole TCL pipeline (TCL-SPEC §7) next to its
// baselines and ablations. Per seed: RDU-sample the target's budget (the same picks for every method),
// then for each method
//   tcl, tcl-no-phi (Phi = 1): learn the sources in order with continual
//       knowledge distillation, then the target's budget; the knowledge base is evaluated on every
//       platform after each KD phase, the active column ("<method>:ac") after each CL phase;
//   target-only: a model of the target's budget alone;
//   finetune: a model of all sources ("source-model"), trained on from there on the target's budget;
//   mtl: one trunk, one head per platform, all sources and the target's budget together;
//   full: a model of all the target's training data.
// Every evaluation is on held-out test tasks of one platform.
// With N processes (TransferStudyOptions::train.dist; the data a shard) every process runs the whole
// study: the sampler, every training phase and every evaluation are data-parallel, and rank 0 alone
// writes (docs/distributed.md).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "distill/ckd.h"
#include "study/results.h"
#include "tclm/dataset.h"
#include "tclm/sample.h"
#include "train/active_sampling.h"
#include "train/trainer.h"

namespace tclm::study {

/// Every method run_transfer_study knows, in the order of the docs.
const std::vector<std::string>& transfer_methods();

struct TransferStudyOptions {
  std::vector<std::string> sources;  // in learning order
  std::string target;
  std::vector<std::string> methods;  // of transfer_methods()
  CkdOptions ckd;                    // the tcl methods (min_steps, select, seed and progress set per run)
  TrainOptions train;                // the baselines (seed and progress set per run); min_steps and select
                                     // are also the CKD phases' and the sampler's
  ActiveSamplingOptions sampling;    // the target's budget (method, seed, fraction, threads set per run)
  SampleMethod sampler = SampleMethod::kRdu;
  double budget = 0.1;               // fraction of every target training/validation task measured
  double source_fraction = 1.0;      // random fraction of the programs of the sources' training and
                                     // validation tasks kept (a cheaper study; test tasks stay whole)
  // The target's candidate pool (a Dataset loaded with LoadOptions::candidates, its platform named as
  // the target, sharded like the data): the tcl methods' KD phase of the target distils on its programs
  // of the target's training workloads. Null: on the programs of the target's training tasks in the
  // data that the budget left unmeasured as well (none with --budget 1).
  std::shared_ptr<const Dataset> candidates;
  int seeds = 1, first_seed = 0;     // seeds first_seed .. first_seed + seeds - 1
  std::string out;                   // directory: phases.csv (a row per evaluation, appended as it ends),
                                     // test_tasks.csv (its per-task rows) and, with method tcl, kb.tclm
                                     // (the first seed's knowledge base)
  bool progress = true;              // progress lines on stderr
};

/// The phases.csv columns, one row per evaluation (ResultRow figures of the same names).
extern const char* const kPhasesCsvHeader;

struct TransferStudyResult {
  ResultsTable table;       // method x phase ("learn <platform>" for tcl, "final" for the baselines) x platform x seed
  nlohmann::ordered_json ckd_phases = nlohmann::ordered_json::array();  // {"method", "seed", "phase": CkdPhaseLog} per CKD phase
  size_t target_measured = 0, target_pool = 0;         // the budget's programs (of the last seed), of so many
  std::string kb_path;                                 // kb.tclm when written, else ""
  bool evaluated = true;  // false without test tasks (--test-fraction 0): no table, no phases.csv or test_tasks.csv
};

/// Runs the study on `data` (the platforms of sources and target; moved in, as --source-fraction
/// subsets it) with `split`. Throws tclm::Error on an unknown method or platform, a target among the
/// sources, a platform without training tasks, a platform without test tasks when the split has
/// some, or a baseline method when it has none (then only the knowledge base is learned).
TransferStudyResult run_transfer_study(Dataset data, const Split& split, const TransferStudyOptions& options);

/// transfer.md: every method's target top-1 / task mean / top-5 and the sources' top-1 after their own
/// phase and at the end (mean ± std over seeds), each tcl method minus every other method paired by
/// seed (a verdict with 2 seeds or more), the random ranking's top-1.
std::string transfer_markdown(const TransferStudyResult& result, const TransferStudyOptions& options);

/// transfer.json.
nlohmann::ordered_json transfer_json(const TransferStudyResult& result, const TransferStudyOptions& options);

}  // namespace tclm::study
