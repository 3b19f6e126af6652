// record/record_reader.cpp: Ansor measure-record lines -> MeasureRecord (simdjson On-Demand).
//
// The parser walks each document once, in order, with error codes (no exceptions), so that a
// malformed line costs one failed parse and a reason string, never an abort.
#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <tuple>
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <simdjson.h>

#include "common/line_reader.h"
#include "record/trace_reader.h"
#include "tclm/error.h"
#include "tclm/record.h"

namespace tclm {

namespace od = simdjson::ondemand;

namespace {

constexpr std::string_view kStepNames[kNumAnsorStepKinds] = {
    "AN", "FU", "PR", "RE", "SP", "FSP", "FFSP", "SA", "CA", "CI", "CR", "CHR", "CHW", "RF"};

// A parse failure: where in the document and why.
struct Fail {
  std::string where;
  std::string why;
};

std::string err_text(simdjson::error_code e) { return simdjson::error_message(e); }

// Reads a JSON number that must be an integer (bools count as 0/1, null as 0).
bool read_int(od::value v, int64_t* out, std::string* why) {
  od::json_type t;
  if (auto e = v.type().get(t)) { *why = err_text(e); return false; }
  switch (t) {
    case od::json_type::number: {
      od::number_type nt;
      if (auto e = v.get_number_type().get(nt)) { *why = err_text(e); return false; }
      if (nt == od::number_type::floating_point_number) {
        double d;
        if (auto e = v.get_double().get(d)) { *why = err_text(e); return false; }
        if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e18) {
          *why = fmt::format("expected an integer, got {}", d);
          return false;
        }
        *out = static_cast<int64_t>(d);
        return true;
      }
      if (auto e = v.get_int64().get(*out)) { *why = "integer out of range: " + err_text(e); return false; }
      return true;
    }
    case od::json_type::boolean: {
      bool b;
      if (auto e = v.get_bool().get(b)) { *why = err_text(e); return false; }
      *out = b ? 1 : 0;
      return true;
    }
    case od::json_type::null:
      *out = 0;
      return true;
    default:
      *why = "expected an integer";
      return false;
  }
}

// The timestamp (r[3]): an integer, or a float (older logs) truncated to whole seconds. Out of the int64
// range (or NaN/inf) it is malformed: casting such a double to int64 is undefined behaviour.
bool read_timestamp(od::value v, int64_t* out, std::string* why) {
  od::number_type nt;
  if (auto e = v.get_number_type().get(nt)) { *why = "expected a number: " + err_text(e); return false; }
  if (nt == od::number_type::floating_point_number) {
    double d;
    if (auto e = v.get_double().get(d)) { *why = "expected a number: " + err_text(e); return false; }
    if (!(std::fabs(d) < 9.0e18)) { *why = fmt::format("timestamp {} out of range", d); return false; }
    *out = static_cast<int64_t>(d);
    return true;
  }
  if (auto e = v.get_int64().get(*out)) { *why = "timestamp out of range: " + err_text(e); return false; }
  return true;
}

bool read_double(od::value v, double* out, std::string* why) {
  if (auto e = v.get_double().get(*out)) { *why = "expected a number: " + err_text(e); return false; }
  return true;
}

bool read_string(od::value v, std::string* out, std::string* why) {
  std::string_view s;
  if (auto e = v.get_string().get(s)) { *why = "expected a string: " + err_text(e); return false; }
  out->assign(s.data(), s.size());
  return true;
}

bool read_int_array(od::value v, std::vector<int64_t>* out, std::string* why) {
  od::array arr;
  if (auto e = v.get_array().get(arr)) { *why = "expected an array: " + err_text(e); return false; }
  for (auto item : arr) {
    od::value x;
    if (auto e = item.get(x)) { *why = err_text(e); return false; }
    int64_t n;
    if (!read_int(x, &n, why)) return false;
    out->push_back(n);
  }
  return true;
}

// One transform step: ["SP", 2, 0, 1024, [1, 2, 8], 1].
bool parse_step(od::value v, TransformStep* step, std::string* why) {
  od::array arr;
  if (auto e = v.get_array().get(arr)) { *why = "step is not an array: " + err_text(e); return false; }
  step->ints.clear();
  step->str.clear();
  step->n_list = -1;
  step->list_pos = -1;
  bool first = true;
  for (auto item : arr) {
    od::value x;
    if (auto e = item.get(x)) { *why = err_text(e); return false; }
    if (first) {
      std::string_view code;
      if (x.get_string().get(code)) { *why = "step kind is not a string"; return false; }
      if (!parse_step_kind(code, &step->kind)) {
        *why = fmt::format("unknown step kind '{}'", std::string(code).substr(0, 16));
        return false;
      }
      first = false;
      continue;
    }
    od::json_type t;
    if (auto e = x.type().get(t)) { *why = err_text(e); return false; }
    if (t == od::json_type::string) {
      if (!step->str.empty()) { *why = "step has more than one string argument"; return false; }
      if (!read_string(x, &step->str, why)) return false;
    } else if (t == od::json_type::array) {
      if (step->list_pos >= 0) { *why = "step has more than one list argument"; return false; }
      step->list_pos = static_cast<int32_t>(step->ints.size());
      if (!read_int_array(x, &step->ints, why)) return false;
      step->n_list = static_cast<int32_t>(step->ints.size()) - step->list_pos;
    } else {
      int64_t n;
      if (!read_int(x, &n, why)) return false;
      step->ints.push_back(n);
    }
  }
  if (first) { *why = "empty step"; return false; }
  return true;
}

}  // namespace

std::string_view step_kind_name(StepKind kind) {
  auto i = static_cast<size_t>(kind);
  if (i < kNumAnsorStepKinds) return kStepNames[i];
  return i < kNumStepKinds ? trace_kind_name(kind) : std::string_view("??");
}

bool parse_step_kind(std::string_view prefix, StepKind* kind) {
  for (int i = 0; i < kNumAnsorStepKinds; ++i) {
    if (kStepNames[i] == prefix) {
      *kind = static_cast<StepKind>(i);
      return true;
    }
  }
  return false;
}

double MeasureRecord::mean_cost() const {
  if (costs.empty()) return INFINITY;
  double s = 0;
  for (double c : costs) s += c;
  return s / static_cast<double>(costs.size());
}

bool MeasureRecord::valid() const {
  if (error_no != 0 || costs.empty()) return false;
  for (double c : costs) {
    // !(c >= floor) is also true for NaN.
    if (!(c >= kMinPlausibleCost) || !std::isfinite(c) || c >= kMaxPlausibleCost) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
struct RecordParser::Impl {
  od::parser parser;
  bool allow_unmeasured = false;
  std::string padded;  // line copy with SIMDJSON_PADDING bytes of slack

  // i[0]: [workload_key, target, hw_params, target_host, layout_rewrite, task_input_names]
  bool parse_task(od::value v, MeasureRecord* r, Fail* f) {
    od::array arr;
    if (v.get_array().get(arr)) { *f = {"i[0]", "expected an array"}; return false; }
    int idx = 0;
    for (auto item : arr) {
      od::value x;
      if (auto e = item.get(x)) { *f = {fmt::format("i[0][{}]", idx), err_text(e)}; return false; }
      std::string why;
      bool ok = true;
      switch (idx) {
        case 0: ok = read_string(x, &r->workload_key, &why); break;
        case 1: ok = read_string(x, &r->target, &why); break;
        case 2: ok = read_int_array(x, &r->hw_params, &why); break;
        default: break;  // target_host, layout_rewrite, task_input_names: not used by tclm
      }
      if (!ok) { *f = {fmt::format("i[0][{}]", idx), why}; return false; }
      ++idx;
    }
    if (idx < 2) { *f = {"i[0]", "needs at least workload key and target"}; return false; }
    if (r->workload_key.empty()) { *f = {"i[0][0]", "empty workload key"}; return false; }
    return true;
  }

  // i: [task, [[], steps]]
  bool parse_input(od::value v, MeasureRecord* r, Fail* f) {
    od::array arr;
    if (v.get_array().get(arr)) { *f = {"i", "expected an array"}; return false; }
    int idx = 0;
    bool have_steps = false;
    for (auto item : arr) {
      od::value x;
      if (auto e = item.get(x)) { *f = {fmt::format("i[{}]", idx), err_text(e)}; return false; }
      if (idx == 0) {
        if (!parse_task(x, r, f)) return false;
      } else if (idx == 1) {
        od::array state;
        if (x.get_array().get(state)) { *f = {"i[1]", "expected an array"}; return false; }
        int sidx = 0;
        for (auto sitem : state) {
          od::value sx;
          if (auto e = sitem.get(sx)) { *f = {"i[1]", err_text(e)}; return false; }
          if (sidx == 1) {
            od::array steps;
            if (sx.get_array().get(steps)) { *f = {"i[1][1]", "expected an array"}; return false; }
            size_t n = 0;
            for (auto st : steps) {
              od::value sv;
              if (auto e = st.get(sv)) { *f = {fmt::format("i[1][1][{}]", n), err_text(e)}; return false; }
              if (r->steps.size() <= n) r->steps.emplace_back();
              std::string why;
              if (!parse_step(sv, &r->steps[n], &why)) {
                *f = {fmt::format("i[1][1][{}]", n), why};
                return false;
              }
              ++n;
            }
            r->steps.resize(n);
            have_steps = true;
          }
          ++sidx;
        }
      }
      ++idx;
    }
    if (!have_steps) { *f = {"i[1]", "missing transform steps"}; return false; }
    return true;
  }

  // r: [[costs], error_no, all_cost, timestamp]
  bool parse_result(od::value v, MeasureRecord* r, Fail* f) {
    od::array arr;
    if (v.get_array().get(arr)) { *f = {"r", "expected an array"}; return false; }
    int idx = 0;
    for (auto item : arr) {
      od::value x;
      if (auto e = item.get(x)) { *f = {fmt::format("r[{}]", idx), err_text(e)}; return false; }
      std::string why;
      bool ok = true;
      switch (idx) {
        case 0: {
          od::array costs;
          if (x.get_array().get(costs)) { ok = false; why = "expected an array of costs"; break; }
          for (auto c : costs) {
            od::value cv;
            double d;
            if (auto e = c.get(cv)) { ok = false; why = err_text(e); break; }
            if (!read_double(cv, &d, &why)) { ok = false; break; }
            r->costs.push_back(d);
          }
          break;
        }
        case 1: {
          int64_t n = 0;
          ok = read_int(x, &n, &why);
          // Narrowing silently would turn e.g. 4294967296 into 0, "no error".
          if (ok && (n < INT32_MIN || n > INT32_MAX)) {
            ok = false;
            why = fmt::format("error number {} out of range", n);
          }
          r->error_no = static_cast<int>(n);
          break;
        }
        case 2: ok = read_double(x, &r->all_cost, &why); break;
        case 3: ok = read_timestamp(x, &r->timestamp, &why); break;
        default: break;
      }
      if (!ok) { *f = {fmt::format("r[{}]", idx), why}; return false; }
      ++idx;
    }
    if (idx < 2) { *f = {"r", "needs at least costs and error_no"}; return false; }
    return true;
  }
};

RecordParser::RecordParser() : impl_(new Impl) {}
RecordParser::~RecordParser() { delete impl_; }
void RecordParser::set_allow_unmeasured(bool allow) { impl_->allow_unmeasured = allow; }

void MeasureRecord::clear_all_but_steps() {
  workload_key.clear();
  target.clear();
  hw_params.clear();
  costs.clear();
  error_no = 0;
  all_cost = 0;
  timestamp = 0;
  version.clear();
  measured = true;
}

std::string RecordParser::parse(std::string_view line, MeasureRecord* r) {
  r->clear_all_but_steps();

  auto& padded = impl_->padded;
  if (padded.size() < line.size() + simdjson::SIMDJSON_PADDING) {
    padded.resize(line.size() + simdjson::SIMDJSON_PADDING);
  }
  std::memcpy(padded.data(), line.data(), line.size());
  od::document doc;
  if (auto e = impl_->parser.iterate(padded.data(), line.size(), padded.size()).get(doc)) {
    return "invalid JSON: " + err_text(e);
  }
  od::object obj;
  if (auto e = doc.get_object().get(obj)) {
    if (e != simdjson::INCORRECT_TYPE) return "invalid JSON: " + err_text(e);
    const size_t p = line.find_first_not_of(" \t");
    // MetaSchedule database lines are JSON arrays; say so, since such files are easy to mix in.
    return p != std::string_view::npos && line[p] == '['
               ? "a JSON array, not an Ansor record object (a MetaSchedule database line?)"
               : "not a JSON object";
  }
  bool have_i = false, have_r = false;
  Fail f;
  for (auto field : obj) {
    std::string_view key;
    if (auto e = field.unescaped_key().get(key)) return "invalid JSON: " + err_text(e);
    od::value v;
    if (auto e = field.value().get(v)) return "invalid JSON: " + err_text(e);
    if (key == "i") {
      if (!impl_->parse_input(v, r, &f)) return f.where + ": " + f.why;
      have_i = true;
    } else if (key == "r") {
      if (!impl_->parse_result(v, r, &f)) return f.where + ": " + f.why;
      have_r = true;
    } else if (key == "v") {
      std::string why;
      if (!read_string(v, &r->version, &why)) return "v: " + why;
    }
  }
  // On-Demand validates lazily: make sure nothing is left unparsed or trailing.
  const char* rest = nullptr;
  if (doc.current_location().get(rest) == simdjson::SUCCESS) return "invalid JSON: trailing content";
  if (!have_i) return "missing field \"i\"";
  if (!have_r) {
    if (!impl_->allow_unmeasured) return "missing field \"r\"";
    r->measured = false;
  }
  return {};
}

std::string parse_program_line(std::string_view line, RecordParser& parser, MeasureRecord* record) {
  const size_t p = line.find_first_not_of(" \t\r\n");
  if (p != std::string_view::npos && line[p] == '[') return parse_trace_json(line, &record->steps);
  return parser.parse(line, record);
}

// ---------------------------------------------------------------------------------------------
void ReadStats::skip(const std::string& file, int64_t line, const std::string& reason) {
  ++skipped;
  // Group by the reason without record-specific details after the first ':' of the "why" part.
  std::string key = reason;
  // A reason that names the file (e.g. "unreadable file: cannot open 'f': ...") is grouped without it.
  for (size_t at; !file.empty() && (at = key.find(file)) != std::string::npos;) key.replace(at, file.size(), "FILE");
  if (auto p = key.find(": "); p != std::string::npos) {
    auto q = key.find(": ", p + 2);
    if (q != std::string::npos) key = key.substr(0, q);
  }
  ++skipped_by_reason[key];
  if (examples.size() < max_examples) examples.push_back(fmt::format("{}:{}: {}", file, line, reason));
}

void ReadStats::merge(const ReadStats& o) {
  files += o.files;
  lines += o.lines;
  records += o.records;
  skipped += o.skipped;
  workload_tables += o.workload_tables;
  left_out.insert(left_out.end(), o.left_out.begin(), o.left_out.end());
  for (const auto& [k, v] : o.skipped_by_reason) skipped_by_reason[k] += v;
  for (const auto& e : o.examples) {
    if (examples.size() < max_examples) examples.push_back(e);
  }
}

std::string ReadStats::report() const {
  std::string out = fmt::format("{} files, {} lines, {} records, {} skipped lines{}\n", files, lines, records,
                                skipped,
                                workload_tables ? fmt::format(" ({} MetaSchedule workload tables read as lookups)",
                                                              workload_tables)
                                                : "");
  for (const auto& [k, v] : skipped_by_reason) out += fmt::format("  skipped {:>8}  {}\n", v, k);
  if (!examples.empty()) {
    out += "  first skipped lines:\n";
    for (const auto& e : examples) out += "    " + e + "\n";
  }
  if (!left_out.empty()) {
    out += fmt::format("{} record files or directories left out (each file is read once, by its real path):\n",
                       left_out.size());
    for (const auto& e : left_out) out += "    " + e + "\n";
  }
  return out;
}

void read_record_file(const std::string& path,
                      const std::function<void(const MeasureRecord&, const RecordOrigin&)>& fn,
                      ReadStats* stats, const RecordReadOptions& options) {
  ++stats->files;
  if (is_workload_table(path)) {  // a lookup table for the tuning records beside it, not records
    ++stats->workload_tables;
    return;
  }
  LineReader reader(path);
  RecordParser parser;
  parser.set_allow_unmeasured(options.allow_unmeasured);
  MeasureRecord record;
  std::string_view line;
  // MetaSchedule tuning records (JSON arrays) name their workload by an index into the table beside
  // the file; it is read at the first such line.
  bool have_table = false;
  std::vector<std::string> workload_keys;
  std::string table;
  while (reader.next(&line)) {
    ++stats->lines;
    size_t p = line.find_first_not_of(" \t");
    if (p == std::string_view::npos || line[p] == '#') continue;  // blank or comment
    std::string why;
    if (line[p] == '[') {
      if (!have_table) {
        table = workload_table_of(path);
        workload_keys = read_workload_table(table, stats);
        have_table = true;
      }
      why = parse_tuning_record_json(line, workload_keys, table.empty() ? "database_workload.json" : table, &record);
    } else {
      why = parser.parse(line, &record);
    }
    if (!why.empty()) {
      stats->skip(path, reader.line_number(), why);
      continue;
    }
    ++stats->records;
    fn(record, RecordOrigin{&path, reader.line_number()});
  }
  if (!reader.error().empty()) stats->skip(path, reader.line_number() + 1, reader.error());
}

namespace {

bool is_record_file_name(const std::string& name) {
  auto ends = [&](std::string_view s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  return !(name.empty() || name[0] == '.' || ends(".md") || ends(".txt") || ends(".tsv") || ends(".py"));
}

// The files below one directory (links to directories followed after the real tree, so that a file is
// named by its real place when it has one), each directory read once by its canonical path.
class DirectoryWalk {
 public:
  DirectoryWalk(const std::string& root, std::set<std::string>* seen_dirs, std::vector<std::string>* left_out)
      : root_(root), seen_dirs_(seen_dirs), left_out_(left_out) {}

  struct Found {
    std::string path, canonical;
    bool via_link = false;
  };

  std::vector<Found> run() {
    walk(root_, false, "");
    while (!links_.empty()) {
      const std::string link = links_.front();
      links_.pop_front();
      walk(link, true, link);
    }
    return std::move(found_);
  }

 private:
  void fail(const std::error_code& ec) const {
    throw Error("cannot list '" + root_ + "' (" + ec.message() +
                "): check the permissions of the directory tree, or leave it out of the data");
  }

  void walk(const std::string& dir, bool via_link, const std::string& link) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const std::string canon = fs::canonical(dir, ec).string();
    if (ec) fail(ec);
    if (!seen_dirs_->insert(canon).second) {
      if (link.empty()) {
        left_out_->push_back(fmt::format("'{}': the directory '{}' was read already; read once", dir, canon));
      } else {
        const std::string parent = fs::canonical(fs::path(link).parent_path(), ec).string();
        const bool cycle = !ec && (parent == canon || parent.rfind(canon + "/", 0) == 0);
        left_out_->push_back(fmt::format("'{}' links to '{}', {}; not followed", link, canon,
                                         cycle ? "a directory above it (a cycle)" : "a directory read already"));
      }
      return;
    }
    std::vector<fs::directory_entry> entries;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) entries.push_back(*it);
    if (ec) fail(ec);
    std::sort(entries.begin(), entries.end());
    for (const auto& e : entries) {
      const bool is_link = e.is_symlink(ec);
      if (e.is_directory(ec)) {
        if (is_link) {
          links_.push_back(e.path().string());
        } else {
          walk(e.path().string(), via_link, "");
        }
        continue;
      }
      if (!e.is_regular_file(ec) || !is_record_file_name(e.path().filename().string())) continue;
      const std::string c = fs::canonical(e.path(), ec).string();
      if (ec) fail(ec);
      found_.push_back(Found{e.path().string(), c, via_link || is_link});
    }
  }

  std::string root_;
  std::set<std::string>* seen_dirs_;
  std::vector<std::string>* left_out_;
  std::deque<std::string> links_;
  std::vector<Found> found_;
};

}  // namespace

RecordFiles collect_record_files(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  RecordFiles out;
  std::set<std::string> seen_dirs;
  std::map<std::string, std::string> seen_files;  // canonical path -> the name it was read under
  auto add = [&](size_t source, const std::string& path, const std::string& canonical) {
    auto [it, inserted] = seen_files.emplace(canonical, path);
    if (inserted) {
      out.files.emplace_back(source, path);
    } else {
      out.left_out.push_back(fmt::format("'{}': the same file as '{}'; read once", path, it->second));
    }
  };
  for (size_t i = 0; i < paths.size(); ++i) {
    const std::string& path = paths[i];
    std::error_code ec;
    const fs::file_status status = fs::status(path, ec);
    if (status.type() == fs::file_type::not_found) throw Error("record path '" + path + "' does not exist");
    if (ec) throw Error("record path '" + path + "': cannot access it (" + ec.message() + "); check its permissions");
    if (!fs::is_directory(status)) {
      const std::string c = fs::canonical(path, ec).string();
      add(i, path, ec ? path : c);
      continue;
    }
    auto found = DirectoryWalk(path, &seen_dirs, &out.left_out).run();
    // The name a file is read under: its real place when it has one, else the first in sorted order.
    std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
      return std::tie(a.via_link, a.path) < std::tie(b.via_link, b.path);
    });
    const size_t first = out.files.size();
    for (const auto& f : found) add(i, f.path, f.canonical);
    std::sort(out.files.begin() + static_cast<std::ptrdiff_t>(first), out.files.end());
  }
  return out;
}

std::vector<std::string> list_record_files(const std::string& path) {
  std::vector<std::string> files;
  for (auto& [source, f] : collect_record_files({path}).files) files.push_back(std::move(f));
  return files;
}

std::string record_to_json(const MeasureRecord& r) {
  // JSON string escaping: '"', '\\' and the control characters U+0000..U+001F, which a JSON string
  // cannot hold raw (the parser unescapes "\n", "\u0000", ... in the record it read). Other bytes are
  // copied: the parser has validated them as UTF-8.
  auto quote = [](const std::string& s) {
    std::string o = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\') {
        o += '\\';
        o += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        o += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
      } else {
        o += c;
      }
    }
    return o + "\"";
  };
  std::string out = "{\"i\": [[" + quote(r.workload_key) + ", " + quote(r.target) + ", [";
  for (size_t i = 0; i < r.hw_params.size(); ++i) out += (i ? ", " : "") + std::to_string(r.hw_params[i]);
  out += "], \"\", 0, []], [[], [";
  for (size_t s = 0; s < r.steps.size(); ++s) {
    const auto& st = r.steps[s];
    out += (s ? ", [" : "[") + quote(std::string(step_kind_name(st.kind)));
    // Rebuild the argument order: ints before the list, the list, ints after; the string goes where
    // Ansor writes it (PR: after iter_id = last; CHR: after stage_id; CHW: last).
    std::vector<std::string> args;
    for (size_t i = 0; i <= st.ints.size(); ++i) {
      if (st.list_pos >= 0 && static_cast<size_t>(st.list_pos) == i) {
        std::string l = "[";
        for (int32_t k = 0; k < st.n_list; ++k) l += (k ? ", " : "") + std::to_string(st.ints[i + k]);
        args.push_back(l + "]");
        i += st.n_list;
        if (i == st.ints.size()) break;
      }
      if (i < st.ints.size()) args.push_back(std::to_string(st.ints[i]));
    }
    if (!st.str.empty()) {
      size_t at = st.kind == StepKind::kCacheRead ? 1 : args.size();
      args.insert(args.begin() + std::min(at, args.size()), quote(st.str));
    }
    for (const auto& a : args) out += ", " + a;
    out += "]";
  }
  out += "]]]";
  if (!r.measured) return out + fmt::format(", \"v\": {}}}", quote(r.version.empty() ? "v0.6" : r.version));
  out += ", \"r\": [[";
  for (size_t i = 0; i < r.costs.size(); ++i) out += (i ? ", " : "") + fmt::format("{:.9g}", r.costs[i]);
  out += fmt::format("], {}, {:.9g}, {}], \"v\": {}}}", r.error_no, r.all_cost, r.timestamp,
                     quote(r.version.empty() ? "v0.6" : r.version));
  return out;
}

}  // namespace tclm
