#!/usr/bin/env bash
# The C++ and CLI tests under AddressSanitizer (+ LeakSanitizer) and UndefinedBehaviorSanitizer.
# See --help and docs/reliability.md#sanitizers.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

usage() {
  cat <<'EOF'
Usage: scripts/test-sanitizers.sh [OPTIONS] [-- CTEST_ARGS...]

Builds tclm with -DTCLM_SANITIZE=address,undefined,float-cast-overflow (every target: the libraries,
the tclm tool, the GoogleTest binaries) into ./build-asan and runs the C++ (GoogleTest) and CLI
(cli.*) CTest tests there. Any AddressSanitizer, LeakSanitizer or UBSan report fails the test that
produced it (halt_on_error, -fno-sanitize-recover=all). Exit status: CTest's (0 = every test passed).

Options:
  --sanitizers LIST   -fsanitize= list (default: address,undefined,float-cast-overflow; GCC
                      leaves float->int overflow checks out of `undefined`)
  --build-type TYPE   CMake build type (default: RelWithDebInfo, i.e. -O2 -g; Debug = -O0 -g is
                      several times slower under ASan)
  --build-dir DIR     build directory (default: build-asan)
  --timeout SECONDS   per-test CTest timeout (default: 1800; the slowest tests, cli.resume_after_kill
                      and Learning.BeatsRandomRankingOnHeldOutWorkloads, took 2-6 minutes each
                      sanitized on a busy 2-core machine; see docs/reliability.md)
  --no-native         configure with -DTCLM_NATIVE=OFF (no -march=native: the inference engine's
                      generic, non-AVX-512 code paths); use with another --build-dir
  --no-build          run the tests of an existing build only
  -h, --help          this text
  CTEST_ARGS          passed to ctest, e.g. -- -R '^cli\.' or -- -R Selective --verbose

Not run here: the Python tests (python.core, python.metaschedule, python.ansor). They run the
extension module tclm._tclm inside the (unsanitized) Python interpreter and the PyPI TVM wheels;
the package is built separately (pip install ./python) without the sanitizers, and an ASan runtime
would have to be preloaded into python itself. The code they exercise (tclm_core: the inference
engine, featurizer, samplers) is covered by the C++ and CLI tests here. Benchmarks are not built
(-DTCLM_BUILD_BENCH=OFF): they are not tests.

Environment:
  CMAKE_BUILD_PARALLEL_LEVEL  build jobs (default: nproc); CTest runs nproc tests at a time
  ASAN_OPTIONS, UBSAN_OPTIONS, LSAN_OPTIONS  appended to the defaults below (later entries win)
  OMP_WAIT_POLICY is unset so that the CLI tests go through tclm's re-execution of itself
  (tools/tclm.cpp: execv("/proc/self/exe") to set it) exactly as a user's run does.

Defaults:
  ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=0:detect_stack_use_after_return=1:
               check_initialization_order=1:strict_init_order=1:detect_odr_violation=2:symbolize=1
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:report_error_type=1
  LSAN_OPTIONS=suppressions=scripts/sanitizer-suppressions/lsan.supp:print_suppressions=0
    (the suppressions cover leaks inside third-party libraries only; each says why)

Examples:
  scripts/test-sanitizers.sh
  scripts/test-sanitizers.sh --no-build -- -R '^cli\.' --output-on-failure
  scripts/test-sanitizers.sh --sanitizers undefined --build-dir build-ubsan
EOF
}

sanitizers=address,undefined,float-cast-overflow
build_type=RelWithDebInfo
build_dir="build-asan"
timeout=1800
build=1
native=ON
ctest_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --sanitizers) sanitizers=$2; shift 2 ;;
    --build-type) build_type=$2; shift 2 ;;
    --build-dir) build_dir=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    --no-native) native=OFF; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; ctest_args=("$@"); break ;;
    *) echo "test-sanitizers: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

jobs=$(nproc 2>/dev/null || echo 2)
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$jobs}

supp=$root/scripts/sanitizer-suppressions/lsan.supp
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=0:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:detect_odr_violation=2:symbolize=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:report_error_type=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
if command -v llvm-symbolizer >/dev/null; then
  export ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-$(command -v llvm-symbolizer)}
fi
unset OMP_WAIT_POLICY

if [ "$build" = 1 ]; then
  bash scripts/setup.sh
  start=$(date +%s)
  cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE="$build_type" -DTCLM_SANITIZE="$sanitizers" \
        -DTCLM_NATIVE="$native" -DTCLM_BUILD_TESTS=ON -DTCLM_BUILD_BENCH=OFF >/dev/null
  cmake --build "$build_dir"
  echo "test-sanitizers: configure + build took $(( $(date +%s) - start )) s" >&2
fi

start=$(date +%s)
rc=0
ctest --test-dir "$build_dir" --output-on-failure -j"$jobs" --timeout "$timeout" \
      -E '^python\.' "${ctest_args[@]}" || rc=$?
echo "test-sanitizers: tests took $(( $(date +%s) - start )) s (python.* excluded: see --help)" >&2
exit "$rc"
