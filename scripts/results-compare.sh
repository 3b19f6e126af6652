#!/usr/bin/env bash
# Reproduces docs/model-study.md: Mamba against the baselines (tclm compare) on two GPUs and one CPU of
# ../shared/data, and the Mamba hyper-parameter sweep (tclm sweep, the paper's Table 2) on one GPU.
# Usage: scripts/results-compare.sh [extra args for both commands]   (needs ../shared/data; ~1.5 h on 2 cores)
# Env: TCLM_RESULTS_OUT (default out/model-study), TCLM_BIN, SKIP_COMPARE=1, SKIP_SWEEP=1.
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${TCLM_SHARED_DATA:-../shared/data}
out=${TCLM_RESULTS_OUT:-out/model-study}
bin=${TCLM_BIN:-./build/tclm}
common=(--cache-dir out/cache --epochs 6 --patience 3 --quiet)
mkdir -p "$out"
if [ -z "${SKIP_COMPARE:-}" ]; then
  for spec in "k80=$shared/roller_osdi22/k80" "v100=$shared/roller_osdi22/v100" \
              "platinum8358=$shared/tlcbench_platinum8358"; do
    name=${spec%%=*}
    echo "== compare $name" >&2
    "$bin" compare -d "$spec" -o "$out/compare-$name" "${common[@]}" "$@" | tee "$out/compare-$name.txt"
  done
fi
if [ -z "${SKIP_SWEEP:-}" ]; then
  echo "== sweep k80" >&2
  "$bin" sweep -d "k80=$shared/roller_osdi22/k80" --grid configs/sweep-table2.json -o "$out/sweep-k80" \
    "${common[@]}" "$@" | tee "$out/sweep-k80.txt"
fi
