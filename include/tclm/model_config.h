// tclm/model_config.h: the hyper-parameters of the Mamba cost model (TCL-SPEC §4), without libtorch.
//
// Shared by the libtorch model (src/model/mamba.h), which trains it, and the libtorch-free inference
// engine (tclm/infer.h), which scores with it. Stored as JSON in every weights file (tclm/weights.h).
#pragma once

#include <string>

namespace tclm {

/// WeightsFile::model_kind of a Mamba cost model.
inline constexpr char kMambaModelKind[] = "mamba";

struct MambaConfig {
  int n_features = 0;   // F, from the feature encoding
  int d_model = 128;
  int n_layers = 1;
  int d_state = 8;
  int d_conv = 4;
  int expand = 1;
  int dt_rank = 0;      // 0 = ceil(d_model / 16)
  int head_hidden = 0;  // 0 = d_model
  float dropout = 0.0f; // on the pooled vector before the head (used by MC-dropout sampling)

  int resolved_dt_rank() const;
  int resolved_head_hidden() const;
  int d_inner() const { return expand * d_model; }
  std::string to_json() const;
  /// Flat object with exactly the nine fields above (to_json's output). Throws tclm::Error naming the
  /// field on a missing, repeated, unknown, mistyped or out-of-range field, or on malformed JSON.
  static MambaConfig from_json(const std::string& json);
  /// Throws tclm::Error if a field is out of range (every size in [1, 65536], dt_rank and head_hidden
  /// in [0, 65536], expand * d_model <= 65536, dropout in [0, 1)); `where` starts the message.
  void validate(const std::string& where) const;
};

}  // namespace tclm
