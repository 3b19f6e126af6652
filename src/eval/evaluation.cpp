#include <fmt/format.h>
#include <map>

#include "tclm/evaluation.h"

namespace tclm {

std::string RankingReport::to_json() const {
  auto topk = [](const TopKScore& s) {
    return fmt::format("{{\"pooled\": {:.6f}, \"group_mean\": {:.6f}}}", s.pooled, s.group_mean);
  };
  return fmt::format(
      "{{\"platform\": \"{}\", \"tasks\": {}, \"programs\": {}, \"top1\": {}, \"top5\": {}, "
      "\"random_top1\": {}, \"random_top5\": {}, \"pairwise_accuracy\": {:.6f}}}",
      platform, tasks, programs, topk(top1), topk(top5), topk(random_top1), topk(random_top5), pairwise);
}

std::vector<RankingReport> evaluate_rankings(const Dataset& data, const std::vector<uint32_t>& tasks,
                                             const ProgramScorer& scorer) {
  // Score all programs of the given tasks in one call (the scorer batches internally).
  std::vector<uint32_t> programs;
  for (uint32_t t : tasks) {
    const auto& p = data.tasks()[t].programs;
    programs.insert(programs.end(), p.begin(), p.end());
  }
  std::vector<float> scores = programs.empty() ? std::vector<float>() : scorer(programs);
  std::map<int, std::vector<TaskRanking>> by_platform;
  std::vector<TaskRanking> all;
  size_t pos = 0;
  for (uint32_t t : tasks) {
    const Task& task = data.tasks()[t];
    TaskRanking r;
    r.group = task.groups.empty() ? "" : data.groups()[task.groups[0]];
    for (uint32_t p : task.programs) {
      r.latencies.push_back(data.cost(p));
      r.scores.push_back(scores[pos++]);
    }
    by_platform[task.platform].push_back(r);
    all.push_back(std::move(r));
  }
  auto make = [](const std::string& name, const std::vector<TaskRanking>& rs) {
    RankingReport rep;
    rep.platform = name;
    rep.tasks = static_cast<int>(rs.size());
    for (const auto& r : rs) rep.programs += static_cast<int64_t>(r.latencies.size());
    rep.top1 = top_k_score(rs, 1);
    rep.top5 = top_k_score(rs, 5);
    rep.random_top1 = expected_random_top_k_score(rs, 1);
    rep.random_top5 = expected_random_top_k_score(rs, 5);
    rep.pairwise = pairwise_accuracy(rs);
    return rep;
  };
  std::vector<RankingReport> out;
  for (const auto& [platform, rs] : by_platform) out.push_back(make(data.platforms()[platform], rs));
  if (by_platform.size() > 1) out.push_back(make("all", all));
  return out;
}

std::string format_reports(const std::vector<RankingReport>& reports) {
  std::string s = fmt::format("{:<28} {:>6} {:>9} {:>7} {:>7} {:>8} {:>8} {:>9}\n", "platform", "tasks",
                              "programs", "top-1", "top-5", "rand@1", "rand@5", "pairwise");
  for (const auto& r : reports) {
    s += fmt::format("{:<28} {:>6} {:>9} {:>7.4f} {:>7.4f} {:>8.4f} {:>8.4f} {:>9.4f}\n", r.platform.substr(0, 28),
                     r.tasks, r.programs, r.top1.pooled, r.top5.pooled, r.random_top1.pooled,
                     r.random_top5.pooled, r.pairwise);
  }
  s += "top-k: pooled over tasks (TLP); rand@k: exact expectation of a random ranking of the same tasks\n";
  return s;
}

}  // namespace tclm
