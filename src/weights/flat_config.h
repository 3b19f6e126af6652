// weights/flat_config.h: reads a model's hyper-parameters from a flat JSON object of integer fields and
// one float field ("dropout"), as every model config stores them (MambaConfig, BaselineConfig).
#pragma once

#include <string>
#include <vector>

namespace tclm {

struct FlatIntField {
  const char* name;
  int* value;
};

/// Fills every field from `json`. Throws tclm::Error starting with `where` on invalid JSON, a
/// non-object, an unknown, repeated, missing or mistyped field, or an integer outside [min_int, int max].
void parse_flat_config(const std::string& json, const std::string& where, const std::vector<FlatIntField>& ints,
                       float* dropout, int min_int);

}  // namespace tclm
