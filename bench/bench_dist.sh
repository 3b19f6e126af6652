#!/usr/bin/env bash
# Data-parallel training throughput (docs/distributed.md): `tclm train` on the same data, options and
# seed as 1 process and as N processes (scripts/dist-run.sh), one libtorch thread each, in one run.
# Prints, per process count: training programs/s (the mean over the epochs after the first, from
# train_log.json), the speed-up over 1 process, and the shares of the epoch's time spent in the
# all-reduces (transfer) and in waiting for the slowest process before each, so that more machines
# can be estimated. Also writes OUT/bench_dist.json.
#
# Usage: bench/bench_dist.sh [--tclm build/tclm] [--data k80=data/records/k80] [--epochs 3]
#                            [--procs "1 2"] [--out out/bench-dist] [-- extra tclm train options]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
tclm=$here/build/tclm data=k80=$here/data/records/k80 epochs=3 procs="1 2" out=out/bench-dist
while [ $# -gt 0 ]; do
  case "$1" in
    --tclm) tclm=$2; shift 2 ;;
    --data) data=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --procs) procs=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench_dist.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
echo "CPU: $cpu, $(nproc) cores; data: $data; $epochs epochs; 1 thread per process"
for n in $procs; do
  # --patience above --epochs: every run trains all epochs (early stopping would end them unequally).
  bash "$here/scripts/dist-run.sh" --nproc "$n" --threads-per-process 1 -- "$tclm" train -d "$data" \
    --epochs "$epochs" --patience $((epochs + 1)) --threads 1 --seed 0 --quiet -o "$out/p$n" "$@" \
    >"$out/p$n.log" 2>&1 || { echo "bench_dist.sh: $n processes failed: see $out/p$n.log" >&2; exit 1; }
done
python3 - "$out" "$cpu" $procs <<'EOF'
import json, os, sys
out, cpu, procs = sys.argv[1], sys.argv[2], [int(p) for p in sys.argv[3:]]
rows = []
for n in procs:
    log = json.load(open(os.path.join(out, f"p{n}", "train_log.json")))["epochs"]
    later = log[1:] or log  # the first epoch warms caches and allocators
    pps = sum(e["samples_per_second"] for e in later) / len(later)
    secs = sum(e["seconds"] for e in later)
    comm = sum(e.get("comm_seconds", 0.0) for e in later)
    wait = sum(e.get("wait_seconds", 0.0) for e in later)
    rows.append({"processes": n, "programs_per_second": pps, "comm_share": comm / secs if secs else 0.0,
                 "wait_share": wait / secs if secs else 0.0, "epoch_seconds": secs / len(later)})
base = rows[0]["programs_per_second"]
print(f"{'processes':>9} {'programs/s':>11} {'speed-up':>8} {'epoch s':>8} {'all-reduce':>11} {'waiting':>8}")
for r in rows:
    r["speedup"] = r["programs_per_second"] / base
    print(f"{r['processes']:>9} {r['programs_per_second']:>11.0f} {r['speedup']:>7.2f}x {r['epoch_seconds']:>8.1f} "
          f"{100 * r['comm_share']:>10.1f}% {100 * r['wait_share']:>7.1f}%")
print("all-reduce: share of the epoch's time in the gradient all-reduces (transfer) and the evaluation's;"
      "\nwaiting: in waiting for the process with the larger part of each batch (tasks are sharded, so the parts"
      "\nof a batch differ)")
json.dump({"cpu": cpu, "cores": os.cpu_count(), "rows": rows}, open(os.path.join(out, "bench_dist.json"), "w"), indent=1)
print(f"JSON: {os.path.join(out, 'bench_dist.json')}")
EOF
