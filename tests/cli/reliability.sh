#!/usr/bin/env bash
# What a user can do to the tool by mistake, one class per call (docs/reliability.md, "Outputs,
# options and inputs reached twice"):
#   alias      an output that is one of the command's inputs is refused before any work
#   special    a FIFO or a symbolic link given as an output is written through, not replaced; a full
#              disk or a closed pipe on standard output is an error
#   nonfinite  every float option of every command refuses NaN and infinities (found from --help)
#   twice      a record file reached twice (given twice, through a link, a link cycle) is read once
#   costs      a cost below 1e-9 s is a bad cost, not the task's best program
#   threads    --threads above 4 x the cores is lowered, with a note
#   lock       a second run into an output directory in use is refused
#   python     collect/tune-bench/tune --help without a working Python say what to run, never a traceback
# Usage: reliability.sh CLASS TCLM FIXTURES SLICE MODEL_DIR WORK_DIR
#   FIXTURES: tests/data/tvm_ci_logs; SLICE: a small Ansor record directory (training data);
#   MODEL_DIR: a model trained by cli.train (best.tclm, checkpoint.tclm).
set -uo pipefail
class=$1 tclm=$2 fixtures=$3 slice=$4 model_dir=$5 work=$6
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail() { echo "FAIL ($class): $*" >&2; exit 1; }
# expect RC MESSAGE-REGEX COMMAND...: the exit code and a line of stderr.
expect() {
  local want=$1 re=$2
  shift 2
  "$@" >out.txt 2>err.txt
  local rc=$?
  [ "$rc" = "$want" ] || fail "exit $rc, expected $want: $* ($(head -c 600 err.txt))"
  grep -Eq -- "$re" err.txt || fail "no /$re/ in the messages of: $* ($(head -c 600 err.txt))"
}

case $class in
alias)
  cp "$model_dir/best.tclm" m.tclm && cp "$model_dir/checkpoint.tclm" ck.tclm
  zcat "$fixtures/matmul.json.gz" >c.json
  cp c.json c.orig && cp m.tclm m.orig && cp ck.tclm ck.orig
  ln -s c.json link.json
  expect 1 "--output 'c.json' is the same file as the input --input 'c.json'" "$tclm" predict -m m.tclm -i c.json -o c.json
  expect 1 "--output 'link.json' is the same file as the input --input 'c.json'" "$tclm" predict -m m.tclm -i c.json -o link.json
  expect 1 "--output 'm.tclm' is the same file as the input --model 'm.tclm'" "$tclm" predict -m m.tclm -i c.json -o m.tclm
  expect 1 "--json 'm.tclm' is the same file as the input --model" "$tclm" eval -m m.tclm -d c.json --json m.tclm
  expect 1 "--output 'c.json' is the same file as the input --input" "$tclm" sample -i c.json -o c.json
  expect 1 "--csv 'picked.json' and|--output 'picked.json' and --csv" bash -c "touch picked.json && '$tclm' sample -i c.json -o picked.json --csv picked.json"
  expect 1 "--out 'ck.tclm' is the same file as the input --checkpoint 'ck.tclm'" "$tclm" export -c ck.tclm -o ck.tclm
  mkdir -p recs && cp "$fixtures/conv2d.json.gz" recs/
  expect 1 "--json 'recs/conv2d.json.gz' is the same file as the input --data" "$tclm" info -d recs --json recs/conv2d.json.gz
  mkdir -p out && cp m.tclm out/best.tclm
  expect 1 "--out 'out/best.tclm' is the same file as the input --init" "$tclm" train -d "k80=$slice" --init out/best.tclm -o out --epochs 1 --quiet
  for f in c m ck; do cmp -s "$f".orig "$f".$([ $f = c ] && echo json || echo tclm) || fail "$f was changed"; done
  cmp -s "$fixtures/conv2d.json.gz" recs/conv2d.json.gz || fail "recs/conv2d.json.gz was changed"
  ;;
special)
  cp "$model_dir/best.tclm" m.tclm
  zcat "$fixtures/matmul.json.gz" >c.json
  "$tclm" predict -m m.tclm -i c.json -o expected.csv 2>/dev/null || fail "predict to a file"
  # A FIFO stays a FIFO and its reader gets the output.
  mkfifo fifo
  timeout 120 cat fifo >from_fifo.csv &
  reader=$!
  timeout 120 "$tclm" predict -m m.tclm -i c.json --format csv -o fifo 2>err.txt || fail "predict -o FIFO: $(cat err.txt)"
  [ -p fifo ] || { kill "$reader" 2>/dev/null; fail "the FIFO was replaced by a $(stat -c %F fifo)"; }
  wait "$reader"
  cmp -s expected.csv from_fifo.csv || fail "the FIFO's reader did not get the output"
  # A symbolic link stays a link; its target gets the output.
  echo old >target.csv && ln -s target.csv link.csv
  "$tclm" predict -m m.tclm -i c.json -o link.csv 2>/dev/null || fail "predict -o LINK"
  [ -L link.csv ] || fail "the symbolic link was replaced by a $(stat -c %F link.csv)"
  cmp -s expected.csv target.csv || fail "the link's target did not get the output"
  # A character device of our own (a copy of /dev/null's node, when this system lets us make one).
  if mknod mynull c 1 3 2>/dev/null; then
    "$tclm" predict -m m.tclm -i c.json -o mynull 2>/dev/null || fail "predict -o a character device"
    [ -c mynull ] || fail "the character device was replaced by a $(stat -c %F mynull)"
  fi
  # '-' is standard output for every output option; a full disk there is an error.
  "$tclm" export -c m.tclm -o - >exported.tclm 2>/dev/null || fail "export -o -"
  cmp -s m.tclm exported.tclm || fail "export -o - wrote other bytes"
  expect 1 "cannot write '?standard output'?: No space left on device" bash -c "'$tclm' predict -m m.tclm -i c.json -o - >/dev/full"
  expect 1 "standard output.*No space left on device" bash -c "'$tclm' info -d '$fixtures' >/dev/full"
  expect 1 "standard output.*No space left on device" bash -c "'$tclm' eval -m m.tclm -d c.json --all-tasks --json - >/dev/full"
  # A closed pipe, SIGPIPE ignored (as under some supervisors): EPIPE is an error, not exit 0.
  python3 - "$tclm" "$fixtures" <<'EOF' || fail "closed pipe"
import os, signal, subprocess, sys
r, w = os.pipe()
os.close(r)
p = subprocess.run([sys.argv[1], "info", "-d", sys.argv[2]], stdout=w, stderr=subprocess.PIPE,
                   preexec_fn=lambda: signal.signal(signal.SIGPIPE, signal.SIG_IGN))
if p.returncode == 0 or b"Broken pipe" not in p.stderr:
    sys.exit(f"exit {p.returncode}: {p.stderr.decode()[-300:]}")
EOF
  ;;
nonfinite)
  # Every command from `tclm --help`, every option its --help types FLOAT: each refuses a non-finite
  # value with exit 2 and a message naming the option. (Run where no data exists, so that an option
  # wrongly accepted fails fast instead of training.)
  commands=$("$tclm" --help | awk '/^Subcommands:/ { f = 1; next } f && /^  [a-z]/ { print $1 } f && /^$/ { f = 0 }')
  [ "$(echo "$commands" | wc -w)" -ge 10 ] || fail "found only these commands in tclm --help: $commands"
  # Every option gets nan and one infinity (in turn; the first option all of them). An infinity may
  # also be refused by the option's range check, which comes first.
  others=(inf -inf 1e999 -1e999 +inf Infinity)
  n=0
  for c in $commands; do
    for opt in $("$tclm" "$c" --help 2>/dev/null | grep -oE '^ +(-[A-Za-z],)?--[a-z0-9-]+ FLOAT' |
                 grep -oE -- '--[a-z0-9-]+'); do
      expect 2 "^$opt: must be a finite number \(got 'nan'\)" timeout 120 "$tclm" "$c" "$opt" nan
      if [ "$n" = 0 ]; then vs=("${others[@]}" NaN -nan); else vs=("${others[$((n % ${#others[@]}))]}"); fi
      for v in "${vs[@]}"; do
        expect 2 "^$opt: (must be a finite number|Value .* not in range)" timeout 120 "$tclm" "$c" "$opt" "$v"
      done
      n=$((n + 1))
    done
  done
  [ "$n" -ge 30 ] || fail "found only $n float options"
  echo "nonfinite: $n float options checked"
  ;;
twice)
  mkdir -p recs/sub && cp "$fixtures/conv2d.json.gz" "$fixtures/matmul.json.gz" recs/
  cp "$fixtures/sparse_dense.json.gz" recs/sub/
  "$tclm" info -d recs --json once.json >/dev/null 2>&1 || fail "info"
  once=$(grep -oE '"records": [0-9]+' once.json | head -1)
  ln -s .. recs/sub/up          # a cycle
  ln -s sub recs/sub_again      # a directory twice
  ln -s matmul.json.gz recs/matmul_link.json.gz  # a file twice
  ln -s recs recs_link
  "$tclm" info -d recs -d recs_link -d recs/matmul.json.gz --json twice.json >info.txt 2>&1 || fail "info: $(tail -3 info.txt)"
  twice=$(grep -oE '"records": [0-9]+' twice.json | head -1)
  [ "$once" = "$twice" ] || fail "read once: $once, with the links and repeats: $twice"
  grep -q "a directory above it (a cycle)" twice.json || fail "the cycle is not reported"
  grep -q "the same file as 'recs/matmul.json.gz'" twice.json || fail "the repeated file is not reported"
  grep -q "left out" info.txt || fail "info does not say what was left out"
  # The commands that load data say it on stderr.
  cp "$model_dir/best.tclm" m.tclm
  "$tclm" eval -m m.tclm -d recs -d recs_link --all-tasks >/dev/null 2>eval.txt
  grep -Eq "note: [0-9]+ record files or directories left out" eval.txt || fail "eval does not say: $(head -5 eval.txt)"
  ;;
costs)
  line=$(zcat "$fixtures/matmul.json.gz" | grep -v '^#' | head -1)
  echo "$line" >recs.json
  echo "$line" | sed -E 's/"r": \[\[[^]]*\]/"r": [[1e-40]/' >>recs.json
  echo "$line" | sed -E 's/"r": \[\[[^]]*\]/"r": [[5e-10, 2e-3]/' >>recs.json
  "$tclm" info -d recs.json --json info.json >/dev/null 2>&1 || fail "info"
  grep -q '"bad_costs": 2' info.json || fail "costs below 1e-9 s are not bad costs: $(grep -E 'bad_costs|programs' info.json)"
  grep -q '"programs": 1' info.json || fail "the implausible costs became programs"
  ;;
threads)
  cores=$(nproc)
  expect 1 "note: --threads 4096 is more than 4 x the $cores cores of this machine; using $((4 * cores))" \
    "$tclm" train --threads 4096 -d /nonexistent/records
  expect 1 "note: --threads 100000 is more than 4 x the $cores cores of this machine; using $((4 * cores))" \
    "$tclm" predict --threads 100000 -m /nonexistent.tclm -i x.json
  expect 2 "--threads: Value -1 not in range" "$tclm" predict --threads -1 -i x.json
  ;;
lock)
  # This shell holds the lock, as another run would (its own open of out/.lock).
  mkdir -p out
  exec 9>>out/.lock
  flock -n 9 || fail "cannot take the lock for the test"
  expect 1 "--out 'out' is in use by another tclm run" "$tclm" train -d "k80=$slice" --epochs 1 --quiet -o out
  expect 1 "--out 'out' is in use by another tclm run" "$tclm" compare -d "k80=$slice" --models mlp --epochs 1 --quiet -o out
  exec 9>&-
  [ ! -e out/best.tclm ] || fail "the refused run wrote out/best.tclm"
  ;;
python)
  # A Python in which the tclm package imports but its command modules do not (no TVM, no numpy).
  mkdir -p fake/tclm
  : >fake/tclm/__init__.py
  echo 'raise ImportError("No module named tvm (this Python is not set up)")' >fake/tclm/collect.py
  cp fake/tclm/collect.py fake/tclm/tune_bench.py
  cp fake/tclm/collect.py fake/tclm/tune.py
  printf '#!/bin/sh\nPYTHONPATH=%s exec python3 "$@"\n' "$work/fake" >python && chmod +x python
  for c in collect tune-bench tune; do
    TCLM_PYTHON=$work/python "$tclm" "$c" --help >help.txt 2>&1
    ! grep -q Traceback help.txt || fail "$c --help prints a traceback: $(cat help.txt)"
    grep -q "scripts/setup-python.sh" help.txt || fail "$c --help does not say what to run: $(cat help.txt)"
  done
  ;;
*)
  fail "unknown class"
  ;;
esac
echo "reliability $class: OK"
