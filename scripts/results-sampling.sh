#!/usr/bin/env bash
# Reproduces the results table of docs/sampler.md: tclm study-sampling (samplers x sampling rates x
# seeds; each run trains the cost model on the picked programs and evaluates on held-out workloads)
# on one GPU (K80) and one CPU (Platinum 8358) of ../shared/data: random and RDU at 10% and all data,
# 3 seeds, every model at least 400 optimizer steps (--min-steps), so a 10% budget is not simply
# under-trained. WITH_RATES=1 adds 5%, 20% and 50% (random and RDU, 2 seeds; the paper's Fig. 7).
# Every study resumes (--resume): an interrupted run keeps its finished rows; delete the output
# directory to start over (a directory of an older study, or of other options, is refused).
# Usage: scripts/results-sampling.sh [extra study-sampling args, other than the --samplers, --rates,
# --seeds, --epochs, --patience and --min-steps set here]
# Env: TCLM_RESULTS_OUT (default out/sampler-study-v4: RDU with one pick per cluster, chosen by
# scripts/tune-sampler.sh; v3 had 4 picks per cluster, v2 also selected models by the validation
# top-1), TCLM_BIN, WITH_RATES=1. CURVES=1 adds --curves
# (curves.csv: every epoch's validation and test figures; one more test evaluation per epoch).
# PLATFORMS (default "k80 platinum8358"): blank-separated; k80, platinum8358 or a platform tclm measured
# itself (data/measured/NAME). SAMPLERS (random,rdu), RATES (0.1,1), SEEDS (3) set the main study's grid.
# The random pools of data/measured (docs/sampler.md, "Random pools measured by tclm"):
#   PLATFORMS=intel-xeon-emeraldrapids-2c SAMPLERS=random,rdu,kcenter,uncertainty,balto \
#   RATES=0.05,0.1,0.2,1 SEEDS=5 scripts/results-sampling.sh --threads 1
# Measured on 2 vCPUs: 2-4.5 min per run; 18 runs (36-70 min) for both platforms' 10%/100% runs,
# 12 more per platform with WITH_RATES=1.
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${TCLM_SHARED_DATA:-../shared/data}
out=${TCLM_RESULTS_OUT:-out/sampler-study-v4}
bin=${TCLM_BIN:-./build/tclm}
mkdir -p "$out"
common=(--cache-dir out/cache --epochs 6 --patience 3 --min-steps 400 --resume --quiet)
if [ -n "${CURVES:-}" ]; then common+=(--curves); fi
for name in ${PLATFORMS:-k80 platinum8358}; do
  case $name in
    k80) spec="k80=$shared/roller_osdi22/k80" ;;
    platinum8358) spec="platinum8358=$shared/tlcbench_platinum8358" ;;
    *) spec=$name ;;  # a measured platform: tclm reads data/measured/NAME/records
  esac
  "$bin" study-sampling -d "$spec" -o "$out/$name" --samplers "${SAMPLERS:-random,rdu}" --rates "${RATES:-0.1,1}" \
    --seeds "${SEEDS:-3}" "${common[@]}" "$@" | tee "$out/$name.txt"
  if [ -n "${WITH_RATES:-}" ]; then
    "$bin" study-sampling -d "$spec" -o "$out/$name-rates" --samplers random,rdu --rates 0.05,0.2,0.5 --seeds 2 "${common[@]}" "$@" \
      | tee "$out/$name-rates.txt"
  fi
done
