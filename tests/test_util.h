// tests/test_util.h: helpers shared by the test files.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <zlib.h>

namespace tclm::test {

/// The repository root (compile-time) for fixtures under tests/data and data/.
inline std::string source_dir() { return TCLM_SOURCE_DIR; }

/// ../shared/data next to the repository, or "" when absent (tests that need it skip).
inline std::string shared_data_dir() {
  if (const char* env = std::getenv("TCLM_SHARED_DATA")) return env;
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

}  // namespace tclm::test
