#!/usr/bin/env bash
# Reproduces docs/results-core.md: a Mamba cost model trained per platform on ../shared/data and
# evaluated on held-out workloads, next to the exact random-ranking expectation.
# Usage: scripts/results-core.sh [extra tclm train args]   (needs ../shared/data; ~30-60 min on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${TCLM_SHARED_DATA:-../shared/data}
out=${TCLM_RESULTS_OUT:-out/results-core}
mkdir -p "$out"
run() {  # name, data spec, extra args
  local name=$1 spec=$2
  shift 2
  echo "== $name" >&2
  ${TCLM_BIN:-./build/tclm} train -d "$spec" -o "$out/$name" --cache-dir out/cache --quiet "$@" | tee "$out/$name.txt"
}
run k80        "k80=$shared/roller_osdi22/k80" "$@"
run v100       "v100=$shared/roller_osdi22/v100" "$@"
run mi50       "mi50=$shared/roller_osdi22/mi50" "$@"
run platinum8358 "platinum8358=$shared/tlcbench_platinum8358" "$@"
[ -n "${WITH_ANSOR24C:-}" ] && run ansor24c "ansor24c=$shared/tvm_ansor_bench" --split group "$@"
python3 - "$out" <<'PY'
import json, sys, os
out = sys.argv[1]
rows = []
for name in ["k80", "v100", "mi50", "platinum8358", "ansor24c"]:
    p = os.path.join(out, name, "report.json")
    if not os.path.exists(p):
        continue
    r = json.load(open(p))
    t = r["test"][-1]
    rows.append(f"| {name} | {r['train_tasks']} / {r['valid_tasks']} / {r['test_tasks']} | {t['programs']} | "
                f"{t['top1']['pooled']:.4f} | {t['top5']['pooled']:.4f} | {t['top1']['group_mean']:.4f} | "
                f"{t['random_top1']['pooled']:.4f} | {t['random_top5']['pooled']:.4f} | {t['pairwise_accuracy']:.4f} | "
                f"{r['best_epoch']} | {r['seconds']:.0f} |")
hdr = ("| platform | train / valid / test tasks | test programs | top-1 | top-5 | top-1 group mean | "
       "random top-1 | random top-5 | pairwise acc. | best epoch | train s |\n|---|---|---|---|---|---|---|---|---|---|---|")
open(os.path.join(out, "table.md"), "w").write(hdr + "\n" + "\n".join(rows) + "\n")
print(hdr); print("\n".join(rows))
PY
