#!/usr/bin/env bash
# tools/hold_out_records.py on real records (data/measured): the tasks of a "network" directory are
# left out of a tree wherever they occur (whole files, and the lines of a file that mixes them with
# other tasks), everything else is kept once, and tclm reads the view: exactly the records not held
# out, no line skipped (the report is no record file). The originals are untouched; an existing
# output and a malformed line are refused with the path.
# Usage: hold_out_records.sh TCLM REPO_ROOT
set -euo pipefail
tclm=$1 root=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
tool="$root/tools/hold_out_records.py"
src="$root/data/measured/intel-xeon-emeraldrapids-2c/records"
[ -d "$src" ] || fail "$src is missing"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/tree/net_a" "$T/tree/net_b" "$T/network"
files=("$src"/*.json.gz)
[ "${#files[@]}" -ge 6 ] || fail "expected at least 6 record files in $src"
# net_a: tasks 0-2; net_b: tasks 2-5 (task 2 occurs in both, as shared layers do). Held out: the
# "network" = tasks 1 and 2. net_b also gets a file mixing task 2's lines with task 5's.
cp "${files[0]}" "${files[1]}" "${files[2]}" "$T/tree/net_a/"
cp "${files[2]}" "${files[3]}" "${files[4]}" "$T/tree/net_b/"
(zcat "${files[2]}"; zcat "${files[5]}") > "$T/tree/net_b/mixed.json"
cp "${files[1]}" "${files[2]}" "$T/network/"
count() { local n=0 f; for f in "$@"; do n=$((n + $(zcat -f "$f" | grep -c '"i"'))); done; echo $n; }
n_all=$(count "$T"/tree/*/*)
n_held=$(( $(count "${files[1]}") + 3 * $(count "${files[2]}") ))
want=$((n_all - n_held))
before=$(cd "$T/tree" && find . -type f -exec md5sum {} + | sort)

python3 "$tool" --records "$T/tree" --hold-out "$T/network" -o "$T/view" > "$T/out.txt" ||
  fail "the tool failed: $(cat "$T/out.txt")"
grep -q "2 workload keys held out" "$T/out.txt" || fail "expected 2 keys held out: $(cat "$T/out.txt")"
grep -q "$n_held records left out (3 files whole, 1 filtered)" "$T/out.txt" || fail "$(cat "$T/out.txt")"
[ -L "$T/view/net_a/$(basename "${files[0]}")" ] || fail "a file with nothing held out should be a link"
[ ! -e "$T/view/net_a/$(basename "${files[1]}")" ] || fail "a held-out task's file is still there"
[ "$(grep -c '"i"' "$T/view/net_b/mixed.json")" -eq "$(count "${files[5]}")" ] ||
  fail "the mixed file should keep exactly task 5's lines"
"$tclm" info -d here="$T/view" --json "$T/info.json" > /dev/null 2> "$T/info.err" || fail "$(cat "$T/info.err")"
python3 - "$T/info.json" "$want" <<'PY' || fail "tclm does not read the view as expected (above)"
import json, sys
info, want = json.load(open(sys.argv[1])), int(sys.argv[2])
assert info["skipped_lines"] == 0, info["skipped_by_reason"]
assert info["records"] == want, (info["records"], want)
assert info["files"] == 4, info["files"]  # net_a: 1 link; net_b: 2 links and the filtered mixed.json
PY
after=$(cd "$T/tree" && find . -type f -exec md5sum {} + | sort)
[ "$before" = "$after" ] || fail "the input tree changed"

# refused WHAT MESSAGE HOLD_OUT: the tool, holding out HOLD_OUT, must fail with MESSAGE and leave no output.
refused() {
  local what=$1 msg=$2 out="$T/refused"
  python3 "$tool" --records "$T/tree" --hold-out "$3" -o "$out" 2> "$T/err" && fail "$what was not refused"
  grep -q -- "$msg" "$T/err" || fail "$what: no message '$msg': $(cat "$T/err")"
  [ ! -e "$out" ] || fail "$what: a refused run left an output"
}
python3 "$tool" --records "$T/tree" --hold-out "$T/network" -o "$T/view" 2> "$T/again.err" &&
  fail "an existing --out was not refused"
grep -q "exists" "$T/again.err" || fail "no message naming the existing output: $(cat "$T/again.err")"
echo '{"i": [["k"' > "$T/bad.json"
refused "a malformed line" "bad.json:1:" "$T/bad.json"
# A tclm collect collection as --hold-out: the workload keys of the networks it excluded (collect.json)
# are held out, the same view as the records of those tasks give; its records/ (the tasks it kept), a
# collection that excluded nothing, a MetaSchedule one and one made before the keys were recorded are
# refused with what to do.
key() { zcat "$1" | head -1 | python3 -c 'import json, sys; print(json.dumps(json.loads(sys.stdin.readline())["i"][0][0]))'; }
mkdir -p "$T/collection/records"
cp "${files[0]}" "$T/collection/records/"   # the collection's own (kept) tasks: not held out
printf '{"scheduler": "ansor", "task_extraction": {"excluded_workload_keys": {"net-x": [%s], "net-y": [%s]}}}\n' \
  "$(key "${files[1]}")" "$(key "${files[2]}")" > "$T/collection/collect.json"
python3 "$tool" --records "$T/tree" --hold-out "$T/collection" -o "$T/view3" > "$T/out3.txt" ||
  fail "the tool failed on a collection: $(cat "$T/out3.txt")"
grep -q "2 workload keys held out" "$T/out3.txt" || fail "expected the collection's 2 keys: $(cat "$T/out3.txt")"
grep -q "$n_held records left out (3 files whole, 1 filtered)" "$T/out3.txt" || fail "$(cat "$T/out3.txt")"
refused "a collection's records/" "give the collection" "$T/collection/records"
echo '{"scheduler": "ansor", "task_extraction": {"excluded_workload_keys": {}}}' > "$T/collection/collect.json"
refused "a collection that excluded no network" "excluded no network" "$T/collection"
echo '[{"workload": "x"}]' > "$T/collection/collect.json"
refused "a MetaSchedule collection" "collect.json: not a collection of tclm collect --scheduler ansor" "$T/collection"
echo '{"scheduler": "ansor", "task_extraction": {"kept": 3}}' > "$T/collection/collect.json"
refused "a collection without excluded keys" "collect.json: lists no excluded network's workload keys" \
  "$T/collection/collect.json"
echo "hold_out_records: $want of $n_all records kept, $n_held held out"
