#!/usr/bin/env bash
# Reproduces docs/transfer.md: the TCL pipeline (tclm transfer) on the GPUs of ../shared/data, two orders,
# with its baselines and ablations. Usage: scripts/results-transfer.sh [extra transfer args]
# Env: TCLM_RESULTS_OUT (default out/transfer-study), TCLM_BIN, SEEDS (default 2).
# Sources use a quarter of their programs (--source-fraction 0.25) to fit the study in ~1 h on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${TCLM_SHARED_DATA:-../shared/data}
out=${TCLM_RESULTS_OUT:-out/transfer-study}
bin=${TCLM_BIN:-./build/tclm}
mkdir -p "$out"
gpus=(-d "k80=$shared/roller_osdi22/k80" -d "v100=$shared/roller_osdi22/v100" -d "mi50=$shared/roller_osdi22/mi50")
common=(--cache-dir out/cache --budget 0.1 --source-fraction 0.25 --epochs-cl 4 --epochs-kd 4 --epochs 6 --quiet)
echo "== transfer k80,v100 -> mi50" >&2
"$bin" transfer "${gpus[@]}" --sources k80,v100 --target mi50 --seeds "${SEEDS:-2}" -o "$out/k80-v100-to-mi50" \
  "${common[@]}" "$@" | tee "$out/k80-v100-to-mi50.txt"
echo "== transfer v100,mi50 -> k80" >&2
"$bin" transfer "${gpus[@]}" --sources v100,mi50 --target k80 --seeds 1 -o "$out/v100-mi50-to-k80" \
  "${common[@]}" "$@" | tee "$out/v100-mi50-to-k80.txt"
