#include <fmt/format.h>
#include <map>
#include <nlohmann/json.hpp>

#include "tclm/evaluation.h"

namespace tclm {

nlohmann::json RankingReport::to_json_value() const {
  auto topk = [](const TopKScore& s) {
    return nlohmann::json{{"pooled", s.pooled}, {"group_mean", s.group_mean}, {"task_mean", s.task_mean}};
  };
  return {{"platform", platform},       {"tasks", tasks},
          {"programs", programs},       {"top1", topk(top1)},
          {"top5", topk(top5)},         {"random_top1", topk(random_top1)},
          {"random_top5", topk(random_top5)}, {"pairwise_accuracy", pairwise}};
}

std::string RankingReport::to_json() const { return to_json_value().dump(); }

std::vector<RankingReport> evaluate_rankings(const Dataset& data, const std::vector<uint32_t>& tasks,
                                             const ProgramScorer& scorer, std::vector<TaskResult>* per_task) {
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
    if (per_task != nullptr) {
      TaskResult tr;
      tr.platform = data.platforms()[task.platform];
      tr.workload_key = task.workload_key;
      tr.group = r.group;
      tr.programs = static_cast<int64_t>(r.latencies.size());
      tr.best = task.min_cost;
      tr.top1 = top_k_score({r}, 1).pooled;
      tr.top5 = top_k_score({r}, 5).pooled;
      tr.random_top1 = expected_random_top_k_score({r}, 1).pooled;
      per_task->push_back(std::move(tr));
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

std::string per_task_csv_header() { return "platform,workload_key,group,programs,best_sec,top1,top5,random_top1"; }

std::vector<std::string> per_task_csv_rows(const std::vector<TaskResult>& results, const std::string& prefix) {
  auto q = [](const std::string& s) {
    std::string o = "\"";
    for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
    return o + "\"";
  };
  std::vector<std::string> rows;
  rows.reserve(results.size());
  for (const auto& r : results) {
    rows.push_back(fmt::format("{}{},{},{},{},{:.6g},{:.6f},{:.6f},{:.6f}", prefix, q(r.platform), q(r.workload_key),
                               q(r.group), r.programs, r.best, r.top1, r.top5, r.random_top1));
  }
  return rows;
}

std::string per_task_csv(const std::vector<TaskResult>& results) {
  std::string s = per_task_csv_header() + "\n";
  for (const auto& row : per_task_csv_rows(results, "")) s += row + "\n";
  return s;
}

std::string format_reports(const std::vector<RankingReport>& reports) {
  std::string s = fmt::format("{:<24} {:>5} {:>8} {:>7} {:>7} {:>7} {:>7} {:>8} {:>8} {:>8}\n", "platform", "tasks",
                              "programs", "top-1", "top-5", "rand@1", "rand@5", "task@1", "rtask@1", "pairwise");
  for (const auto& r : reports) {
    s += fmt::format("{:<24} {:>5} {:>8} {:>7.4f} {:>7.4f} {:>7.4f} {:>7.4f} {:>8.4f} {:>8.4f} {:>8.4f}\n",
                     r.platform.substr(0, 24), r.tasks, r.programs, r.top1.pooled, r.top5.pooled,
                     r.random_top1.pooled, r.random_top5.pooled, r.top1.task_mean, r.random_top1.task_mean,
                     r.pairwise);
  }
  s += "top-k: pooled over tasks (TLP's definition); rand@k: exact expectation of a random ranking of the same\n"
       "tasks; task@1 / rtask@1: mean over tasks of best/lat_1 for the model / random; pairwise: within tasks\n";
  return s;
}

}  // namespace tclm
