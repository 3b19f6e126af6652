// common/runtime_env.cpp: see runtime_env.h.
#include "common/runtime_env.h"

#include <dlfcn.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>

namespace tclm {

std::string openblas_coretype_upgrade(std::string_view current, bool avx512, bool avx2_fma) {
  // OpenBLAS's x86-64 kernel sets (driver/others/dynamic.c) for instruction sets before AVX2.
  static constexpr std::array<std::string_view, 19> kPreAvx2 = {
      "Katmai", "Coppermine", "Northwood", "Prescott", "Banias",   "Atom",   "Core2",
      "Penryn", "Dunnington", "Nehalem",   "Athlon",   "Opteron",  "Opteron_SSE3", "Barcelona",
      "Nano",   "Sandybridge", "Bobcat",   "Bulldozer", "Piledriver"};
  const bool old = std::any_of(kPreAvx2.begin(), kPreAvx2.end(), [&](std::string_view name) {
    return name.size() == current.size() && ::strncasecmp(name.data(), current.data(), name.size()) == 0;
  });
  if (!old) return "";
  if (avx512) return "SkylakeX";
  if (avx2_fma) return "Haswell";
  return "";
}

std::string loaded_openblas_corename() {
  using CoreName = char* (*)();
  auto fn = reinterpret_cast<CoreName>(::dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (fn == nullptr) return "";
  const char* name = fn();
  return name == nullptr ? "" : name;
}

bool cpu_has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl");
}

bool cpu_has_avx2_fma() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

void reexec_with_runtime_env(char** argv) {
  bool changed = false;
  if (std::getenv("OMP_WAIT_POLICY") == nullptr) {
    ::setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    changed = true;
  }
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr) {
    const std::string core = openblas_coretype_upgrade(loaded_openblas_corename(), cpu_has_avx512(), cpu_has_avx2_fma());
    if (!core.empty()) {
      ::setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
      changed = true;
    }
  }
  if (changed) ::execv("/proc/self/exe", argv);  // returns only on failure: then go on with the defaults
}

}  // namespace tclm
