// Runtime settings applied before OpenMP and OpenBLAS load (common/runtime_env.h).
#include "common/runtime_env.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace tclm {
namespace {

TEST(RuntimeEnv, UpgradesOnlyKernelSetsOlderThanTheCpu) {
  // The case this exists for: OpenBLAS 0.3.21 on a cloud Xeon whose CPUID model it does not know.
  EXPECT_EQ(openblas_coretype_upgrade("Prescott", true, true), "SkylakeX");
  EXPECT_EQ(openblas_coretype_upgrade("prescott", false, true), "Haswell");  // names compare case-insensitively
  EXPECT_EQ(openblas_coretype_upgrade("Sandybridge", false, true), "Haswell");  // AVX without AVX2
  EXPECT_EQ(openblas_coretype_upgrade("Core2", true, true), "SkylakeX");
  // A CPU without AVX2 keeps its old kernels: they are the right ones.
  EXPECT_EQ(openblas_coretype_upgrade("Prescott", false, false), "");
  // Whatever OpenBLAS chose for an AVX2-or-newer CPU is its own decision (Zen on an AVX-512 Zen 4,
  // Haswell where it judged AVX-512 slower): never second-guessed.
  EXPECT_EQ(openblas_coretype_upgrade("Haswell", true, true), "");
  EXPECT_EQ(openblas_coretype_upgrade("Zen", true, true), "");
  EXPECT_EQ(openblas_coretype_upgrade("SkylakeX", true, true), "");
  EXPECT_EQ(openblas_coretype_upgrade("SapphireRapids", true, true), "");
  // Not OpenBLAS (no openblas_get_corename), or a name that only starts like an old one.
  EXPECT_EQ(openblas_coretype_upgrade("", true, true), "");
  EXPECT_EQ(openblas_coretype_upgrade("Prescott2", true, true), "");
}

// This binary's main (tests/test_main.cpp) goes through reexec_with_runtime_env as the CLI does, so
// the OpenBLAS loaded here must run kernels of this CPU's instruction set. On a VM whose CPUID
// OpenBLAS does not know, this fails without the re-execution (it reports "Prescott").
TEST(RuntimeEnv, LoadedOpenBlasRunsKernelsOfThisCpu) {
  EXPECT_NE(std::getenv("OMP_WAIT_POLICY"), nullptr);
  const std::string core = loaded_openblas_corename();
  if (core.empty()) GTEST_SKIP() << "the BLAS of this process is not OpenBLAS";
  const char* asked = std::getenv("OPENBLAS_CORETYPE");
  if (asked != nullptr && !openblas_coretype_upgrade(asked, cpu_has_avx512(), cpu_has_avx2_fma()).empty())
    GTEST_SKIP() << "OPENBLAS_CORETYPE=" << asked << " was set by the user";
  EXPECT_EQ(openblas_coretype_upgrade(core, cpu_has_avx512(), cpu_has_avx2_fma()), "")
      << "OpenBLAS runs its " << core << " kernels on a CPU with AVX2" << (cpu_has_avx512() ? " and AVX-512" : "");
}

}  // namespace
}  // namespace tclm
