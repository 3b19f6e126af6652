#!/usr/bin/env bash
# Starts N processes of a tclm command on this machine for data-parallel training, the way torchrun
# does: each gets WORLD_SIZE=N, RANK=i, MASTER_ADDR=127.0.0.1 and MASTER_PORT (a free port unless
# given), and its output goes to the terminal with a "[rank i]" prefix (rank 0 unprefixed).
# Waits for all of them; when one fails, the others stop on their own (their next all-reduce fails,
# or --dist-timeout passes) and the first non-zero exit status is returned.
#
# Usage: scripts/dist-run.sh [--nproc N] [--port P] [--threads-per-process T] -- TCLM train ARGS...
#   --nproc N               processes (default 2)
#   --port P                MASTER_PORT (default: a free port)
#   --threads-per-process T OMP_NUM_THREADS for each process (default: cores / N, at least 1); pass
#                           --threads to tclm as well to set libtorch's
# Several machines: run one process per machine (or several) yourself with the same WORLD_SIZE,
# MASTER_ADDR (rank 0's address) and MASTER_PORT and a distinct RANK each; docs/distributed.md.
set -euo pipefail

n=2 port="" tpp=""
while [ $# -gt 0 ]; do
  case "$1" in
    --nproc) n=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    --threads-per-process) tpp=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "dist-run.sh: unknown option '$1' (the command follows --)" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "dist-run.sh: no command; usage: dist-run.sh [--nproc N] -- TCLM train ARGS..." >&2; exit 2; }
[[ "$n" =~ ^[1-9][0-9]*$ ]] || { echo "dist-run.sh: --nproc must be a positive integer, got '$n'" >&2; exit 2; }
if [ -z "$port" ]; then
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
fi
[ -n "$tpp" ] || tpp=$(( $(nproc) / n > 0 ? $(nproc) / n : 1 ))

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap 'cleanup; exit 130' INT TERM
for ((r = 0; r < n; r++)); do
  if [ "$r" -eq 0 ]; then
    WORLD_SIZE=$n RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port OMP_NUM_THREADS=$tpp "$@" &
  else
    WORLD_SIZE=$n RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port OMP_NUM_THREADS=$tpp "$@" \
      > >(sed -u "s/^/[rank $r] /") 2> >(sed -u "s/^/[rank $r] /" >&2) &
  fi
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do
  rc=0
  wait "$p" || rc=$?
  [ "$status" -ne 0 ] || status=$rc
done
exit "$status"
