// dataset/dataset.cpp: records -> tasks, labels, packed programs, splits.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>
#include "common/bytes.h"
#include "dataset/record_cache.h"
#include "tclm/dataset.h"
#include "tclm/error.h"

namespace tclm {

uint64_t fnv1a64(std::string_view s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ (seed * 0x9E3779B97F4A7C15ull);
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  // final avalanche (splitmix64) so that nearby inputs spread over [0, 2^64)
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h;
}

DataSource DataSource::parse(const std::string& spec) {
  DataSource s;
  auto eq = spec.find('=');
  if (eq != std::string::npos && spec.find('/') > eq) {
    s.platform = spec.substr(0, eq);
    s.path = spec.substr(eq + 1);
    if (s.platform.empty()) {
      throw Error("-d/--data '" + spec + "': empty platform name before '='; use -d PLATFORM=PATH or -d PATH");
    }
  } else {
    s.path = spec;
  }
  if (s.path.empty()) throw Error("-d/--data '" + spec + "': empty path; use -d PLATFORM=PATH or -d PATH");
  return s;
}

std::string normalize_target(const std::string& target, const std::vector<int64_t>& hw_params) {
  std::istringstream in(target);
  std::string tok, kind, out;
  in >> kind;
  out = kind;
  std::vector<std::string> keep;
  while (in >> tok) {
    for (const char* opt : {"-mcpu=", "-model=", "-arch=", "-mtriple=", "-device="}) {
      if (tok.rfind(opt, 0) == 0) keep.push_back(tok);
    }
  }
  std::sort(keep.begin(), keep.end());
  for (const auto& k : keep) out += " " + k;
  if ((kind == "llvm" || kind == "c") && !hw_params.empty() && hw_params[0] > 0) {
    out += fmt::format(" cores={}", hw_params[0]);
  }
  return out;
}

int Dataset::intern_platform(const std::string& name) {
  auto [it, inserted] = platform_index_.emplace(name, static_cast<int>(platforms_.size()));
  if (inserted) {
    platforms_.push_back(name);
    platform_stats_.emplace_back();
  }
  return it->second;
}

int Dataset::intern_group(const std::string& name) {
  auto [it, inserted] = group_index_.emplace(name, static_cast<int>(groups_.size()));
  if (inserted) groups_.push_back(name);
  return it->second;
}

namespace {
// Counts a record in its platform's statistics; true when it is a valid program (no error, good costs).
// Dataset::add_record and summarize_sources count with this one function.
bool count_record(PlatformStats& ps, const MeasureRecord& r) {
  ++ps.records;
  if (r.error_no != 0) {
    ++ps.errors;
    ++ps.errors_by_code[r.error_no];
    return false;
  }
  if (!r.valid()) {
    ++ps.bad_costs;
    return false;
  }
  return true;
}
}  // namespace

void Dataset::add_record(const MeasureRecord& r, int platform, int group, bool keep_steps) {
  PlatformStats& ps = platform_stats_[platform];
  if (!count_record(ps, r)) return;
  auto key = std::make_pair(platform, r.workload_key);
  auto [it, inserted] = task_index_.emplace(key, static_cast<uint32_t>(tasks_.size()));
  if (inserted) {
    Task t;
    t.workload_key = r.workload_key;
    t.workload = workload_identity(r.workload_key);
    t.platform = platform;
    tasks_.push_back(std::move(t));
    ++ps.tasks;
  }
  Task& task = tasks_[it->second];
  if (std::find(task.groups.begin(), task.groups.end(), group) == task.groups.end()) task.groups.push_back(group);
  const auto p = static_cast<uint32_t>(cost_.size());
  task.programs.push_back(p);
  task_of_.push_back(it->second);
  cost_.push_back(r.mean_cost());
  n_steps_.push_back(static_cast<uint32_t>(r.steps.size()));
  if (!r.steps.empty()) (is_trace_kind(r.steps.front().kind) ? trace_programs_ : ansor_programs_) += 1;
  if (keep_steps) {
    std::vector<uint8_t> code;
    for (const auto& s : r.steps) {
      uint64_t str_id = 0;
      if (!s.str.empty()) {
        auto [sit, sins] = string_index_.emplace(s.str, static_cast<int>(strings_.size()));
        if (sins) strings_.push_back(s.str);
        str_id = static_cast<uint64_t>(sit->second) + 1;
      }
      code.push_back(static_cast<uint8_t>(s.kind));
      put_varint(code, str_id);
      put_varint(code, zigzag(s.list_pos));
      put_varint(code, zigzag(s.n_list));
      put_varint(code, s.ints.size());
      for (int64_t v : s.ints) put_varint(code, zigzag(v));
    }
    append_code(code);
  } else {
    code_at_.push_back(kNoCode);
  }
  ++ps.programs;
  if (static_cast<int>(r.steps.size()) > max_steps_) ++ps.truncated;
}

void Dataset::append_code(const std::vector<uint8_t>& code) {
  constexpr size_t kBlock = size_t{1} << kBlockBits;
  if (blocks_.empty() || blocks_.back().size() + code.size() > blocks_.back().capacity()) {
    blocks_.emplace_back();
    blocks_.back().reserve(std::max(kBlock, code.size()));  // never grows past it: no reallocation
  }
  std::vector<uint8_t>& b = blocks_.back();
  code_at_.push_back((static_cast<uint64_t>(blocks_.size() - 1) << kBlockBits) | b.size());
  b.insert(b.end(), code.begin(), code.end());
}

const uint8_t* Dataset::code_begin(uint32_t p, const uint8_t** end) const {
  const std::vector<uint8_t>& b = blocks_[code_at_[p] >> kBlockBits];
  *end = b.data() + b.size();
  return b.data() + (code_at_[p] & ((uint64_t{1} << kBlockBits) - 1));
}

void Dataset::finalize() {
  // The per-program arrays grew by doubling: give back what is unused (a few bytes per program).
  code_at_.shrink_to_fit();
  n_steps_.shrink_to_fit();
  cost_.shrink_to_fit();
  task_of_.shrink_to_fit();
  for (Task& t : tasks_) t.programs.shrink_to_fit();
  label_.assign(cost_.size(), 0.0f);
  for (auto& t : tasks_) {
    double m = INFINITY;
    for (uint32_t p : t.programs) m = std::min(m, cost_[p]);
    t.min_cost = t.programs.empty() ? 0.0 : m;
    for (uint32_t p : t.programs) label_[p] = static_cast<float>(m / cost_[p]);
  }
}

uint32_t Dataset::feature_version() const {
  if (trace_programs_ > 0 && ansor_programs_ > 0) {
    throw Error(fmt::format("the data mixes {} Ansor programs and {} MetaSchedule traces; a model reads one "
                            "of the two encodings, so give them as separate datasets",
                            ansor_programs_, trace_programs_));
  }
  return trace_programs_ > 0 ? kTraceFeatureVersion : kFeatureVersion;
}

size_t Dataset::program_bytes() const {
  size_t task_lists = 0;
  for (const Task& t : tasks_) task_lists += t.programs.capacity() * sizeof(uint32_t);
  size_t blocks = 0;
  for (const auto& b : blocks_) blocks += b.capacity();
  return code_at_.capacity() * sizeof(uint64_t) + blocks + n_steps_.capacity() * sizeof(uint32_t) +
         cost_.capacity() * sizeof(double) + label_.capacity() * sizeof(float) +
         task_of_.capacity() * sizeof(uint32_t) + task_lists;
}

const uint8_t* Dataset::decode(uint32_t p, std::vector<StepView>* out, std::vector<int64_t>* ints) const {
  out->clear();
  ints->clear();
  if (!has_steps(p)) {
    throw Error(fmt::format("program {} belongs to a task another shard keeps (task '{}'); a data-parallel "
                            "process only featurizes the tasks it owns",
                            p, tasks_[task_of_[p]].workload_key));
  }
  if (n_steps_[p] == 0) return nullptr;
  const uint8_t* end = nullptr;
  VarReader rd{code_begin(p, &end), end};
  auto damaged = [p] { return InternalError(fmt::format("Dataset: the code of program {} is damaged", p)); };
  for (uint32_t i = 0; i < n_steps_[p]; ++i) {
    uint64_t str_id = 0, list_pos = 0, n_list = 0, n_ints = 0;
    if (rd.p == rd.end) throw damaged();
    const auto kind = static_cast<StepKind>(*rd.p++);
    if (!rd.varint(&str_id) || !rd.varint(&list_pos) || !rd.varint(&n_list) || !rd.varint(&n_ints)) throw damaged();
    for (uint64_t k = 0; k < n_ints; ++k) {
      int64_t v = 0;
      if (!rd.svarint(&v)) throw damaged();
      ints->push_back(v);
    }
    out->push_back(StepView{kind, nullptr, static_cast<int32_t>(n_ints), static_cast<int32_t>(unzigzag(list_pos)),
                            static_cast<int32_t>(unzigzag(n_list)),
                            str_id > 0 ? std::string_view(strings_[str_id - 1]) : std::string_view()});
  }
  // The integers are in place now (the vector no longer grows): each step's are the next n_ints.
  const int64_t* next = ints->data();
  for (StepView& v : *out) {
    v.ints = next;
    next += v.n_ints;
  }
  return rd.p;
}

void Dataset::steps(uint32_t p, std::vector<StepView>* out, std::vector<int64_t>* ints) const { decode(p, out, ints); }

int Dataset::featurize(const std::vector<uint32_t>& programs, std::vector<float>* x,
                       std::vector<float>* mask) const {
  int L = 1;
  for (uint32_t p : programs) L = std::max(L, std::min(num_steps(p), max_steps_));
  const size_t row = static_cast<size_t>(L) * kStepFeatureDim;
  x->resize(programs.size() * row);
  mask->assign(programs.size() * static_cast<size_t>(L), 0.0f);
  std::vector<StepView> views;
  std::vector<int64_t> ints;
  for (size_t i = 0; i < programs.size(); ++i) {
    steps(programs[i], &views, &ints);
    int used = featurize_program(views.data(), views.size(), L, x->data() + i * row);
    std::fill(mask->begin() + i * L, mask->begin() + i * L + used, 1.0f);
  }
  return L;
}

void Dataset::pooled_features(const std::vector<uint32_t>& programs, std::vector<float>* out) const {
  out->resize(programs.size() * kPooledFeatureDim);
  std::vector<StepView> views;
  std::vector<int64_t> ints;
  std::vector<float> x(static_cast<size_t>(max_steps_) * kStepFeatureDim);
  for (size_t i = 0; i < programs.size(); ++i) {
    steps(programs[i], &views, &ints);
    const int used = featurize_program(views.data(), views.size(), max_steps_, x.data());
    pool_step_features(x.data(), used, out->data() + i * kPooledFeatureDim);
  }
}

Dataset Dataset::subset(const std::vector<uint32_t>& programs) const {
  Dataset d;
  d.max_steps_ = max_steps_;
  d.platforms_ = platforms_;
  d.groups_ = groups_;
  d.strings_ = strings_;
  d.platform_index_ = platform_index_;
  d.group_index_ = group_index_;
  d.string_index_ = string_index_;
  d.task_index_ = task_index_;
  d.platform_stats_ = platform_stats_;
  d.read_stats_ = read_stats_;
  d.tasks_ = tasks_;
  d.shards_ = shards_;
  d.task_shard_ = task_shard_;
  for (Task& t : d.tasks_) t.programs.clear();
  std::vector<uint8_t> seen(num_programs(), 0);
  d.cost_.reserve(programs.size());
  d.n_steps_.reserve(programs.size());
  d.task_of_.reserve(programs.size());
  d.code_at_.reserve(programs.size());
  std::vector<StepView> views;
  std::vector<int64_t> ints;
  for (uint32_t p : programs) {
    if (p >= num_programs()) {
      throw Error(fmt::format("Dataset::subset: program {} is out of range ({} programs)", p, num_programs()));
    }
    if (seen[p]) throw Error(fmt::format("Dataset::subset: program {} is listed twice", p));
    seen[p] = 1;
    const uint32_t t = task_of_[p];
    d.tasks_[t].programs.push_back(static_cast<uint32_t>(d.cost_.size()));
    d.task_of_.push_back(t);
    d.cost_.push_back(cost_[p]);
    d.n_steps_.push_back(n_steps_[p]);
    if (n_steps_[p] > 0) {
      const uint8_t* end = nullptr;
      const bool trace = has_steps(p) ? is_trace_kind(static_cast<StepKind>(*code_begin(p, &end))) : trace_programs_ > 0;
      (trace ? d.trace_programs_ : d.ansor_programs_) += 1;
    }
    if (!has_steps(p)) {
      d.code_at_.push_back(kNoCode);
      continue;
    }
    // The program's code runs until its n_steps steps are read.
    const uint8_t* end = nullptr;
    const uint8_t* begin = n_steps_[p] > 0 ? code_begin(p, &end) : nullptr;
    end = decode(p, &views, &ints);
    d.append_code(std::vector<uint8_t>(begin, end));
  }
  d.finalize();
  return d;
}

namespace {

// The group of a file: its parent directory relative to the source root (the root's own name for
// files directly in it; the file name without extensions when the source is a single file).
std::string group_of(const std::string& root, const std::string& file) {
  namespace fs = std::filesystem;
  if (root == file) {
    std::string n = fs::path(file).filename().string();
    return n.substr(0, n.find('.'));
  }
  auto rel = fs::path(file).lexically_relative(root).parent_path().string();
  if (!rel.empty()) return rel;
  // A file directly in the source directory: the group is that directory (so that several
  // `-d DIR` sources, one per network or operator, are separate groups).
  auto dir = fs::path(root).lexically_normal();
  if (!dir.has_filename()) dir = dir.parent_path();
  return dir.filename().empty() ? "." : dir.filename().string();
}

// Reads the records of every file of `sources` in order: on_file(source, file) before each file, then
// on_record for each record; returns the merged reader statistics. Unreadable files are counted.
ReadStats read_sources(const std::vector<DataSource>& sources, const LoadOptions& options,
                       const std::function<void(const DataSource&, const std::string&)>& on_file,
                       const std::function<void(const MeasureRecord&, const RecordOrigin&)>& on_record) {
  if (options.max_steps < 1) throw Error(fmt::format("--max-steps must be >= 1 (got {})", options.max_steps));
  std::vector<std::string> paths;
  for (const auto& src : sources) paths.push_back(src.path);
  RecordFiles listed = collect_record_files(paths);  // each file once, by its real path
  std::vector<std::pair<const DataSource*, std::string>> files;
  for (auto& [source, f] : listed.files) files.emplace_back(&sources[source], std::move(f));
  ReadStats total;
  total.left_out = std::move(listed.left_out);
  auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string& file = files[i].second;
    on_file(*files[i].first, file);
    ReadStats fs;
    try {
      if (options.candidates) {
        read_record_file(file, on_record, &fs, RecordReadOptions{.allow_unmeasured = true});
      } else if (!options.cache_dir.empty()) {
        read_record_file_cached(file, options.cache_dir, on_record, &fs);
      } else {
        read_record_file(file, on_record, &fs);
      }
    } catch (const Error& e) {
      fs.skip(file, 0, std::string("unreadable file: ") + e.what());
    }
    total.merge(fs);
    if (options.progress) {
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::fprintf(stderr, "\rreading records: %zu/%zu files, %lld records, %.1f s", i + 1, files.size(),
                   static_cast<long long>(total.records), s);
      std::fflush(stderr);
    }
  }
  if (options.progress && !files.empty()) std::fprintf(stderr, "\n");
  return total;
}

}  // namespace

Dataset Dataset::load(const std::vector<DataSource>& sources, const LoadOptions& options) {
  if (options.shards < 1 || options.shard < 0 || options.shard >= options.shards) {
    throw Error(fmt::format("shard {} of {} does not exist (0 <= shard < shards)", options.shard, options.shards));
  }
  // A task's key while reading: its platform's name and its workload key.
  using TaskKey = std::pair<std::string, std::string>;
  std::map<TaskKey, int> owner;
  if (options.shards > 1) {
    // First read: valid programs per task, then the tasks dealt to the shards, largest first, each to
    // the shard holding the fewest programs so far (ties: the lower workload-key hash, the lower shard).
    std::map<TaskKey, int64_t> count;
    std::string platform;
    PlatformStats ignored;
    read_sources(
        sources, options, [&](const DataSource& src, const std::string&) { platform = src.platform; },
        [&](const MeasureRecord& r, const RecordOrigin&) {
          if (!options.candidates && !count_record(ignored, r)) return;
          ++count[{platform.empty() ? normalize_target(r.target, r.hw_params) : platform, r.workload_key}];
        });
    std::vector<std::pair<int64_t, const TaskKey*>> order;
    for (const auto& [key, n] : count) order.emplace_back(n, &key);
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
      if (a.first != b.first) return a.first > b.first;
      return fnv1a64(a.second->second, fnv1a64(a.second->first)) < fnv1a64(b.second->second, fnv1a64(b.second->first));
    });
    std::vector<int64_t> load(static_cast<size_t>(options.shards), 0);
    for (const auto& [n, key] : order) {
      const auto s = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
      owner[*key] = s;
      load[static_cast<size_t>(s)] += n;
    }
  }
  Dataset d;
  d.max_steps_ = options.max_steps;
  d.shards_ = options.shards;
  int group = 0, fixed_platform = -1;
  // A candidate pool: every program at 1 s, each (platform, workload key, steps) once.
  MeasureRecord candidate;
  std::set<std::tuple<int, std::string, uint64_t>> seen;
  auto as_candidate = [&](const MeasureRecord& r, int platform) -> const MeasureRecord* {
    uint64_t h = 0;
    for (const TransformStep& st : r.steps) {
      h = fnv1a64(std::string_view(reinterpret_cast<const char*>(&st.kind), sizeof st.kind), h);
      h = fnv1a64(std::string_view(reinterpret_cast<const char*>(st.ints.data()), st.ints.size() * sizeof(int64_t)), h);
      const int32_t list[2] = {st.n_list, st.list_pos};
      h = fnv1a64(std::string_view(reinterpret_cast<const char*>(list), sizeof list), h);
      h = fnv1a64(st.str, h);
    }
    if (!seen.emplace(platform, r.workload_key, h).second) {
      ++d.platform_stats_[platform].records;
      ++d.platform_stats_[platform].duplicates;
      return nullptr;
    }
    candidate = r;
    candidate.costs = {1.0};
    candidate.error_no = 0;
    candidate.measured = true;
    return &candidate;
  };
  d.read_stats_ = read_sources(
      sources, options,
      [&](const DataSource& src, const std::string& file) {
        group = d.intern_group(group_of(src.path, file));
        fixed_platform = src.platform.empty() ? -1 : d.intern_platform(src.platform);
      },
      [&](const MeasureRecord& r, const RecordOrigin&) {
        const int platform =
            fixed_platform >= 0 ? fixed_platform : d.intern_platform(normalize_target(r.target, r.hw_params));
        bool keep = true;
        if (options.shards > 1) {
          const auto it = owner.find({d.platforms_[platform], r.workload_key});
          keep = it != owner.end() && it->second == options.shard;  // not found: an invalid record (counted only)
        }
        if (!options.candidates) {
          d.add_record(r, platform, group, keep);
        } else if (const MeasureRecord* c = as_candidate(r, platform)) {
          d.add_record(*c, platform, group, keep);
        }
      });
  if (options.shards > 1) {
    d.task_shard_.resize(d.tasks_.size());
    for (size_t t = 0; t < d.tasks_.size(); ++t) {
      const auto it = owner.find({d.platforms_[d.tasks_[t].platform], d.tasks_[t].workload_key});
      if (it == owner.end()) {
        throw Error(fmt::format("the record files changed between the two reads of a sharded load (task '{}' was not "
                                "counted in the first); load again", d.tasks_[t].workload_key));
      }
      d.task_shard_[t] = it->second;
    }
  }
  d.finalize();
  return d;
}

DataSummary summarize_sources(const std::vector<DataSource>& sources, const LoadOptions& options) {
  DataSummary out;
  std::map<std::string, int> platform_index;
  std::set<std::pair<int, uint64_t>> tasks;  // (platform, hash of the workload key)
  auto intern = [&](const std::string& name) {
    auto [it, inserted] = platform_index.emplace(name, static_cast<int>(out.platforms.size()));
    if (inserted) {
      out.platforms.push_back(name);
      out.platform_stats.emplace_back();
    }
    return it->second;
  };
  int fixed_platform = -1;
  out.read_stats = read_sources(
      sources, options,
      [&](const DataSource& src, const std::string&) {
        fixed_platform = src.platform.empty() ? -1 : intern(src.platform);
      },
      [&](const MeasureRecord& r, const RecordOrigin&) {
        const int platform = fixed_platform >= 0 ? fixed_platform : intern(normalize_target(r.target, r.hw_params));
        PlatformStats& ps = out.platform_stats[platform];
        if (!count_record(ps, r)) return;  // as Dataset::add_record
        if (tasks.emplace(platform, fnv1a64(r.workload_key)).second) ++ps.tasks;
        ++ps.programs;
        if (static_cast<int>(r.steps.size()) > options.max_steps) ++ps.truncated;
      });
  return out;
}

std::string workload_identity(std::string_view key) {
  // The workload's name as the key starts, and its number of elements (name and arguments).
  static constexpr std::pair<std::string_view, size_t> kConvolutions[] = {{"[\"conv2d_layer\"", 10},
                                                                          {"[\"depthwise_conv2d_layer\"", 9}};
  std::string out(key);
  const auto conv = std::find_if(std::begin(kConvolutions), std::end(kConvolutions),
                                 [&](const auto& c) { return key.substr(0, c.first.size()) == c.first; });
  if (conv == std::end(kConvolutions)) return out;
  const nlohmann::json j = nlohmann::json::parse(key, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array() || j.size() != conv->second) return out;
  const auto &kh = j[j.size() - 4], &kw = j[j.size() - 3], &padding = j.back();
  if (!kh.is_number_integer() || kh != kw) return out;
  const int64_t kernel = kh.get<int64_t>();
  const char* spelling = nullptr;
  if (padding.is_string()) {
    if (kernel == 1 && padding == "VALID") spelling = "SAME";  // both pad 0
  } else if (padding.is_number_integer()) {
    const int64_t per_side = padding.get<int64_t>();
    if (per_side == 0) {
      spelling = kernel == 1 ? "SAME" : "VALID";
    } else if (kernel % 2 == 1 && per_side == (kernel - 1) / 2) {
      spelling = "SAME";
    }
  }
  if (spelling == nullptr) return out;
  // Replace the last element's text, so that the rest keeps the key's own spelling.
  const size_t close = out.rfind(']');
  size_t begin = out.rfind(',', close) + 1;
  while (out[begin] == ' ') ++begin;
  return out.substr(0, begin) + '"' + spelling + '"' + out.substr(close);
}

Split make_split(const Dataset& data, const SplitOptions& o) {
  if (o.test_fraction < 0 || o.valid_fraction < 0 || o.test_fraction + o.valid_fraction >= 1) {
    throw Error(fmt::format("--test-fraction {} and --valid-fraction {} must be >= 0 with a sum below 1; lower one of "
                            "them", o.test_fraction, o.valid_fraction));
  }
  // A unit's position in [0, 1): < test -> test; < test + valid -> valid; else train.
  auto part_of = [&](std::string_view unit, uint64_t seed) {
    double u = static_cast<double>(fnv1a64(unit, seed) >> 11) * 0x1.0p-53;
    return u < o.test_fraction ? 0 : (u < o.test_fraction + o.valid_fraction ? 1 : 2);
  };
  // The tuning split's second hash: a seed derived from the user's, so its parts are independent of
  // the outer split's (and change with --split-seed like them).
  const uint64_t inner_seed = fnv1a64("tclm tuning split", o.seed);
  Split s;
  const auto& tasks = data.tasks();
  auto task_part = [&](uint32_t t, uint64_t seed) {
    if (o.mode == SplitMode::kTask) return part_of(tasks[t].workload, seed);
    int part = 2;
    for (int g : tasks[t].groups) part = std::min(part, part_of(data.groups()[g], seed));
    return part;
  };
  for (uint32_t t = 0; t < tasks.size(); ++t) {
    if (static_cast<int>(tasks[t].programs.size()) < o.min_programs) {
      ++s.too_small;
      continue;
    }
    int part = task_part(t, o.seed);
    if (o.tuning) {
      if (part == 0) {
        ++s.held_out;
        continue;
      }
      part = task_part(t, inner_seed);
    }
    (part == 0 ? s.test : part == 1 ? s.valid : s.train).push_back(t);
  }
  return s;
}

}  // namespace tclm
