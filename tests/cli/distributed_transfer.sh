#!/usr/bin/env bash
# Data-parallel `tclm transfer` as processes (scripts/dist-run.sh): the whole pipeline (the target's RDU
# sampling, CL and KD with the earlier platform's programs, KD with EWC, the Fisher pass, a baseline,
# every evaluation) runs as two processes; rank 0 writes the results and the knowledge base, rank 1
# nothing; the sampler picks the same number of programs; and the figures are one process's within
# what float rounding, amplified by Adam over a few hundred steps, moves them (docs/distributed.md).
# Usage: distributed_transfer.sh TCLM RECORDS_DIR WORK_DIR
set -euo pipefail
tclm=$1 data=$2 work=$3
here=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$work" && mkdir -p "$work"
# The target measured other operators than the source, so every K80 program takes part in the target's
# CL and KD (the earlier platforms' programs of workloads the target has not measured).
args=(transfer -d "k80=$data/k80/pooling" -d "v100=$data/v100/depthwise" --sources k80 --target v100
      --methods tcl,target-only --budget 0.1 --source-fraction 0.3 --epochs-cl 1 --epochs-kd 1 --epochs 2 --min-steps 20 --lambda 1e4 --threads 1
      --test-fraction 0.3 --quiet)
fail() { echo "FAIL: $*" >&2; exit 1; }

"$tclm" "${args[@]}" -o "$work/one" >"$work/one.log" 2>&1 || fail "one process failed: $(tail -3 "$work/one.log")"
bash "$here/scripts/dist-run.sh" --nproc 2 -- "$tclm" "${args[@]}" -o "$work/two" >"$work/two.log" 2>&1 ||
  fail "two processes failed: $(tail -5 "$work/two.log")"
for f in transfer.md transfer.json phases.csv test_tasks.csv kb.tclm; do [ -f "$work/two/$f" ] || fail "rank 0 wrote no $f"; done
if grep -q "^\[rank 1\] | method" "$work/two.log"; then fail "rank 1 printed the table"; fi
python3 - "$work/one" "$work/two" <<'PY' || fail "two processes differ from one (above)"
import csv, json, sys
one, two = sys.argv[1], sys.argv[2]
j1, j2 = (json.load(open(d + "/transfer.json")) for d in (one, two))
m1, m2 = j1["target_programs_measured"], j2["target_programs_measured"]
assert m1 == m2, f"the sampler picked {m1} programs in one process and {m2} in two"
def earlier(j):
    return [(p["phase"]["platform"], p["phase"]["earlier_tasks"], p["phase"]["earlier_programs"],
             p["phase"]["kd_earlier_programs"]) for p in j["ckd_phases"]]
e1, e2 = earlier(j1), earlier(j2)
assert e1 == e2, f"the earlier platforms' programs differ: {e1} in one process, {e2} in two"
assert e1[0][2] == 0 and e1[-1][2] > 0, f"the K80's programs should take part in the target's phase only: {e1}"
assert all(e[2] == e[3] for e in e1), f"no workload is shared, so KD's earlier programs should be CL's: {e1}"
def rows(d):
    return {(r["method"], r["phase"], r["platform"]): r for r in csv.DictReader(open(d + "/phases.csv"))}
r1, r2 = rows(one), rows(two)
assert r1.keys() == r2.keys(), f"phases.csv rows differ: {sorted(r1)} against {sorted(r2)}"
def tasks(d):
    return sorted((r["method"], r["phase"], r["platform"], r["workload_key"]) for r in csv.DictReader(open(d + "/test_tasks.csv")))
t1, t2 = tasks(one), tasks(two)
assert t1 == t2 and len(set(t1)) == len(t1), f"test_tasks.csv: {len(t1)} rows in one process, {len(t2)} in two"
worst = max(abs(float(r1[k]["pairwise"]) - float(r2[k]["pairwise"])) for k in r1)
print(f"{len(r1)} evaluations, programs measured {m1}, earlier programs in the target's phase {e1[-1][2]}, "
      f"largest pairwise difference {worst:.4f}")
assert worst < 0.03, f"held-out pairwise accuracy of one and two processes differs by {worst:.4f}"
PY
echo "distributed transfer: OK ($(python3 -c 'import csv,sys; print(sum(1 for _ in csv.DictReader(open(sys.argv[1]))))' "$work/two/phases.csv") evaluations)"
