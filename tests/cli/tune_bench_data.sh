#!/usr/bin/env bash
# The network tuning runs that ship in data/tune-bench (data/tune-bench/README.md) say what their
# summaries say: every run's Ansor log parses as records, one per trial tune.json counted; the last
# estimate of its curve.csv is tune.json's final estimate, its rows are curves.csv's rows of that run,
# and a one-seed model's final in summary.csv is that run's; a benchmark's collection holds the
# programs its collect.json says were picked, measured and failed.
# Usage: tune_bench_data.sh TCLM TUNE_BENCH_DIR
set -euo pipefail
tclm=$1 dir=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
for bench in "$dir"/*/*/; do
  [ -f "$bench/summary.csv" ] || continue
  for run in "$bench"/runs/*/; do
    name=$(basename "$run")
    mkdir -p "$tmp/$name"
    ln -s "$(cd "$run" && pwd)/tuning.json.gz" "$tmp/$name/tuning.json.gz"   # the log alone, not tune.json
    "$tclm" info -d "run=$tmp/$name" --json "$tmp/$name.json" >/dev/null 2>"$tmp/$name.err" ||
      fail "$run: tclm info: $(tail -3 "$tmp/$name.err")"
  done
  if [ -d "$bench/collection" ]; then
    "$tclm" info -d "collection=$bench/collection/records" --json "$tmp/collection.json" >/dev/null \
      2>"$tmp/collection.err" || fail "$bench/collection: tclm info: $(tail -3 "$tmp/collection.err")"
  fi
  python3 - "$bench" "$tmp" <<'PY' || fail "$bench: the files disagree (above)"
import csv, json, os, sys
bench, tmp = sys.argv[1], sys.argv[2]
rows = lambda p: list(csv.DictReader(open(p, newline="")))
curves, summary = rows(os.path.join(bench, "curves.csv")), rows(os.path.join(bench, "summary.csv"))
runs = sorted(os.listdir(os.path.join(bench, "runs")))
assert runs, "no runs"
for name in runs:
    d = os.path.join(bench, "runs", name)
    tune, info = json.load(open(os.path.join(d, "tune.json"))), json.load(open(os.path.join(tmp, name + ".json")))
    assert info["skipped_lines"] == 0, (name, info["skipped_by_reason"])
    assert info["records"] == tune["trials"], (name, info["records"], tune["trials"])
    own = rows(os.path.join(d, "curve.csv"))
    est = [float(r["estimated_ms"]) for r in own if r["estimated_ms"]]
    assert abs(est[-1] - tune["final_estimated_ms"]) < 1e-6, (name, est[-1], tune["final_estimated_ms"])
    model, seed = tune["cost_model"], str(tune["seed"])
    mine = [r for r in curves if r["model"] == model and r["seed"] == seed]
    assert [(r["trials"], r["estimated_ms"]) for r in mine] == [(r["trials"], r["estimated_ms"]) for r in own], name
    (row,) = [r for r in summary if r["model"] == model]
    if row["seeds"] == "1":
        assert abs(float(row["final_estimated_ms"]) - est[-1]) < 5e-4 * est[-1], (name, row["final_estimated_ms"])
coll = os.path.join(bench, "collection")
if os.path.isdir(coll):
    tot = json.load(open(os.path.join(coll, "collect.json")))["totals"]
    info = json.load(open(os.path.join(tmp, "collection.json")))
    (plat,) = info["platforms"]
    assert info["skipped_lines"] == 0 and info["records"] == tot["picked"], (info["records"], tot)
    assert plat["programs"] == tot["measured"] and plat["errors"] == tot["failed"], (plat, tot)
print(f"{bench}: {len(runs)} runs, {len(curves)} curve rows")
PY
  rm -rf "${tmp:?}"/*
  n=$((n + 1))
done
echo "tune-bench data: OK ($n benchmark(s))"
