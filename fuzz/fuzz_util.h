// fuzz/fuzz_util.h: helpers shared by the libFuzzer harnesses (fuzz_*.cpp) and their replay build.
//
// * fuzz_temp_dir(): one private directory per process (made once, reused by every input, removed at
//   exit) under $TMPDIR, else /dev/shm, else /tmp, for the harnesses that must hand a file path to
//   the library (read_record_file).
// * fuzz_fail(): a broken property (e.g. a record that record_to_json writes but the parser refuses)
//   is a finding: print what and why, then abort() so that libFuzzer saves the input.
// * finite_features(): the featurizer must never produce NaN or inf, whatever the steps hold.
#pragma once

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "tclm/feature.h"
#include "tclm/record.h"

namespace tclm_fuzz {

[[noreturn]] inline void fuzz_fail(std::string_view property, std::string_view detail) {
  std::fprintf(stderr, "\n==== tclm fuzz property violated: %.*s\n%.*s\n", static_cast<int>(property.size()),
               property.data(), static_cast<int>(detail.size()), detail.data());
  std::fflush(stderr);
  std::abort();
}

namespace detail {
struct TempDir {
  std::string path;
  TempDir() {
    std::vector<std::string> bases;
    if (const char* t = std::getenv("TMPDIR"); t != nullptr && *t != '\0') bases.emplace_back(t);
    bases.emplace_back("/dev/shm");
    bases.emplace_back("/tmp");
    for (const std::string& base : bases) {
      std::string templ = base + "/tclm-fuzz-XXXXXX";
      if (::mkdtemp(templ.data()) != nullptr) {
        path = templ;
        return;
      }
    }
    fuzz_fail("harness set-up", "cannot create a temporary directory under $TMPDIR, /dev/shm or /tmp");
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};
}  // namespace detail

/// The process's private temporary directory (created at the first call).
inline const std::string& fuzz_temp_dir() {
  static const detail::TempDir dir;
  return dir.path;
}

/// Writes `size` bytes to `path` (replacing it); a failure is a harness problem, not a finding, but it
/// must not pass silently either.
inline void write_bytes(const std::string& path, const void* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) fuzz_fail("harness set-up", "cannot write " + path);
  if (size > 0 && std::fwrite(data, 1, size, f) != size) fuzz_fail("harness set-up", "cannot write " + path);
  if (std::fclose(f) != 0) fuzz_fail("harness set-up", "cannot close " + path);
}

/// Splits `text` into lines as LineReader does ('\n', a trailing '\r' dropped) and calls fn(line).
template <typename Fn>
void for_each_line(std::string_view text, Fn&& fn) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    fn(line);
    start = end + 1;
  }
}

/// Featurizes `steps` (program context included) and aborts if any feature is NaN or infinite.
inline void check_finite_features(const std::vector<tclm::TransformStep>& steps, const char* what) {
  if (steps.empty()) return;
  static std::vector<float> x(static_cast<size_t>(tclm::kDefaultMaxSteps) * tclm::kStepFeatureDim);
  const int n = tclm::featurize_program(steps, tclm::kDefaultMaxSteps, x.data());
  for (size_t i = 0; i < static_cast<size_t>(n) * tclm::kStepFeatureDim; ++i) {
    if (!std::isfinite(x[i])) {
      const size_t step = i / tclm::kStepFeatureDim, slot = i % tclm::kStepFeatureDim;
      std::string ints;
      for (int64_t v : steps[step].ints) ints += std::to_string(v) + " ";
      fuzz_fail("featurize_program produced a non-finite feature",
                std::string(what) + ": step " + std::to_string(step) + " (" +
                    std::string(tclm::step_kind_name(steps[step].kind)) + ", ints " + ints + ") slot " +
                    std::to_string(slot) + " = " + std::to_string(x[i]));
    }
  }
  // The same steps one at a time, without program context (featurize_step's contract).
  float row[tclm::kStepFeatureDim];
  for (const tclm::TransformStep& st : steps) {
    tclm::featurize_step(tclm::view_of(st), row);
    for (float v : row) {
      if (!std::isfinite(v)) fuzz_fail("featurize_step produced a non-finite feature", what);
    }
  }
}

}  // namespace tclm_fuzz
