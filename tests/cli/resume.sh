#!/usr/bin/env bash
# A training run killed with SIGKILL (twice: inside epoch 1, then inside epoch 2) and resumed with
# --resume ends with exactly the model of an uninterrupted run (best.tclm byte for byte, the same
# epoch log), and --resume refuses a checkpoint of other options.
# Usage: resume.sh TCLM DATA_DIR WORK_DIR
set -euo pipefail
tclm=$1 data=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
args=(train -d "k80=$data" --epochs 2 --threads 1 --seed 7 --checkpoint-minutes 0 --quiet)

"$tclm" "${args[@]}" -o "$work/full" >"$work/full.log" 2>&1

# Starts a run (fresh or --resume) in the background, waits until `ready` holds, then a little more
# (a few batches), and kills it; fails if the run ended before the kill.
kill_during() {
  local ready=$1 extra=$2
  shift 2
  "$tclm" "${args[@]}" -o "$work/cut" "$@" >>"$work/cut.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 3000); do
    eval "$ready" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.01
  done
  sleep "$extra"
  kill -9 "$pid" 2>/dev/null || true
  local rc=0
  wait "$pid" || rc=$?
  if [ "$rc" -ne 137 ]; then
    echo "FAIL: the run was not killed mid-way (exit status $rc); see $work/cut.log" >&2
    exit 1
  fi
}
# 1: killed inside epoch 1 (after a few batch checkpoints)
kill_during '[ -f "$work/cut/checkpoint.tclm" ]' 0.5
[ ! -f "$work/cut/train_log.json" ] || { echo "FAIL: epoch 1 ended before the first kill" >&2; exit 1; }
# 2: resumed, killed again inside epoch 2
kill_during '[ -f "$work/cut/train_log.json" ]' 0.7 --resume
# 3: resumed to the end
"$tclm" "${args[@]}" -o "$work/cut" --resume >>"$work/cut.log" 2>&1
grep -c "resuming from" "$work/cut.log" | grep -qx 2 || { echo "FAIL: expected two resumes in $work/cut.log" >&2; exit 1; }

cmp "$work/full/best.tclm" "$work/cut/best.tclm" ||
  { echo "FAIL: the resumed run's best.tclm differs from the uninterrupted run's" >&2; exit 1; }
strip_seconds() { sed -E 's/"(seconds|samples_per_second)": [0-9.e+-]+//g' "$1"; }
diff <(strip_seconds "$work/full/train_log.json") <(strip_seconds "$work/cut/train_log.json") ||
  { echo "FAIL: the epoch logs differ" >&2; exit 1; }

# A finished run resumed again changes nothing.
"$tclm" "${args[@]}" -o "$work/cut" --resume >"$work/again.log" 2>&1
grep -q "the run had finished" "$work/again.log" || { echo "FAIL: no 'finished' notice" >&2; exit 1; }
cmp "$work/full/best.tclm" "$work/cut/best.tclm"

# Other options: refused, naming the checkpoint.
if "$tclm" "${args[@]}" --lr 1e-3 -o "$work/cut" --resume >"$work/other.log" 2>&1; then
  echo "FAIL: --resume accepted a checkpoint written for another --lr" >&2
  exit 1
fi
grep -q "checkpoint.tclm: this checkpoint was written for other options or data" "$work/other.log" ||
  { echo "FAIL: unexpected message:" >&2; cat "$work/other.log" >&2; exit 1; }
# No checkpoint: refused.
if "$tclm" "${args[@]}" -o "$work/empty" --resume >"$work/none.log" 2>&1; then
  echo "FAIL: --resume without a checkpoint succeeded" >&2
  exit 1
fi
grep -q "no checkpoint to resume from" "$work/none.log"
# A checkpoint is a usable model too: export strips the training state.
"$tclm" export -c "$work/cut/checkpoint.tclm" -o "$work/exported.tclm" >/dev/null
[ "$(stat -c %s "$work/exported.tclm")" -lt "$(stat -c %s "$work/cut/checkpoint.tclm")" ]
echo "resume: OK (killed twice, resumed, best.tclm identical to the uninterrupted run)"
