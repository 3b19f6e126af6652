// src/eval/selection.cpp: the model-selection rules (tclm/selection.h).
#include "tclm/selection.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/enum_names.h"
#include "tclm/error.h"

namespace tclm {

const std::vector<std::string>& selection_rules() {
  static const std::vector<std::string> rules = {"pairwise", "top1", "top5", "last"};
  return rules;
}

SelectRule parse_select_rule(const std::string& name, const std::string& what) {
  return enum_from_name<SelectRule>(selection_rules(), name, "model selection", what);
}

const std::string& to_string(SelectRule rule) { return enum_name(selection_rules(), rule); }

std::pair<double, double> selection_key(SelectRule rule, const EpochLog& e) {
  switch (rule) {
    case SelectRule::kPairwise: return {e.valid_pairwise, e.valid_top1};
    case SelectRule::kTop1: return {e.valid_top1, e.valid_pairwise};
    case SelectRule::kTop5: return {e.valid_top5, e.valid_pairwise};
    case SelectRule::kLast: return {static_cast<double>(e.epoch), 0.0};
  }
  throw InternalError(fmt::format("bad SelectRule value {}", static_cast<int>(rule)));
}

bool better_epoch(SelectRule rule, const EpochLog& now, const EpochLog& kept) {
  const auto a = selection_key(rule, now), b = selection_key(rule, kept);
  return a.first > b.first + 1e-9 || (a.first > b.first - 1e-9 && a.second > b.second + 1e-6);
}

const char* selection_figure(SelectRule rule) {
  switch (rule) {
    case SelectRule::kTop1: return "top-1";
    case SelectRule::kTop5: return "top-5";
    case SelectRule::kLast: return "epoch";
    case SelectRule::kPairwise: break;
  }
  return "pairwise accuracy";
}

}  // namespace tclm
