#!/usr/bin/env bash
# Reproduces "RDU options chosen on a tuning split" of docs/experiments/sampler.md: RDU's options compared at 10%
# on the K80's tuning split (--tuning-split: the real test tasks are left out, the rest split again),
# 2 seeds each, with random picks as the baseline. The choice is made on these figures only; the
# tables that report RDU use the real split (scripts/results-sampling.sh).
# Usage: scripts/tune-sampler.sh [extra study-sampling args]
# Env: TCLM_RESULTS_OUT (default out/sampler-tuning), TCLM_BIN.
# Measured on 2 vCPUs with --threads 1 per run next to another job: ~8 min per
# one-round config (2 seeds), ~17 min for the two-round one (its between-round model); ~65 min in all.
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${TCLM_SHARED_DATA:-../shared/data}
out=${TCLM_RESULTS_OUT:-out/sampler-tuning}
bin=${TCLM_BIN:-./build/tclm}
mkdir -p "$out"
common=(-d "k80=$shared/roller_osdi22/k80" --tuning-split --rates 0.1 --seeds 2 --epochs 6 --patience 3
        --min-steps 400 --cache-dir out/cache --resume --quiet)
run() {
  local name=$1
  shift
  echo "== $name: $*" >&2
  "$bin" study-sampling "${common[@]}" -o "$out/$name" "$@" "${EXTRA[@]}" | tee "$out/$name.txt"
}
EXTRA=("$@")
run random --samplers random
run rd-ppc4 --samplers rdu --rounds 1 --picks-per-cluster 4                 # R + D, the earlier default k
run rd-ppc4-pf1 --samplers rdu --rounds 1 --picks-per-cluster 4 --prefilter 1
run rd-ppc2 --samplers rdu --rounds 1 --picks-per-cluster 2
run rd-ppc1 --samplers rdu --rounds 1 --picks-per-cluster 1
run rdu-ppc1 --samplers rdu --rounds 2 --picks-per-cluster 1                # R + D, then R + D + U
