#!/usr/bin/env bash
# Reproduces docs/transfer.md: the TCL pipeline (tclm transfer) on ../shared/data, with its baselines and
# ablations. Usage: scripts/results-transfer.sh [extra transfer args]
# Env: TCLM_RESULTS_OUT (default out/transfer-study), TCLM_BIN, SEEDS (default 3), ORDERS (default
# "k80,v100:mi50"; "SOURCES:TARGET" items separated by blanks, e.g. "k80,v100:mi50 v100,mi50:k80" for both
# GPU orders, "cpu24:platinum platinum:cpu24" for the CPU orders).
# Platforms (the list below): k80, v100, mi50 (roller_osdi22's GPUs), cpu24 (tvm_ansor_bench's 24-core
# x86 CPU, model not stated) and platinum (tlcbench_platinum8358, Intel Xeon Platinum 8358), and every
# platform tclm measured itself (data/measured/NAME, read by name: e.g.
# ORDERS="cpu24,platinum:intel-xeon-emeraldrapids-2c"). Each order
# loads only its own platforms, in the list's order whatever the order of learning: the task order (and
# with it the sources' random fraction) is that of the data as loaded, so adding a platform to the list
# does not move another order's figures.
# Sources use 10% of the programs of their training tasks (--source-fraction 0.1; their test tasks stay
# whole), a cheaper study (docs/experiments/transfer.md gives each entry's job times). CL runs the
# baselines' epochs (--epochs-cl 6, --epochs 6), so that TCL learns the target from its labels as long
# as the baselines do (the fair setting; docs/transfer.md, "CL as long as the baselines' training").
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${TCLM_SHARED_DATA:-../shared/data}
out=${TCLM_RESULTS_OUT:-out/transfer-study}
bin=${TCLM_BIN:-./build/tclm}
mkdir -p "$out"
platforms=(k80=roller_osdi22/k80 v100=roller_osdi22/v100 mi50=roller_osdi22/mi50
           cpu24=tvm_ansor_bench platinum=tlcbench_platinum8358)
common=(--cache-dir out/cache --budget 0.1 --source-fraction 0.1 --epochs-cl 6 --epochs-kd 4 --epochs 6)
for order in ${ORDERS:-k80,v100:mi50}; do
  sources=${order%%:*}
  target=${order##*:}
  data=() found=","
  for entry in "${platforms[@]}"; do
    plat=${entry%%=*}
    if [[ ",$sources,$target," == *",$plat,"* ]]; then
      data+=(-d "$plat=$shared/${entry#*=}")
      found+="$plat,"
    fi
  done
  for p in ${sources//,/ } "$target"; do
    if [[ "$found" != *",$p,"* && -d "data/measured/$p/records" ]]; then
      data+=(-d "$p")
      found+="$p,"
    fi
    if [[ "$found" != *",$p,"* ]]; then
      echo "results-transfer: unknown platform '$p' in ORDERS (have: ${platforms[*]%%=*} and data/measured/*)" >&2
      exit 2
    fi
  done
  name="${sources//,/-}-to-$target"
  echo "== transfer $sources -> $target" >&2
  "$bin" transfer "${data[@]}" --sources "$sources" --target "$target" --seeds "${SEEDS:-3}" -o "$out/$name" \
    "${common[@]}" "$@" 2> "$out/$name.log" | tee "$out/$name.txt"
done
