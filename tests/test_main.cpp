// tests/test_main.cpp: GoogleTest's main, after the CLI's runtime settings (common/runtime_env.h:
// passive OpenMP waiters, OpenBLAS's kernels for this CPU), so that the tests train as `tclm` does.
#include <gtest/gtest.h>

#include "common/runtime_env.h"

int main(int argc, char** argv) {
  tclm::reexec_with_runtime_env(argv);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
