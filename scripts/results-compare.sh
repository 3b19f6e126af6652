#!/usr/bin/env bash
# Reproduces docs/model-study.md: Mamba against the baselines (tclm compare) on two GPUs and one CPU of
# ../shared/data, and the Mamba hyper-parameter sweep (tclm sweep, the paper's Table 2) on one GPU.
# Usage: scripts/results-compare.sh [extra args for every command]   (needs ../shared/data)
# Time on 2 cores: K80 ~1.5 h (the attention model is most of it), A100 and Ryzen ~15 min each, sweep ~1.5 h.
# Every run is resumable (--resume): rerunning the script skips models already trained with the same options.
# Env: TCLM_RESULTS_OUT (default out/model-study), TCLM_BIN, PLATFORMS (default "k80 a100 ryzen"),
#      SWEEP_PLATFORMS (default "k80"), SEEDS (default 1 on K80/V100/MI50/Platinum, 3 on A100/Ryzen),
#      SKIP_COMPARE=1, SKIP_SWEEP=1.
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${TCLM_SHARED_DATA:-../shared/data}
out=${TCLM_RESULTS_OUT:-out/model-study}
bin=${TCLM_BIN:-./build/tclm}
common=(--cache-dir out/cache --epochs 6 --patience 3 --quiet --resume)
mkdir -p "$out"

# -d arguments for every stored file of one machine (MANIFEST_files.tsv column 7 = hardware), skipping
# best-only logs (one or two records per workload: nothing to rank).
files_of() {  # name hardware-regex
  awk -F'\t' -v hw="$2" -v name="$1" -v root="$shared" \
    'NR > 1 && $7 ~ hw && $15 != "best-only" && $15 != "n/a" {print "-d"; print name "=" root "/" $1}' \
    "$shared/MANIFEST_files.tsv"
}

# Sets args: the -d arguments and seeds of one platform.
platform_args() {  # name
  case $1 in
    k80) args=(-d "k80=$shared/roller_osdi22/k80" --seeds "${SEEDS:-1}") ;;            # 92K programs, 117 workloads
    v100) args=(-d "v100=$shared/roller_osdi22/v100" --seeds "${SEEDS:-1}") ;;
    mi50) args=(-d "mi50=$shared/roller_osdi22/mi50" --seeds "${SEEDS:-1}") ;;
    platinum8358) args=(-d "platinum8358=$shared/tlcbench_platinum8358" --seeds "${SEEDS:-1}") ;;
    a100) mapfile -t args < <(files_of a100 "A100"); args+=(--seeds "${SEEDS:-3}") ;;  # 11.5K programs, 40 workloads
    ryzen) mapfile -t args < <(files_of ryzen "8 cores [(]likely AMD"); args+=(--seeds "${SEEDS:-3}") ;;  # 7.5K, 29
    *) echo "unknown platform $1" >&2; exit 2 ;;
  esac
  if [ "${#args[@]}" -le 2 ]; then  # files_of found nothing: never fall back to the default data
    echo "no record files for $1 in $shared/MANIFEST_files.tsv" >&2
    exit 1
  fi
}

if [ -z "${SKIP_COMPARE:-}" ]; then
  for name in ${PLATFORMS:-k80 a100 ryzen}; do
    platform_args "$name"
    echo "== compare $name" >&2
    "$bin" compare "${args[@]}" -o "$out/compare-$name" "${common[@]}" "$@" | tee "$out/compare-$name.txt"
  done
fi
if [ -z "${SKIP_SWEEP:-}" ]; then
  for name in ${SWEEP_PLATFORMS:-k80}; do
    platform_args "$name"
    echo "== sweep $name" >&2
    "$bin" sweep "${args[@]}" --grid configs/sweep-table2.json -o "$out/sweep-$name" "${common[@]}" "$@" |
      tee "$out/sweep-$name.txt"
  done
fi
