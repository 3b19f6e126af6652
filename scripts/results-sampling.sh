#!/usr/bin/env bash
# Reproduces the study in docs/sampler.md: tclm study-sampling (samplers x sampling rates x seeds, each
# training the cost model on the picked programs and evaluating on held-out workloads) on one GPU and
# one CPU of ../shared/data. Every model gets at least 150 optimizer steps (--min-steps), so a 10%
# budget is not simply under-trained. Usage: scripts/results-sampling.sh [extra study-sampling args]
# Env: TCLM_RESULTS_OUT (default out/sampler-study), TCLM_BIN, PART=main|rates (default: both).
# ~25 min per platform for the main part on 2 cores; the rates part (5% and 20%, rdu and random) ~15.
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${TCLM_SHARED_DATA:-../shared/data}
out=${TCLM_RESULTS_OUT:-out/sampler-study}
bin=${TCLM_BIN:-./build/tclm}
mkdir -p "$out"
common=(--cache-dir out/cache --seeds 3 --epochs 6 --patience 3 --quiet)
for spec in "k80=$shared/roller_osdi22/k80" "platinum8358=$shared/tlcbench_platinum8358"; do
  name=${spec%%=*}
  if [ "${PART:-main}" = main ] || [ -z "${PART:-}" ]; then
    echo "== study-sampling $name: every sampler at 10%, and all data" >&2
    "$bin" study-sampling -d "$spec" -o "$out/$name" --rates 0.1,1 "${common[@]}" "$@" | tee "$out/$name.txt"
  fi
done
for spec in "k80=$shared/roller_osdi22/k80" "platinum8358=$shared/tlcbench_platinum8358"; do
  name=${spec%%=*}
  if [ "${PART:-rates}" = rates ] || [ -z "${PART:-}" ]; then
    echo "== study-sampling $name: rdu and random at 5% and 20%" >&2
    "$bin" study-sampling -d "$spec" -o "$out/$name-rates" --rates 0.05,0.2 --samplers random,rdu "${common[@]}" "$@" \
      | tee "$out/$name-rates.txt"
  fi
done
