#!/usr/bin/env bash
# Data-parallel `tclm train` as processes (scripts/dist-run.sh): two processes train and rank 0 writes
# the model and the report (rank 1 writes nothing); the run trains as well as one process (held-out
# pairwise accuracy within 0.05 of one process's on the same seed: the two differ only by float
# rounding, which Adam amplifies, docs/distributed.md); --resume continues a data-parallel run; and
# a rank killed with SIGKILL mid-run makes the other stop with a clear error instead of hanging.
# Usage: distributed.sh TCLM DATA_DIR WORK_DIR
set -euo pipefail
tclm=$1 data=$2 work=$3
here=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$work" && mkdir -p "$work"
args=(train -d "k80=$data" --epochs 2 --threads 1 --seed 7 --batch-size 256 --group-size 32 --quiet)
fail() { echo "FAIL: $*" >&2; exit 1; }

"$tclm" "${args[@]}" -o "$work/one" >"$work/one.log" 2>&1 || fail "one process failed: $(tail -3 "$work/one.log")"
bash "$here/scripts/dist-run.sh" --nproc 2 -- "$tclm" "${args[@]}" -o "$work/two" >"$work/two.log" 2>&1 ||
  fail "two processes failed: $(tail -5 "$work/two.log")"
[ -f "$work/two/best.tclm" ] && [ -f "$work/two/report.json" ] || fail "rank 0 wrote no model or report"
grep -q '"processes": 2' "$work/two/report.json" || fail "report.json does not say 2 processes"
if grep -q "^\[rank 1\] held-out" "$work/two.log"; then fail "rank 1 printed a report"; fi
pairwise() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["test"][0]["pairwise_accuracy"])' "$1"; }
p1=$(pairwise "$work/one/report.json") p2=$(pairwise "$work/two/report.json")
python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(a - b) < 0.05 and b > 0.55 else 1)" "$p1" "$p2" ||
  fail "held-out pairwise accuracy: one process $p1, two $p2"

# --resume of a finished data-parallel run: every rank reads the checkpoint and nothing changes.
cp "$work/two/best.tclm" "$work/best-before.tclm"
bash "$here/scripts/dist-run.sh" --nproc 2 -- "$tclm" "${args[@]}" -o "$work/two" --resume >"$work/resume.log" 2>&1 ||
  fail "--resume failed: $(tail -5 "$work/resume.log")"
grep -q "the run had finished" "$work/resume.log" || fail "no 'finished' notice on --resume"
cmp "$work/best-before.tclm" "$work/two/best.tclm" || fail "--resume of a finished run changed best.tclm"

# A rank killed mid-run: the other stops with an error naming what was lost, well before --dist-timeout.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
kill_args=(train -d "k80=$data" --epochs 50 --threads 1 --seed 7 --checkpoint-minutes 0 --dist-timeout 120 -o "$work/cut")
WORLD_SIZE=2 RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$tclm" "${kill_args[@]}" >"$work/rank0.log" 2>&1 &
r0=$!
WORLD_SIZE=2 RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$tclm" "${kill_args[@]}" >"$work/rank1.log" 2>&1 &
r1=$!
for _ in $(seq 1 6000); do
  [ -f "$work/cut/checkpoint.tclm" ] && break
  kill -0 "$r0" 2>/dev/null || break
  sleep 0.01
done
[ -f "$work/cut/checkpoint.tclm" ] || { kill -9 "$r0" "$r1" 2>/dev/null; fail "no checkpoint before the kill: $(tail -3 "$work/rank0.log")"; }
kill -9 "$r1"
start=$(date +%s)
rc=0
for _ in $(seq 1 600); do kill -0 "$r0" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$r0" 2>/dev/null; then kill -9 "$r0"; fail "rank 0 still runs 60 s after rank 1 was killed"; fi
wait "$r0" || rc=$?
took=$(( $(date +%s) - start ))
[ "$rc" -ne 0 ] || fail "rank 0 exited 0 after rank 1 was killed"
grep -q "rank 0 of 2 lost the other processes during" "$work/rank0.log" ||
  fail "rank 0's message does not say what was lost: $(tail -3 "$work/rank0.log")"
echo "distributed: OK (2 processes: held-out pairwise $p2, one process $p1; rank 0 stopped ${took} s after rank 1 was killed, exit status $rc)"
