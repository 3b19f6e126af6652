#!/usr/bin/env bash
# The measured data that ships in data/measured (data/measured/README.md): every platform there is read
# by name (`tclm info -d NAME`) and every record parses: the records are the programs collect.json says
# were picked, the measured ones are tclm's programs, the failed ones its errors, no line is skipped;
# tasks are those with a successful measurement; provenance.json names the platform of its directory.
# Usage: measured_data.sh TCLM MEASURED_DIR
set -euo pipefail
tclm=$1 dir=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
TMPDIR_INFO=$(mktemp -d)
trap 'rm -rf "$TMPDIR_INFO"' EXIT
n=0
for p in "$dir"/*/; do
  [ -d "$p/records" ] || continue
  name=$(basename "$p")
  "$tclm" info -d "$name" --json "$TMPDIR_INFO/$name.json" >/dev/null 2>"$TMPDIR_INFO/$name.err" ||
    fail "tclm info -d $name: $(tail -3 "$TMPDIR_INFO/$name.err")"
  python3 - "$p" "$TMPDIR_INFO/$name.json" "$name" <<'PY' || fail "$name: the records do not match collect.json (above)"
import json, sys
d, info_path, name = sys.argv[1], sys.argv[2], sys.argv[3]
info = json.load(open(info_path))
report = json.load(open(d + "/collect.json"))
prov = json.load(open(d + "/provenance.json"))
tot = report["totals"]
assert prov["platform"] == name, f"provenance.json names platform {prov['platform']}, its directory {name}"
assert info["skipped_lines"] == 0, info["skipped_by_reason"]
assert info["files"] == len(report["tasks"]) == tot["tasks"], (info["files"], tot["tasks"])
(plat,) = info["platforms"]
assert plat["name"] == name, plat["name"]
assert info["records"] == tot["picked"], (info["records"], tot["picked"])
assert plat["programs"] == tot["measured"] and plat["errors"] == tot["failed"], (plat, tot)
assert plat["tasks"] == sum(1 for t in report["tasks"] if t["measured"] > 0), plat
print(f"{name}: {tot['tasks']} tasks, {info['records']} records, {plat['programs']} programs measured")
PY
  n=$((n + 1))
done
# A bare name that is neither a path nor a measured platform is refused, naming where it was looked for.
if msg=$("$tclm" info -d no-such-platform-here 2>&1); then fail "-d no-such-platform-here was accepted"; fi
case $msg in *"no platform of that name in"*measured*) ;; *) fail "-d of an unknown platform: $msg" ;; esac
echo "measured data: OK ($n platform(s))"
