#!/usr/bin/env bash
# Reproduces docs/transfer.md: the TCL pipeline (tclm transfer) on the GPUs of ../shared/data, with its
# baselines and ablations. Usage: scripts/results-transfer.sh [extra transfer args]
# Env: TCLM_RESULTS_OUT (default out/transfer-study), TCLM_BIN, SEEDS (default 2), ORDERS (default
# "k80,v100:mi50"; add e.g. "v100,mi50:k80" for another order).
# Sources use 10% of the programs of their training tasks (--source-fraction 0.1; their test tasks stay
# whole) to fit a 2-seed study in ~45 min on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${TCLM_SHARED_DATA:-../shared/data}
out=${TCLM_RESULTS_OUT:-out/transfer-study}
bin=${TCLM_BIN:-./build/tclm}
mkdir -p "$out"
gpus=(-d "k80=$shared/roller_osdi22/k80" -d "v100=$shared/roller_osdi22/v100" -d "mi50=$shared/roller_osdi22/mi50")
common=(--cache-dir out/cache --budget 0.1 --source-fraction 0.1 --epochs-cl 4 --epochs-kd 4 --epochs 6)
for order in ${ORDERS:-k80,v100:mi50}; do
  sources=${order%%:*}
  target=${order##*:}
  name="${sources//,/-}-to-$target"
  echo "== transfer $sources -> $target" >&2
  "$bin" transfer "${gpus[@]}" --sources "$sources" --target "$target" --seeds "${SEEDS:-2}" -o "$out/$name" \
    "${common[@]}" "$@" 2> "$out/$name.log" | tee "$out/$name.txt"
done
