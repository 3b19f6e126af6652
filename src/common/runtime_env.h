// common/runtime_env.h: settings of the OpenMP and OpenBLAS runtimes that must be in the environment
// before those libraries load, applied by re-executing the process once. Used by the CLI
// (tools/tclm.cpp), the benchmarks and the test binaries, so that all of them measure the same thing.
#pragma once

#include <string>
#include <string_view>

namespace tclm {

/// The OpenBLAS kernel set to request with OPENBLAS_CORETYPE, or "" when nothing should change.
///
/// OpenBLAS built with DYNAMIC_ARCH (Debian's 0.3.21) picks its kernels from the CPUID family and
/// model. For a model it does not know, such as the generic "Intel(R) Xeon(R) Processor" of many
/// cloud VMs, it falls back to "Prescott" (SSE3) kernels even when the CPU has AVX-512: measured on
/// such a VM, a 1024^3 sgemm on one core ran at 20 GFLOP/s against 79 with "SkylakeX", and a
/// `tclm train` epoch took 2.1x the CPU time.
///
/// `current` is what the loaded OpenBLAS reports (openblas_get_corename(), case-insensitive);
/// `avx512` means AVX-512 F, CD, BW, DQ and VL (what OpenBLAS's SkylakeX kernels use), `avx2_fma` AVX2
/// and FMA (its Haswell kernels). Returns "SkylakeX" or "Haswell" only when `current` is a kernel set
/// for an instruction set older than AVX2 and the CPU has the newer one; any other choice of OpenBLAS
/// (Haswell, Zen, SkylakeX, SapphireRapids...) is left alone.
std::string openblas_coretype_upgrade(std::string_view current, bool avx512, bool avx2_fma);

/// The kernel set of the OpenBLAS loaded in this process (openblas_get_corename(), looked up with
/// dlsym), or "" when the process's BLAS is not OpenBLAS.
std::string loaded_openblas_corename();

/// Whether this CPU has what openblas_coretype_upgrade calls `avx512` / `avx2_fma`.
bool cpu_has_avx512();
bool cpu_has_avx2_fma();

/// Re-executes /proc/self/exe once, with the same arguments, when the environment lacks
///  * OMP_WAIT_POLICY: set to PASSIVE. libgomp reads it when it loads; its default (spinning
///    waiters) fights OpenBLAS's threads for the cores and costs 15-25% of a training step on 2 cores
///    (docs/benchmarks.md);
///  * OPENBLAS_CORETYPE: set to openblas_coretype_upgrade(...) when that is not empty.
/// A variable the user has set is never changed. Returns (without re-executing) when there is
/// nothing to set, or when execv fails: then the process goes on with the runtimes' defaults.
void reexec_with_runtime_env(char** argv);

}  // namespace tclm
