#!/usr/bin/env python3
"""Copies a `tclm collect --scheduler ansor` collection into the repository's measured data,
data/measured/<platform>/ (data/measured/README.md): the record files of the tasks the collection
finished, gzip-compressed (byte-reproducible: no name or time in the gzip header); collect.json with
those tasks and their totals (a task still being measured when the collection stopped is left out and
listed under "left_out"); provenance.json and, when present, remeasure.json as they are.
The platform directory is replaced as a whole (built beside it, then renamed), so an interrupted
export leaves the previous one.

    scripts/export-measured.py out/measured-here            # -> data/measured/<platform>/
    scripts/export-measured.py out/measured-here DATA_DIR   # -> DATA_DIR/<platform>/
"""
import gzip
import json
import os
import shutil
import sys

COUNTS = ("pool", "sampled", "duplicates", "sampling_failures", "picked", "measured", "failed", "new", "seconds")


def main(argv):
    if len(argv) not in (2, 3) or argv[1] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    src = argv[1]
    root = argv[2] if len(argv) == 3 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data",
                                                        "measured")
    try:
        with open(os.path.join(src, "collect.json")) as f:
            report = json.load(f)
        with open(os.path.join(src, "provenance.json")) as f:
            provenance = json.load(f)
    except (OSError, ValueError) as e:
        print(f"export-measured: {src} is not a finished or resumable collection: {e}", file=sys.stderr)
        return 1
    platform = provenance["platform"]
    done = [t for t in report["tasks"] if t.get("status") == "done"]
    left_out = [t["workload_key"] for t in report["tasks"] if t.get("status") != "done"]
    if not done:
        print(f"export-measured: {src}: no finished task to export", file=sys.stderr)
        return 1
    dest = os.path.join(root, platform)
    tmp = dest + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.join(tmp, "records"))
    for t in done:
        name = t["records"]  # records/<index>-<hash>.json
        with open(os.path.join(src, name), "rb") as f:
            data = f.read()
        lines = sum(1 for line in data.split(b"\n") if line.strip())
        if lines != t["picked"]:
            print(f"export-measured: {src}/{name}: {lines} records, collect.json says {t['picked']} picked",
                  file=sys.stderr)
            return 1
        with open(os.path.join(tmp, name + ".gz"), "wb") as out:
            with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0) as z:
                z.write(data)
        t["records"] = name + ".gz"
    totals = {k: sum(t.get(k, 0) for t in done) for k in COUNTS}
    totals["seconds"] = round(totals["seconds"], 3)
    totals["tasks"] = totals["tasks_done"] = len(done)
    errors = {}
    for t in done:
        for k, n in t.get("errors", {}).items():
            errors[k] = errors.get(k, 0) + n
    totals["errors"] = errors
    report.update({"tasks": done, "totals": totals, "left_out": left_out})
    with open(os.path.join(tmp, "collect.json"), "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    for name in ("provenance.json", "remeasure.json"):
        if os.path.exists(os.path.join(src, name)):
            shutil.copyfile(os.path.join(src, name), os.path.join(tmp, name))
    old = dest + ".old"
    shutil.rmtree(old, ignore_errors=True)
    if os.path.exists(dest):
        os.rename(dest, old)
    os.rename(tmp, dest)
    shutil.rmtree(old, ignore_errors=True)
    print(f"export-measured: {len(done)} tasks, {totals['picked']} records ({totals['measured']} measured, "
          f"{totals['failed']} failed){f', {len(left_out)} unfinished task(s) left out' if left_out else ''} -> {dest}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
