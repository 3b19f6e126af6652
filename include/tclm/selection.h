// tclm/selection.h: the model-selection rules, which validation figure picks the kept epoch (or
// XGBoost's kept round count) and stops training early. Shared by the trainer, XGBoost and the
// continual distillation; libtorch-free. docs/design.md ("Model selection") has the study behind the
// default.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace tclm {

/// The validation figures of one epoch (or one evaluation of XGBoost's rounds).
struct EpochLog {
  int epoch = 0;
  double train_loss = 0;
  double valid_top1 = 0;  // task_mean
  double valid_top5 = 0;  // task_mean
  double valid_pairwise = 0;
  double lr = 0;
  double seconds = 0;
  double samples_per_second = 0;
  double comm_seconds = 0;  // data-parallel training: seconds of the epoch spent in all-reduces (transfer)
  double wait_seconds = 0;  // ... and waiting for the slowest process before each gradient all-reduce
};

/// kPairwise: validation pairwise accuracy, ties by top-1 (the default); kTop1 / kTop5: validation
/// top-k task mean, ties by pairwise accuracy; kLast: the last epoch (no early stopping).
enum class SelectRule { kPairwise, kTop1, kTop5, kLast };

/// The rules' names in files and on the command line, in the order of SelectRule:
/// "pairwise", "top1", "top5", "last".
const std::vector<std::string>& selection_rules();
/// "pairwise" -> SelectRule::kPairwise, ...; throws tclm::Error naming `what` (e.g. "--select") and
/// the rules for another name.
SelectRule parse_select_rule(const std::string& name, const std::string& what = "--select");
const std::string& to_string(SelectRule rule);

/// The key an epoch's log entry is compared by under `rule` (higher is better; the second value
/// breaks ties).
std::pair<double, double> selection_key(SelectRule rule, const EpochLog& e);

/// Whether epoch `now` replaces the kept epoch under `rule`: a higher key by more than 1e-9, or an
/// equal one (within 1e-9) with a tie-breaker higher by more than 1e-6.
bool better_epoch(SelectRule rule, const EpochLog& now, const EpochLog& kept);

/// The figure a rule selects by, for messages ("pairwise accuracy", "top-1", ...).
const char* selection_figure(SelectRule rule);

}  // namespace tclm
