// record/trace_reader.cpp: MetaSchedule traces and JSON databases -> programs (TransformSteps of the
// kTrace* kinds, tclm/record.h).
//
// Formats (TVM src/s_tir/schedule/trace.cc Trace::AsJSON, src/s_tir/meta_schedule/database/
// database.cc TuningRecordNode::AsJSON, json_database.cc; the same in TVM 0.14-0.19 under
// src/tir and src/meta_schedule):
//   trace           [[inst...], [[inst_index, decision]...]], inst = [kind, inputs, attrs, outputs];
//                   inputs are random-variable names ("b0" block, "l1" loop, "v2" integer), literals
//                   or null; decisions of sampling instructions are given by instruction index.
//   tuning record   [workload_index, [trace, run_secs | null, target, args_info]]
//   workload table  [structural_hash, base64 IRModule], one line per workload, in index order.
#include <cmath>
#include <filesystem>
#include <fmt/format.h>
#include <simdjson.h>
#include <string>
#include <unordered_map>

#include "common/line_reader.h"
#include "record/trace_reader.h"
#include "tclm/error.h"
#include "tclm/record.h"

namespace tclm {

namespace {

struct KindName {
  std::string_view name;
  StepKind kind;
};

// Instruction names (TVM kName) -> kinds. Several names map to one kind (renames across versions).
constexpr KindName kTraceNames[] = {
    {"SamplePerfectTile", StepKind::kTraceSamplePerfectTile},
    {"SamplePartitionedTile", StepKind::kTraceSamplePerfectTile},
    {"SampleCategorical", StepKind::kTraceSampleCategorical},
    {"SampleComputeLocation", StepKind::kTraceSampleComputeLocation},
    {"Split", StepKind::kTraceSplit},
    {"Fuse", StepKind::kTraceFuse},
    {"Reorder", StepKind::kTraceReorder},
    {"Parallel", StepKind::kTraceParallel},
    {"Vectorize", StepKind::kTraceVectorize},
    {"Unroll", StepKind::kTraceUnroll},
    {"Bind", StepKind::kTraceBind},
    {"ComputeAt", StepKind::kTraceComputeAt},
    {"ReverseComputeAt", StepKind::kTraceReverseComputeAt},
    {"ComputeInline", StepKind::kTraceComputeInline},
    {"ReverseComputeInline", StepKind::kTraceReverseComputeInline},
    {"CacheRead", StepKind::kTraceCacheRead},
    {"ReindexCacheRead", StepKind::kTraceCacheRead},
    {"CacheWrite", StepKind::kTraceCacheWrite},
    {"ReindexCacheWrite", StepKind::kTraceCacheWrite},
    {"Annotate", StepKind::kTraceAnnotate},
    {"Unannotate", StepKind::kTraceUnannotate},
    {"GetBlock", StepKind::kTraceGetBlock},
    {"GetSBlock", StepKind::kTraceGetBlock},
    {"GetLoops", StepKind::kTraceGetLoops},
    {"GetChildBlocks", StepKind::kTraceGetChildBlocks},
    {"GetProducers", StepKind::kTraceGetProducersConsumers},
    {"GetConsumers", StepKind::kTraceGetProducersConsumers},
    {"GetOutputBlocks", StepKind::kTraceGetProducersConsumers},
    {"DecomposeReduction", StepKind::kTraceDecomposeReduction},
    {"RFactor", StepKind::kTraceRFactor},
    {"Blockize", StepKind::kTraceBlockize},
    {"Tensorize", StepKind::kTraceTensorize},
    {"StorageAlign", StepKind::kTraceStorageAlign},
    {"SetScope", StepKind::kTraceSetScope},
    {"TransformLayout", StepKind::kTraceTransformLayout},
    {"AddUnitLoop", StepKind::kTraceAddUnitLoop},
    {"EnterPostproc", StepKind::kTraceEnterPostproc},
};

// Canonical name of each trace kind (the first entry of kTraceNames with that kind).
std::string_view canonical_name(StepKind k) {
  if (k == StepKind::kTraceOther) return "Other";
  for (const auto& kn : kTraceNames) {
    if (kn.kind == k) return kn.name;
  }
  return "??";
}

namespace dom = simdjson::dom;

// An integer from a JSON number or bool (floats rounded); false for anything else.
bool as_int(dom::element e, int64_t* out) {
  switch (e.type()) {
    case dom::element_type::INT64: *out = e.get_int64().value_unsafe(); return true;
    case dom::element_type::UINT64: {
      const uint64_t u = e.get_uint64().value_unsafe();
      *out = u > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(u);
      return true;
    }
    case dom::element_type::DOUBLE: {
      const double d = e.get_double().value_unsafe();
      if (!std::isfinite(d) || std::fabs(d) > 9.0e18) return false;
      *out = static_cast<int64_t>(std::llround(d));
      return true;
    }
    case dom::element_type::BOOL: *out = e.get_bool().value_unsafe() ? 1 : 0; return true;
    default: return false;
  }
}

// A product of extents that saturates instead of overflowing.
int64_t saturating_mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  if (std::abs(a) > INT64_MAX / std::abs(b)) return INT64_MAX;
  return a * b;
}

// Walks a parsed trace; known values of integer RVs and loop extents are resolved on the way.
class TraceWalker {
 public:
  std::string walk(dom::element trace, std::vector<TransformStep>* steps) {
    dom::array top, insts;
    if (trace.get_array().get(top) || top.size() < 1) return "trace is not [[instructions], [decisions]]";
    if (top.at(0).get_array().get(insts)) return "trace[0] (the instructions) is not a list";
    std::unordered_map<int64_t, dom::element> decisions;
    if (top.size() > 1) {
      dom::array ds;
      if (top.at(1).get_array().get(ds)) return "trace[1] (the decisions) is not a list";
      for (dom::element d : ds) {
        dom::array pair;
        int64_t idx = 0;
        if (d.get_array().get(pair) || pair.size() != 2 || !as_int(pair.at(0).value_unsafe(), &idx)) {
          return "trace[1]: a decision is not [instruction_index, value]";
        }
        decisions[idx] = pair.at(1).value_unsafe();
      }
    }
    steps->clear();
    steps->reserve(std::min<size_t>(insts.size(), 4096));  // grows past that only for real instructions
    bool postproc = false;
    int64_t index = 0;
    for (dom::element inst : insts) {
      dom::array parts;
      std::string_view name;
      if (inst.get_array().get(parts) || parts.size() < 4 || parts.at(0).get_string().get(name)) {
        return fmt::format("trace[0][{}]: an instruction is not [kind, inputs, attrs, outputs]", index);
      }
      // dom::array::at() walks the array, so the lists are copied once into vectors for indexing;
      // a list longer than kMaxListSize (no real instruction has one) is refused.
      std::vector<dom::element> inputs, attrs, outputs;
      for (auto [i, list] : {std::pair{1, &inputs}, std::pair{2, &attrs}, std::pair{3, &outputs}}) {
        dom::array a;
        if (parts.at(static_cast<size_t>(i)).get_array().get(a)) {
          return fmt::format("trace[0][{}] ({}): inputs, attrs and outputs must be lists", index, name);
        }
        for (dom::element e : a) {
          if (list->size() == kMaxListSize) {
            return fmt::format("trace[0][{}] ({}): a list of more than {} elements", index, name, kMaxListSize);
          }
          list->push_back(e);
        }
      }
      TransformStep st;
      st.kind = trace_kind_of(name);
      if (st.kind == StepKind::kTraceEnterPostproc) postproc = true;
      st.ints = {static_cast<int64_t>(inputs.size()), static_cast<int64_t>(outputs.size()), 0, 0, postproc ? 1 : 0};
      st.list_pos = trace_slot::kList;
      st.n_list = 0;
      auto it = decisions.find(index);
      describe(st, name, inputs, attrs, outputs, it == decisions.end() ? nullptr : &it->second);
      st.n_list = static_cast<int32_t>(st.ints.size()) - st.list_pos;
      steps->push_back(std::move(st));
      ++index;
    }
    return {};
  }

 private:
  std::unordered_map<std::string, int64_t> value_;   // integer RVs ("v3") with a known value
  std::unordered_map<std::string, int64_t> extent_;  // loop RVs ("l7") with a known extent

  void set_value(TransformStep& st, int64_t v) {
    st.ints[trace_slot::kValue] = v;
    st.ints[trace_slot::kValueKnown] = 1;
  }
  // The value of an input that is a literal or a resolved integer RV.
  bool input_value(dom::element e, int64_t* out) const {
    if (as_int(e, out)) return true;
    std::string_view s;
    if (e.get_string().get(s)) return false;
    auto it = value_.find(std::string(s));
    if (it == value_.end()) return false;
    *out = it->second;
    return true;
  }
  bool loop_extent(dom::element e, int64_t* out) const {
    std::string_view s;
    if (e.get_string().get(s)) return false;
    auto it = extent_.find(std::string(s));
    if (it == extent_.end()) return false;
    *out = it->second;
    return true;
  }
  static std::string string_at(const std::vector<dom::element>& a, size_t i) {
    std::string_view s;
    if (i < a.size() && !a[i].get_string().get(s)) return std::string(s);
    return {};
  }
  void name_output(const std::vector<dom::element>& outputs, size_t i,
                   std::unordered_map<std::string, int64_t>& table, int64_t v) {
    std::string_view s;
    if (i < outputs.size() && !outputs[i].get_string().get(s)) table[std::string(s)] = v;
  }

  using List = std::vector<dom::element>;
  static constexpr size_t kMaxListSize = 65536;

  void describe(TransformStep& st, std::string_view name, const List& inputs, const List& attrs,
                const List& outputs, const dom::element* decision) {
    int64_t v = 0;
    switch (st.kind) {
      case StepKind::kTraceSamplePerfectTile: {
        // attrs: [n, max_innermost_factor]; SamplePartitionedTile's attrs[1] is a partition
        // position, not a factor, so it has no value.
        if (name == "SamplePerfectTile" && attrs.size() > 1 && as_int(attrs[1], &v)) set_value(st, v);
        dom::array tiles;
        if (decision && !decision->get_array().get(tiles)) {
          size_t i = 0;
          for (dom::element t : tiles) {
            int64_t x = 0;
            as_int(t, &x);
            st.ints.push_back(x);
            name_output(outputs, i++, value_, x);
          }
        }
        break;
      }
      case StepKind::kTraceSampleCategorical: {
        int64_t idx = 0;
        dom::array candidates;
        const bool have_candidates = attrs.size() > 0 && !attrs[0].get_array().get(candidates);
        if (decision && as_int(*decision, &idx)) {
          st.ints.push_back(idx);
          st.ints.push_back(have_candidates ? static_cast<int64_t>(candidates.size()) : 0);
          if (have_candidates && idx >= 0 && static_cast<size_t>(idx) < candidates.size() &&
              as_int(candidates.at(static_cast<size_t>(idx)).value_unsafe(), &v)) {
            set_value(st, v);
            name_output(outputs, 0, value_, v);
          }
        }
        break;
      }
      case StepKind::kTraceSampleComputeLocation:
        if (decision && as_int(*decision, &v)) set_value(st, v);
        break;
      case StepKind::kTraceSplit: {
        int64_t extent = 0;
        const bool known_extent = inputs.size() > 0 && loop_extent(inputs[0], &extent);
        if (known_extent) set_value(st, extent);
        // Factors: inputs[1..]; at most one may be null (inferred from the extent).
        int64_t product = 1;
        int unknown = 0, null_at = -1;
        for (size_t i = 1; i < inputs.size(); ++i) {
          int64_t f = 0;
          if (input_value(inputs[i], &f) && f > 0) {
            product = saturating_mul(product, f);
          } else {
            f = 0;
            ++unknown;
            if (inputs[i].is_null()) null_at = static_cast<int>(i - 1);
          }
          st.ints.push_back(f);
        }
        if (unknown == 1 && null_at >= 0 && known_extent && product > 0) {
          st.ints[st.list_pos + null_at] = extent / product + (extent % product != 0);  // ceil, no overflow
        }
        for (size_t i = 0; i + 1 < inputs.size(); ++i) {
          if (st.ints[st.list_pos + i] > 0) name_output(outputs, i, extent_, st.ints[st.list_pos + i]);
        }
        break;
      }
      case StepKind::kTraceFuse: {
        int64_t product = 1;
        bool all = inputs.size() > 0;
        for (dom::element in : inputs) {
          int64_t e = 0;
          if (in.is_string() && loop_extent(in, &e)) {
            product = saturating_mul(product, e);
          } else if (in.is_string()) {
            all = false;
          }
        }
        if (all) {
          set_value(st, product);
          name_output(outputs, 0, extent_, product);
        }
        break;
      }
      case StepKind::kTraceParallel:
      case StepKind::kTraceVectorize:
      case StepKind::kTraceUnroll:
      case StepKind::kTraceBind:
        if (inputs.size() > 0 && loop_extent(inputs[0], &v)) set_value(st, v);
        if (st.kind == StepKind::kTraceBind) st.str = string_at(attrs, 0);
        break;
      case StepKind::kTraceComputeAt:
      case StepKind::kTraceReverseComputeAt:
        if (attrs.size() > 0 && as_int(attrs[0], &v)) set_value(st, v);
        break;
      case StepKind::kTraceCacheRead:
      case StepKind::kTraceCacheWrite:
      case StepKind::kTraceSetScope:
        if (attrs.size() > 0 && as_int(attrs[0], &v)) set_value(st, v);
        st.str = string_at(attrs, 1);
        break;
      case StepKind::kTraceAnnotate:
        if (inputs.size() > 1 && input_value(inputs[1], &v)) set_value(st, v);
        st.str = string_at(attrs, 0);
        break;
      case StepKind::kTraceUnannotate:
        st.str = string_at(attrs, 0);
        break;
      case StepKind::kTraceOther:
        st.str = std::string(name.substr(0, 64));
        break;
      default:
        break;
    }
  }
};

thread_local dom::parser tls_parser;

}  // namespace

StepKind trace_kind_of(std::string_view name) {
  for (const auto& kn : kTraceNames) {
    if (kn.name == name) return kn.kind;
  }
  return StepKind::kTraceOther;
}

std::string_view trace_kind_name(StepKind k) { return canonical_name(k); }

std::string parse_trace_json(std::string_view trace_json, std::vector<TransformStep>* steps) {
  dom::element root;
  if (auto e = tls_parser.parse(trace_json.data(), trace_json.size(), true).get(root)) {
    return std::string("invalid JSON: ") + simdjson::error_message(e);
  }
  TraceWalker w;
  return w.walk(root, steps);
}

namespace {

// Target JSON {"kind": "llvm", "mcpu": ..., "num-cores": 8, ...} -> "llvm -mcpu=... -mtriple=..." and
// hw_params [num-cores], so that normalize_target names the platform as for an Ansor target string.
void read_target(dom::element t, MeasureRecord* r) {
  r->target.clear();
  r->hw_params.clear();
  dom::object o;
  std::string_view s;
  if (!t.get_string().get(s)) {  // older databases store a target string
    r->target = std::string(s);
    return;
  }
  if (t.get_object().get(o)) return;
  if (!o["kind"].get_string().get(s)) r->target = std::string(s);
  for (const char* key : {"mcpu", "mtriple", "arch", "model", "device"}) {
    if (!o[key].get_string().get(s) && !s.empty()) r->target += fmt::format(" -{}={}", key, s);
  }
  int64_t cores = 0;
  if (!o["num-cores"].get_int64().get(cores) && cores > 0) r->hw_params.push_back(cores);
}

}  // namespace

std::string parse_tuning_record_json(std::string_view line, const std::vector<std::string>& workload_keys,
                                     const std::string& table_name, MeasureRecord* r) {
  r->clear_all_but_steps();
  r->version = "ms";
  dom::element root;
  if (auto e = tls_parser.parse(line.data(), line.size(), true).get(root)) {
    return std::string("invalid JSON: ") + simdjson::error_message(e);
  }
  dom::array top, rec;
  int64_t wl = 0;
  if (root.get_array().get(top) || top.size() != 2 || !as_int(top.at(0).value_unsafe(), &wl) ||
      top.at(1).get_array().get(rec) || rec.size() < 3) {
    return "not a MetaSchedule tuning record [workload_index, [trace, run_secs, target, args_info]]";
  }
  if (wl < 0 || static_cast<size_t>(wl) >= workload_keys.size()) {
    return workload_keys.empty()
               ? fmt::format("workload index {}: no workload table ({}) beside this file", wl, table_name)
               : fmt::format("workload index {} not in {} ({} workloads)", wl, table_name, workload_keys.size());
  }
  r->workload_key = "ms:" + workload_keys[static_cast<size_t>(wl)];
  TraceWalker w;
  if (std::string why = w.walk(rec.at(0).value_unsafe(), &r->steps); !why.empty()) return "trace: " + why;
  dom::element secs = rec.at(1).value_unsafe();
  dom::array arr;
  if (!secs.is_null()) {
    if (secs.get_array().get(arr)) return "run_secs is neither a list nor null";
    for (dom::element c : arr) {
      double d = 0;
      if (c.get_double().get(d)) {
        int64_t i = 0;
        if (!as_int(c, &i)) return "run_secs holds a non-number";
        d = static_cast<double>(i);
      }
      r->costs.push_back(d);
    }
  }
  if (r->costs.empty()) {
    r->error_no = static_cast<int>(MeasureError::kUnknown);
  } else {
    for (double c : r->costs) {
      if (c >= 1e9) r->error_no = static_cast<int>(MeasureError::kUnknown);
    }
  }
  read_target(rec.at(2).value_unsafe(), r);
  return {};
}

bool is_workload_table(const std::string& path) {
  const std::string name = std::filesystem::path(path).filename().string();
  return name.rfind("database_workload", 0) == 0;
}

std::string workload_table_of(const std::string& tuning_record_path) {
  namespace fs = std::filesystem;
  const fs::path p(tuning_record_path);
  std::string name = p.filename().string();
  const auto at = name.find("tuning_record");
  if (at == std::string::npos) return {};
  const std::string base = name.substr(0, at) + "workload";
  for (const char* ext : {".json", ".json.gz"}) {
    const fs::path cand = p.parent_path() / (base + ext);
    std::error_code ec;
    if (fs::exists(cand, ec)) return cand.string();
  }
  return (p.parent_path() / (base + ".json")).string();
}

std::vector<std::string> read_workload_table(const std::string& path, ReadStats* stats) {
  std::vector<std::string> keys;
  std::error_code ec;
  if (path.empty() || !std::filesystem::exists(path, ec)) return keys;
  LineReader reader(path);
  std::string_view line;
  while (reader.next(&line)) {
    dom::element root;
    dom::array a;
    std::string_view hash;
    if (tls_parser.parse(line.data(), line.size(), true).get(root) || root.get_array().get(a) || a.size() < 1 ||
        a.at(0).value_unsafe().get_string().get(hash)) {
      // Keep the index order: a bad line still takes its index, under a key naming it.
      stats->skip(path, reader.line_number(), "not a MetaSchedule workload line [structural_hash, module]");
      keys.push_back(fmt::format("bad-workload-line-{}", reader.line_number()));
      continue;
    }
    keys.emplace_back(hash);
  }
  return keys;
}

}  // namespace tclm
