// tests/test_util.h: helpers shared by the test files.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include "tclm/error.h"
#include "tclm/feature.h"
#include "tclm/model_config.h"

namespace tclm::test {

/// The repository root (compile-time) for fixtures under tests/data and data/.
inline std::string source_dir() { return TCLM_SOURCE_DIR; }

/// ../shared/data next to the repository, or "" when absent (tests that need it skip).
inline std::string shared_data_dir() {
  // $TCLM_SHARED_DATA overrides the location; a path that is not a directory means "absent" (skip).
  if (const char* env = std::getenv("TCLM_SHARED_DATA")) return std::filesystem::is_directory(env) ? env : "";
  auto p = std::filesystem::path(source_dir()).parent_path() / "shared" / "data";
  return std::filesystem::is_directory(p) ? p.string() : "";
}

/// A fresh temporary directory, removed when the object dies.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tclm_test_XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

inline void write_gzip(const std::string& path, const std::string& text) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
}

/// The message of the tclm::Error that `f()` must throw; a test failure and "(no error)" otherwise.
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a tclm::Error";
  return "(no error)";
}

/// A model config for the current feature encoding (dt_rank / head_hidden 0 = derived defaults).
inline MambaConfig make_config(int d_model = 128, int n_layers = 1, int d_state = 8, int d_conv = 4, int expand = 1,
                               int dt_rank = 0, int head_hidden = 0) {
  MambaConfig c;
  c.n_features = kStepFeatureDim;
  c.d_model = d_model;
  c.n_layers = n_layers;
  c.d_state = d_state;
  c.d_conv = d_conv;
  c.expand = expand;
  c.dt_rank = dt_rank;
  c.head_hidden = head_hidden;
  return c;
}

}  // namespace tclm::test
