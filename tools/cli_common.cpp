// tools/cli_common.cpp: helpers shared by the tclm commands (tools/cli_common.h).
#include "cli_common.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <nlohmann/json.hpp>
#include <simdjson.h>


namespace tclm::cli {

void add_select_option(CLI::App* cmd, SelectRule* select, const std::string& stopping) {
  add_enum_option(cmd, "--select", select, selection_rules(), parse_select_rule,
                  "Which validation figure picks the kept epoch (" + stopping +
                      "): pairwise (pairwise accuracy within tasks, ties by top-1), top1 / top5 (top-k task mean, ties "
                      "by pairwise), last (no early stopping). docs/design.md, 'Model selection'");
}

int model_max_steps(const std::string& metadata_json, int fallback) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  int64_t max_steps = 0;
  if (parser.parse(metadata_json).get(doc) != simdjson::SUCCESS ||
      doc["extra"]["max_steps"].get(max_steps) != simdjson::SUCCESS || max_steps < 1 || max_steps > 1 << 20) {
    return fallback;
  }
  return static_cast<int>(max_steps);
}

std::vector<std::string> model_data_sources(const std::string& metadata_json) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array data;
  std::vector<std::string> out;
  if (parser.parse(metadata_json).get(doc) != simdjson::SUCCESS ||
      doc["extra"]["data"].get(data) != simdjson::SUCCESS) {
    return out;
  }
  for (simdjson::dom::element e : data) {
    std::string_view s;
    if (e.get(s) != simdjson::SUCCESS) return {};
    if (s.starts_with('=')) s.remove_prefix(1);  // a source without a platform name, as older models wrote it
    out.emplace_back(s);
  }
  return out;
}

std::string apply_model_split(const std::string& metadata_json, const CLI::App& cmd, DataOptions* d) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(metadata_json).get(doc) != simdjson::SUCCESS) return "";
  simdjson::dom::element extra;
  if (doc["extra"].get(extra) != simdjson::SUCCESS) return "";
  std::string_view split;
  uint64_t seed;
  double test, valid;
  int64_t max_steps;
  if (extra["split"].get(split) || extra["split_seed"].get(seed) || extra["test_fraction"].get(test) ||
      extra["valid_fraction"].get(valid)) {
    return "";
  }
  if (cmd.count("--split") == 0) d->split = std::string(split);
  if (cmd.count("--split-seed") == 0) d->split_seed = seed;
  if (cmd.count("--test-fraction") == 0) d->test_fraction = test;
  if (cmd.count("--valid-fraction") == 0) d->valid_fraction = valid;
  bool tuning = false;
  if (extra["tuning_split"].get(tuning) != simdjson::SUCCESS) tuning = false;  // models before the option
  if (cmd.count("--tuning-split") + cmd.count("--no-tuning-split") == 0) d->tuning_split = tuning;
  if (cmd.count("--max-steps") == 0 && extra["max_steps"].get(max_steps) == simdjson::SUCCESS) {
    d->max_steps = static_cast<int>(max_steps);
  }
  return fmt::format("split {} seed {} test {} valid {}{}", d->split, d->split_seed, d->test_fraction, d->valid_fraction,
                     d->tuning_split ? " tuning split" : "");
}

std::string info_text(const DataSummary& d) {
  std::string s = fmt::format("{:<40} {:>9} {:>9} {:>7} {:>8} {:>9} {:>9}\n", "platform", "records", "programs",
                              "tasks", "errors", "bad cost", "truncated");
  for (size_t i = 0; i < d.platforms.size(); ++i) {
    const auto& p = d.platform_stats[i];
    s += fmt::format("{:<40} {:>9} {:>9} {:>7} {:>8} {:>9} {:>9}\n", d.platforms[i].substr(0, 40), p.records,
                     p.programs, p.tasks, p.errors, p.bad_costs, p.truncated);
  }
  s += "errors: error_no != 0 (kept out); bad cost: error_no 0 but a cost below 1e-9 s (kMinPlausibleCost),\n"
       "non-finite or >= 1e9 (kept out);\n"
       "truncated: programs longer than --max-steps (first steps kept)\n\n";
  s += d.read_stats.report();
  return s;
}

void note_left_out(const std::vector<std::string>& left_out) {
  if (left_out.empty()) return;
  std::fprintf(stderr, "note: %zu record files or directories left out (each file is read once, by its real path):\n",
               left_out.size());
  for (const auto& e : left_out) std::fprintf(stderr, "  %s\n", e.c_str());
}

std::string info_json(const DataSummary& d) {
  nlohmann::ordered_json platforms = nlohmann::ordered_json::array();
  for (size_t i = 0; i < d.platforms.size(); ++i) {
    const auto& p = d.platform_stats[i];
    nlohmann::ordered_json codes = nlohmann::ordered_json::object();
    for (const auto& [c, n] : p.errors_by_code) codes[std::to_string(c)] = n;
    platforms.push_back({{"name", d.platforms[i]},
                         {"records", p.records},
                         {"programs", p.programs},
                         {"tasks", p.tasks},
                         {"errors", p.errors},
                         {"errors_by_code", codes},
                         {"bad_costs", p.bad_costs},
                         {"truncated", p.truncated}});
  }
  const auto& r = d.read_stats;
  const nlohmann::ordered_json j = {{"platforms", platforms},
                            {"files", r.files},
                            {"lines", r.lines},
                            {"records", r.records},
                            {"skipped_lines", r.skipped},
                            {"skipped_by_reason", r.skipped_by_reason},
                            {"skipped_examples", r.examples},
                            {"left_out", r.left_out}};
  return dump_json(j);
}

nlohmann::json reports_json_value(const std::vector<RankingReport>& reports) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& r : reports) a.push_back(r.to_json_value());
  return a;
}

std::string reports_json(const std::vector<RankingReport>& reports) { return dump_json(reports_json_value(reports)); }

// error_handler::replace: a record's bytes are UTF-8-validated on reading, but a path or name from the
// command line may not be; JSON output stays valid either way.
std::string dump_json(const nlohmann::json& j) {
  return j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string dump_json(const nlohmann::ordered_json& j) {
  return j.dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

void print_split(const Dataset& d, const Split& s) {
  std::fprintf(stderr, "split: %zu train / %zu valid / %zu test tasks (%lld tasks with < 2 programs left out)\n",
               s.train.size(), s.valid.size(), s.test.size(), static_cast<long long>(s.too_small));
  if (s.held_out > 0) {
    std::fprintf(stderr, "tuning split: the %lld tasks of the real test part are left out; 'test' below is a part of "
                         "the training side\n", static_cast<long long>(s.held_out));
  }
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t b = 0;
  while (b <= s.size()) {
    size_t e = s.find(',', b);
    if (e == std::string::npos) e = s.size();
    if (e > b) out.push_back(s.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

void ensure_output_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    throw Error("--out '" + dir + "' cannot be used as an output directory" + (ec ? ": " + ec.message() : ""));
  }
}

void claim_output_dir(const std::string& dir, const std::string& command) {
  ensure_output_dir(dir);
  const std::string lock = (std::filesystem::path(dir) / ".lock").string();
  const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw Error(fmt::format("--out '{}': cannot create the lock file {} ({}); check the directory's permissions",
                            dir, lock, std::strerror(errno)));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    std::string holder(256, '\0');
    const ssize_t n = ::pread(fd, holder.data(), holder.size(), 0);
    holder.resize(n > 0 ? static_cast<size_t>(n) : 0);
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\0')) holder.pop_back();
    ::close(fd);
    if (e == EWOULDBLOCK) {
      throw Error(fmt::format("--out '{}' is in use by another tclm run{}; wait for it to finish or choose another "
                              "--out", dir, holder.empty() ? "" : " (" + holder + ")"));
    }
    throw Error(fmt::format("--out '{}': cannot lock {} ({})", dir, lock, std::strerror(e)));
  }
  // Who holds it, for the message of a second run. The descriptor stays open: the lock lasts until exit.
  const std::string who = fmt::format("pid {}, tclm {}\n", ::getpid(), command);
  if (::ftruncate(fd, 0) == 0 && ::pwrite(fd, who.data(), who.size(), 0) < 0) {
    // only the message of a second run would lack the holder
  }
}

namespace {
/// A path that can be the same file as another: it exists and is a regular file or a directory.
bool comparable(const std::string& path) {
  if (path.empty() || path == "-") return false;
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  return !ec && (std::filesystem::is_regular_file(st) || std::filesystem::is_directory(st));
}
}  // namespace

void check_outputs(const std::vector<PathOption>& inputs, const std::vector<PathOption>& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const PathOption& out = outputs[i];
    if (!comparable(out.path)) continue;
    auto same = [&](const PathOption& other) {
      std::error_code ec;
      return comparable(other.path) && std::filesystem::equivalent(out.path, other.path, ec) && !ec;
    };
    for (const PathOption& in : inputs) {
      if (same(in)) {
        throw Error(fmt::format("{} '{}' is the same file as the input {} '{}'; writing it would destroy the input: "
                                "choose another {}", out.option, out.path, in.option, in.path, out.option));
      }
    }
    for (size_t j = 0; j < i; ++j) {
      if (same(outputs[j])) {
        throw Error(fmt::format("{} '{}' and {} '{}' are the same file; one output would replace the other: give "
                                "them different paths", outputs[j].option, outputs[j].path, out.option, out.path));
      }
    }
  }
}

std::vector<PathOption> data_inputs(const std::vector<std::string>& sources) {
  std::vector<PathOption> out;
  std::vector<std::string> paths;
  for (const auto& s : sources) {
    paths.push_back(DataSource::parse(s).path);
    out.push_back(PathOption{"--data", paths.back()});
  }
  std::error_code ec;
  // The files below a directory too (an output inside it would be read as records next time, and
  // replaced this time): listing them is cheap next to reading them.
  if (std::none_of(paths.begin(), paths.end(), [&](const auto& p) { return std::filesystem::exists(p, ec); })) return out;
  try {
    for (auto& [source, f] : collect_record_files(paths).files) out.push_back(PathOption{"--data", std::move(f)});
  } catch (const Error&) {
    // a missing or unreadable source: loading the data reports it
  }
  return out;
}

namespace {

// Every float option: strtod accepts "nan", "inf" and "1e999" (= inf) and CLI11's range checks
// compare with < and >, which NaN passes; this validator refuses them all.
const CLI::Validator kFinite(
    [](std::string& v) {
      const char* s = v.c_str();
      char* end = nullptr;
      errno = 0;
      const double x = std::strtod(s, &end);
      if (end == s || *end != '\0') return std::string();  // not a number: CLI11's conversion says so
      if (!std::isfinite(x) || (errno == ERANGE && std::fabs(x) > 1)) {
        return "must be a finite number (got '" + v + "')";
      }
      return std::string();
    },
    "", "FINITE");

CLI::Validator threads_cap() {
  return CLI::Validator(
      [](std::string& v) {
        char* end = nullptr;
        const long n = std::strtol(v.c_str(), &end, 10);
        if (end == v.c_str() || *end != '\0') return std::string();
        const long cores = std::max(1u, std::thread::hardware_concurrency());
        const long cap = kThreadsPerCore * cores;
        if (n > cap) {
          std::fprintf(stderr, "note: --threads %ld is more than %d x the %ld cores of this machine; using %ld\n", n,
                       kThreadsPerCore, cores, cap);
          v = std::to_string(cap);
        }
        return std::string();
      },
      "", "THREADS_CAP");
}

void harden(CLI::App* app) {
  for (CLI::Option* opt : app->get_options()) {
    if (opt->get_type_name().rfind("FLOAT", 0) == 0) opt->check(kFinite);
    if (opt->check_lname("threads")) opt->transform(threads_cap());
  }
  for (CLI::App* sub : app->get_subcommands({})) harden(sub);
}

}  // namespace

void harden_options(CLI::App& app) { harden(&app); }

}  // namespace tclm::cli
