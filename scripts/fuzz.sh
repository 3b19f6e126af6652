#!/usr/bin/env bash
# Fuzzes tclm's three parsers of untrusted files with libFuzzer (clang 14 + ASan + UBSan):
#   records      Ansor record files (RecordParser, parse_program_line, read_record_file incl. gzip,
#                record_to_json round trip, featurizer)
#   ms_database  MetaSchedule databases (database_workload.json + database_tuning_record.json,
#                parse_trace_json)
#   weights      .tclm weights files (parse_weights, serialize_weights round trip, CostModelEngine)
# Harnesses, seed corpora and regression inputs are in fuzz/; docs/reliability.md, "Fuzzing".
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  cat <<'EOF'
usage: scripts/fuzz.sh [--seconds N] [--smoke] [--targets a,b] [--fresh] [--no-install]
                       [--summary-only] [--help]

Installs what it needs from Debian if missing (clang, libclang-rt-14-dev, libomp-dev and tclm_core's
build dependencies; sudo when not root), configures build-fuzz with clang and -DTCLM_FUZZ=ON (only
tclm_core and the fuzz targets, no libtorch), builds it, then runs each target in turn (one after
the other) for N seconds, starting from its seed corpus fuzz/corpus/<name>/ and its regressions
fuzz/regressions/<name>/, copied into the work corpus out/fuzz/<name>/corpus (not in git; kept
between runs, so a second run continues where the first stopped).

  --seconds N     seconds per target (default 300)
  --smoke         20 seconds per target (a quick check that everything works)
  --targets LIST  comma-separated subset of: records,ms_database,weights (default all)
  --fresh         start from the seeds only (delete the work corpora first)
  --no-install    do not check or install Debian packages
  --summary-only  only rewrite the summary from the last run's logs (no build, no fuzzing)
  --help          this text

Outputs:
  out/fuzz/summary.json         per target: seconds, executions, exec/s, coverage (edges), features,
                                corpus (libFuzzer's active corpus: inputs and bytes; and the work
                                corpus files on disk, which keep superseded inputs), new inputs, peak
                                RSS, status, artifacts
  out/fuzz/summary.md           the same as a table (also printed)
  out/fuzz/<name>/fuzz.log      libFuzzer's output
  out/fuzz/<name>/artifacts/    crash-*, timeout-*, oom-*, leak-* inputs (libFuzzer stops a target at
                                its first finding; the script goes on with the next target)
A finding: reproduce with   build-fuzz/fuzz_<name> out/fuzz/<name>/artifacts/<file>
           minimize with    build-fuzz/fuzz_<name> -minimize_crash=1 -runs=10000 <file>
fix the library, then copy the input into fuzz/regressions/<name>/ under a descriptive name: the
ordinary test suite replays it with the g++ build (CTest fuzz.replay.<name>).
Exit status: 0 when no target found anything, 1 when one did, 2 on a usage or build error.
EOF
}

seconds=300
targets=records,ms_database,weights
fresh=0
install=1
summary_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) [ $# -ge 2 ] || { echo "fuzz: --seconds needs a value" >&2; exit 2; }
               seconds=$2; shift 2 ;;
    --seconds=*) seconds=${1#--seconds=}; shift ;;
    --smoke) seconds=20; shift ;;
    --targets) [ $# -ge 2 ] || { echo "fuzz: --targets needs a value" >&2; exit 2; }
               targets=$2; shift 2 ;;
    --targets=*) targets=${1#--targets=}; shift ;;
    --fresh) fresh=1; shift ;;
    --no-install) install=0; shift ;;
    --summary-only) summary_only=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "fuzz: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "fuzz: --seconds must be a positive integer, got '$seconds'" >&2
  exit 2
fi
IFS=',' read -r -a names <<<"$targets"
for n in "${names[@]}"; do
  case "$n" in
    records|ms_database|weights) ;;
    *) echo "fuzz: unknown target '$n' (records, ms_database, weights)" >&2; exit 2 ;;
  esac
done

# ---- Debian packages (idempotent: scripts/apt-install.sh)
if [ "$install" -eq 1 ] && [ "$summary_only" -eq 0 ]; then
  PACKAGES=(clang libclang-rt-14-dev libomp-dev cmake make python3
            libsimdjson-dev zlib1g-dev libfmt-dev libfaiss-dev libopenblas-dev)
  bash scripts/apt-install.sh fuzz "${PACKAGES[@]}"
fi

status=0
if [ "$summary_only" -eq 0 ]; then
  # ---- build (clang, instrumented tclm_core + the fuzz targets only)
  jobs=$(nproc 2>/dev/null || echo 2)
  if [ ! -f build-fuzz/CMakeCache.txt ]; then
    CC=clang CXX=clang++ cmake -S . -B build-fuzz -DTCLM_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null ||
      { echo "fuzz: cmake configure of build-fuzz failed" >&2; exit 2; }
  fi
  cmake --build build-fuzz -j"$jobs" -- -s >/dev/null ||
    { echo "fuzz: build failed (run: cmake --build build-fuzz)" >&2; exit 2; }

  # ---- run each target, one after the other
  declare -A max_len=([records]=32768 [ms_database]=32768 [weights]=8192)
  mkdir -p out/fuzz
  for n in "${names[@]}"; do
    work=out/fuzz/$n
    [ "$fresh" -eq 1 ] && rm -rf "$work"
    mkdir -p "$work/corpus" "$work/artifacts"
    cp -n fuzz/corpus/"$n"/* "$work/corpus/" 2>/dev/null || true
    before=$(find "$work/corpus" -type f | wc -l)
    echo "fuzz: $n for ${seconds}s (work corpus $work/corpus, $before inputs)" >&2
    start=$(date +%s)
    set +e
    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0} \
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
      nice -n 5 build-fuzz/fuzz_"$n" "$work/corpus" fuzz/regressions/"$n" \
        -dict=fuzz/"$n".dict -max_total_time="$seconds" -max_len="${max_len[$n]}" \
        -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$work/artifacts/" >"$work/fuzz.log" 2>&1
    rc=$?
    set -e
    end=$(date +%s)
    echo "$rc $((end - start)) $before" >"$work/run.txt"
  done
fi
for n in "${names[@]}"; do
  [ -f "out/fuzz/$n/run.txt" ] || { echo "fuzz: no run of $n in out/fuzz/$n" >&2; exit 2; }
  read -r rc _ <"out/fuzz/$n/run.txt"
  [ "$rc" -eq 0 ] || status=1
done

# ---- summary
python3 - "${names[@]}" <<'EOF'
import json, os, re, sys, time

rows = []
for name in sys.argv[1:]:
    work = os.path.join("out", "fuzz", name)
    rc, secs, before = (int(x) for x in open(os.path.join(work, "run.txt")).read().split())
    log = open(os.path.join(work, "fuzz.log"), errors="replace").read()
    stat = dict(re.findall(r"^stat::(\w+):\s+(\d+)", log, re.M))
    cov = re.findall(r"cov: (\d+) ft: (\d+)", log)
    corp = re.findall(r"corp: (\d+)/(\d+)(b|Kb|Mb)", log)
    unit = {"b": 1, "Kb": 1024, "Mb": 1024 * 1024}
    execs = re.findall(r"^#(\d+)\s", log, re.M)
    files = [os.path.join(work, "corpus", f) for f in os.listdir(os.path.join(work, "corpus"))]
    arts = sorted(os.listdir(os.path.join(work, "artifacts")))
    if rc == 0:
        st = "ok"
    elif "ERROR: libFuzzer: timeout" in log:
        st = "timeout"
    elif "out-of-memory" in log:
        st = "oom"
    elif "ERROR: LeakSanitizer" in log:
        st = "leak"
    else:
        st = "crash"
    executions = int(stat.get("number_of_executed_units", execs[-1] if execs else 0))
    rows.append({
        "target": name,
        "seconds": secs,
        "executions": executions,
        "exec_per_sec": int(stat.get("average_exec_per_sec", executions // max(secs, 1))),
        "coverage_edges": int(cov[-1][0]) if cov else 0,
        "features": int(cov[-1][1]) if cov else 0,
        "corpus_active": int(corp[-1][0]) if corp else 0,
        "corpus_active_bytes": int(corp[-1][1]) * unit[corp[-1][2]] if corp else 0,
        "corpus_files_start": before,
        "corpus_files": len(files),
        "corpus_bytes": sum(os.path.getsize(f) for f in files),
        "new_units": int(stat.get("new_units_added", 0)),
        "peak_rss_mb": int(stat.get("peak_rss_mb", 0)),
        "status": st,
        "exit_code": rc,
        "artifacts": [os.path.join(work, "artifacts", a) for a in arts],
    })
summary = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "targets": rows}
with open("out/fuzz/summary.json", "w") as f:
    json.dump(summary, f, indent=2)
head = ("| target | seconds | executions | exec/s | coverage (edges) | features | active corpus (inputs, KB) | "
        "work corpus on disk (files, KB) | new inputs | peak RSS MB | status |")
lines = [head, "|" + "---|" * 11]
for r in rows:
    lines.append(f"| {r['target']} | {r['seconds']} | {r['executions']:,} | {r['exec_per_sec']:,} | {r['coverage_edges']} | "
                 f"{r['features']} | {r['corpus_active']}, {r['corpus_active_bytes'] // 1024} | "
                 f"{r['corpus_files']}, {r['corpus_bytes'] // 1024} | {r['new_units']} | {r['peak_rss_mb']} | "
                 f"{r['status']} |")
table = "\n".join(lines)
with open("out/fuzz/summary.md", "w") as f:
    f.write(table + "\n")
print(table)
print("\nsummary: out/fuzz/summary.json, out/fuzz/summary.md; logs: out/fuzz/<target>/fuzz.log")
for r in rows:
    for a in r["artifacts"]:
        print(f"finding ({r['target']}): {a}\n  reproduce: build-fuzz/fuzz_{r['target']} {a}\n"
              f"  once fixed, copy it into fuzz/regressions/{r['target']}/ under a descriptive name")
EOF
exit "$status"
