#!/usr/bin/env bash
# The whole test suite: installs dependencies, builds, runs every test with CTest.
# Tests that need ../shared/data skip themselves when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
jobs=$(nproc 2>/dev/null || echo 2)
ctest --test-dir build --output-on-failure -j"$jobs" --timeout 900
