// weights/model_config.cpp: MambaConfig JSON and validation (no libtorch; tclm/model_config.h).
#include "tclm/model_config.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <cstdint>
#include <limits>

#include "tclm/error.h"
#include "weights/flat_config.h"

namespace tclm {
namespace {

constexpr int kMaxDim = 1 << 16;  // sanity bound on every size in a config (guards huge allocations)

}  // namespace

void MambaConfig::validate(const std::string& where) const {
  auto check = [&](const char* name, int value, int lo) {
    if (value < lo || value > kMaxDim) {
      throw Error(fmt::format("{}: {} = {} is out of range [{}, {}]", where, name, value, lo, kMaxDim));
    }
  };
  check("n_features", n_features, 1);
  check("d_model", d_model, 1);
  check("n_layers", n_layers, 1);
  check("d_state", d_state, 1);
  check("d_conv", d_conv, 1);
  check("expand", expand, 1);
  check("dt_rank", dt_rank, 0);
  check("head_hidden", head_hidden, 0);
  if (static_cast<int64_t>(expand) * d_model > kMaxDim) {
    throw Error(fmt::format("{}: expand * d_model = {} exceeds {}", where,
                            static_cast<int64_t>(expand) * d_model, kMaxDim));
  }
  if (!(dropout >= 0.0f && dropout < 1.0f)) {
    throw Error(fmt::format("{}: dropout = {} must be in [0, 1)", where, dropout));
  }
}

int MambaConfig::resolved_dt_rank() const { return dt_rank > 0 ? dt_rank : (d_model + 15) / 16; }

int MambaConfig::resolved_head_hidden() const { return head_hidden > 0 ? head_hidden : d_model; }

std::string MambaConfig::to_json() const {
  // "{}" on a float prints the shortest text that reads back to the same float.
  return fmt::format(
      "{{\"n_features\":{},\"d_model\":{},\"n_layers\":{},\"d_state\":{},\"d_conv\":{},\"expand\":{},"
      "\"dt_rank\":{},\"head_hidden\":{},\"dropout\":{}}}",
      n_features, d_model, n_layers, d_state, d_conv, expand, dt_rank, head_hidden, dropout);
}

void parse_flat_config(const std::string& json, const std::string& where, const std::vector<FlatIntField>& ints,
                       float* dropout, int min_int) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.parse(json).get(root)) {
    throw Error(fmt::format("{}: not valid JSON ({})", where, simdjson::error_message(err)));
  }
  simdjson::dom::object obj;
  if (root.get_object().get(obj)) throw Error(fmt::format("{}: expected an object", where));
  std::vector<bool> seen(ints.size(), false);
  bool dropout_seen = false;
  for (auto [key, value] : obj) {
    if (key == "dropout") {
      double v = 0.0;
      if (dropout_seen) throw Error(fmt::format("{}: field \"dropout\" appears twice", where));
      if (value.get_double().get(v)) throw Error(fmt::format("{}: \"dropout\" must be a number", where));
      *dropout = static_cast<float>(v);
      dropout_seen = true;
      continue;
    }
    size_t i = 0;
    while (i < ints.size() && key != ints[i].name) ++i;
    if (i == ints.size()) throw Error(fmt::format("{}: unknown field \"{}\"", where, key));
    if (seen[i]) throw Error(fmt::format("{}: field \"{}\" appears twice", where, key));
    int64_t v = 0;
    if (value.get_int64().get(v)) {
      throw Error(fmt::format("{}: \"{}\" must be an integer, got {}", where, key, simdjson::minify(value)));
    }
    if (v < min_int || v > std::numeric_limits<int>::max()) {
      throw Error(fmt::format("{}: \"{}\" = {} is out of range", where, key, v));
    }
    *ints[i].value = static_cast<int>(v);
    seen[i] = true;
  }
  for (size_t i = 0; i < ints.size(); ++i) {
    if (!seen[i]) throw Error(fmt::format("{}: missing field \"{}\"", where, ints[i].name));
  }
  if (!dropout_seen) throw Error(fmt::format("{}: missing field \"dropout\"", where));
}

MambaConfig MambaConfig::from_json(const std::string& json) {
  const std::string where = "Mamba config JSON";
  MambaConfig cfg;
  parse_flat_config(json, where,
                    {{"n_features", &cfg.n_features}, {"d_model", &cfg.d_model}, {"n_layers", &cfg.n_layers},
                     {"d_state", &cfg.d_state}, {"d_conv", &cfg.d_conv}, {"expand", &cfg.expand},
                     {"dt_rank", &cfg.dt_rank}, {"head_hidden", &cfg.head_hidden}},
                    &cfg.dropout, std::numeric_limits<int>::min());
  cfg.validate(where);
  return cfg;
}

}  // namespace tclm
