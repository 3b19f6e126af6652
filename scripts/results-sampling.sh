#!/usr/bin/env bash
# Reproduces the study in docs/sampler.md ("Study on real data"): tclm study-sampling (samplers x
# sampling rates x seeds; each run trains the cost model on the picked programs and evaluates on
# held-out workloads) on one GPU and one CPU of ../shared/data, plus RDU without its
# representativeness pre-filter. Every model gets at least 150 optimizer steps (--min-steps), so a
# 10% budget is not simply under-trained. Usage: scripts/results-sampling.sh [extra study-sampling args]
# Env: TCLM_RESULTS_OUT (default out/sampler-study), TCLM_BIN, WITH_RATES=1 (also 5% and 20%).
# ~35 min for the K80, ~20 for the Platinum 8358 on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${TCLM_SHARED_DATA:-../shared/data}
out=${TCLM_RESULTS_OUT:-out/sampler-study}
bin=${TCLM_BIN:-./build/tclm}
mkdir -p "$out"
common=(--cache-dir out/cache --seeds 3 --epochs 6 --patience 3 --quiet)
k80="k80=$shared/roller_osdi22/k80"
cpu="platinum8358=$shared/tlcbench_platinum8358"
"$bin" study-sampling -d "$k80" -o "$out/k80" --rates 0.1,1 "${common[@]}" "$@" | tee "$out/k80.txt"
"$bin" study-sampling -d "$cpu" -o "$out/platinum8358" --rates 0.1,1 --samplers random,rdu,kcenter "${common[@]}" "$@" \
  | tee "$out/platinum8358.txt"
"$bin" study-sampling -d "$k80" -o "$out/k80-noprefilter" --rates 0.1 --samplers rdu --prefilter 1 "${common[@]}" "$@" \
  | tee "$out/k80-noprefilter.txt"
if [ -n "${WITH_RATES:-}" ]; then
  for spec in "$k80" "$cpu"; do
    "$bin" study-sampling -d "$spec" -o "$out/${spec%%=*}-rates" --rates 0.05,0.2 --samplers random,rdu "${common[@]}" "$@" \
      | tee "$out/${spec%%=*}-rates.txt"
  done
fi
