// study/results.cpp: see results.h.
#include "study/results.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <tuple>

#include "tclm/error.h"

namespace tclm::study {

bool ResultKey::operator<(const ResultKey& o) const {
  return std::tie(method, phase, platform, seed) < std::tie(o.method, o.phase, o.platform, o.seed);
}

SeedSummary summarize(const std::map<int, double>& by_seed) {
  SeedSummary s;
  s.n = by_seed.size();
  if (s.n == 0) return s;
  for (const auto& [seed, x] : by_seed) s.mean += x;
  s.mean /= static_cast<double>(s.n);
  if (s.n > 1) {
    double ss = 0;
    for (const auto& [seed, x] : by_seed) ss += (x - s.mean) * (x - s.mean);
    s.std = std::sqrt(ss / static_cast<double>(s.n - 1));
  }
  return s;
}

void ResultsTable::add(ResultRow row) {
  const ResultKey& k = row.key;
  if (index_.count(k)) {
    throw Error(fmt::format("results: method '{}' phase '{}' platform '{}' seed {} added twice", k.method, k.phase,
                            k.platform, k.seed));
  }
  for (const auto& [name, v] : row.figures) {
    if (!std::isfinite(v)) {
      throw Error(fmt::format("results: method '{}' phase '{}' platform '{}' seed {}: figure '{}' is not finite",
                              k.method, k.phase, k.platform, k.seed, name));
    }
  }
  index_[k] = rows_.size();
  rows_.push_back(std::move(row));
}

std::string ResultsTable::last_phase(const std::string& method, const std::string& platform) const {
  const ResultRow* last = nullptr;
  for (const auto& r : rows_) {
    if (r.key.method == method && r.key.platform == platform && (!last || r.phase_index > last->phase_index)) last = &r;
  }
  return last ? last->key.phase : std::string();
}

std::map<int, double> ResultsTable::by_seed(const std::string& method, const std::string& phase,
                                            const std::string& platform, const std::string& figure) const {
  std::map<int, double> v;
  for (const auto& r : rows_) {
    if (r.key.method != method || r.key.phase != phase || r.key.platform != platform) continue;
    const auto it = r.figures.find(figure);
    if (it != r.figures.end()) v[r.key.seed] = it->second;
  }
  return v;
}

PairedDifference ResultsTable::paired(const std::string& method, const std::string& method_phase,
                                      const std::string& reference, const std::string& reference_phase,
                                      const std::string& platform, const std::string& figure) const {
  return paired_by_seed(by_seed(method, method_phase, platform, figure),
                        by_seed(reference, reference_phase, platform, figure));
}

namespace {
template <typename Get>
std::vector<std::string> first_seen(const std::vector<ResultRow>& rows, Get get) {
  std::vector<std::string> out;
  for (const auto& r : rows) {
    const std::string& v = get(r);
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  return out;
}
}  // namespace

std::vector<std::string> ResultsTable::methods() const {
  return first_seen(rows_, [](const ResultRow& r) -> const std::string& { return r.key.method; });
}
std::vector<std::string> ResultsTable::phases() const {
  return first_seen(rows_, [](const ResultRow& r) -> const std::string& { return r.key.phase; });
}

std::string format_summary(const SeedSummary& s, int digits) {
  if (s.n == 0) return "-";
  if (s.n == 1) return fmt::format("{:.{}f}", s.mean, digits);
  return fmt::format("{:.{}f} ± {:.{}f}", s.mean, digits, s.std, digits);
}

std::string format_paired_cell(const PairedDifference& d) {
  if (d.diffs.empty()) return "-";
  if (d.diffs.size() == 1) {
    const std::string v = fmt::format("{:+.3f}", d.mean);
    return (v == "-0.000" ? std::string("+0.000") : v) + " (1 seed: no paired verdict)";
  }
  return format_paired(d) + " " + d.verdict();
}

const char* const kPairedLegend =
    "paired by seed: mean ± std of the per-seed differences (each seed's in brackets); ahead / behind when the mean "
    "is beyond one std of the differences (and at least 0.0005), else level; a verdict needs 2 seeds or more";

}  // namespace tclm::study
