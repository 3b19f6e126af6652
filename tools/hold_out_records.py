#!/usr/bin/env python3
"""A view of an Ansor record tree without the tasks of a held-out network, for tuning benchmarks.

A benchmark that tunes a network must not train on that network's tasks (TenSet's and TLP's rule).
Public record sets often include the network itself, e.g. tvm_ansor_bench/original-results-01/
resnet_18, and the same tasks again inside other networks (ResNet-50 shares layers with ResNet-18).
This writes OUT, a tree shaped like --records in which every task (workload key) that occurs under
any --hold-out path is left out, everywhere:

    tools/hold_out_records.py --records ../shared/data/tvm_ansor_bench \\
        --hold-out ../shared/data/tvm_ansor_bench/original-results-01/resnet_18 \\
        --hold-out out/collect-ansor -o out/cpu24-held-out
    build/tclm transfer -d cpu24=out/cpu24-held-out ...

A --hold-out path is a record file or tree, or a collection of `tclm collect --scheduler ansor` (its
directory or its collect.json): the tasks of the networks it was told to exclude
(--exclude-networks, extracted for the collection's own target) are held out. The networks a
benchmark tunes are the ones its collection excludes, so one view serves all of them.

A file none of whose records is held out becomes a symbolic link to the original (no copy); a file
all of whose records are held out is left out; a file with both is written filtered (gzip when the
original is). Lines that are not records (blank, comments) are kept as they are; a line that does
not parse is an error naming the file and line. OUT must not exist yet (nothing is overwritten).
Prints what was held out, per top-level directory, and writes the same to OUT/held_out.txt (not
.json: tclm reads every .json file of a tree as records).

Only the standard library.
"""
import argparse
import gzip
import json
import os
import sys


def collection_keys(path):
    """The workload keys of the excluded networks of a `tclm collect` collection (its directory or its
    collect.json), or None when `path` is no collection."""
    report = os.path.join(path, "collect.json") if os.path.isdir(path) else path
    if os.path.basename(report) != "collect.json" or not os.path.isfile(report):
        parent = os.path.dirname(os.path.abspath(path.rstrip("/")))
        if os.path.isfile(os.path.join(parent, "collect.json")):
            sys.exit(f"--hold-out {path}: the records of a tclm collect collection are the tasks it kept; give the "
                     f"collection ({parent}) to hold out the networks it excluded")
        return None
    with open(report, encoding="utf-8") as f:
        try:
            info = json.load(f)
        except ValueError as e:
            sys.exit(f"{report}: not JSON ({e})")
    if not isinstance(info, dict) or info.get("scheduler") != "ansor":
        sys.exit(f"{report}: not a collection of tclm collect --scheduler ansor (a MetaSchedule collection has no "
                 f"excluded networks' keys)")
    per_net = (info.get("task_extraction") or {}).get("excluded_workload_keys")
    if per_net is None:
        sys.exit(f"{report}: lists no excluded network's workload keys (a collection made before they were "
                 f"recorded: rerun its tclm collect command, which keeps what was measured, or give the excluded "
                 f"networks' records as --hold-out)")
    if not isinstance(per_net, dict) or not all(isinstance(k, list) for k in per_net.values()):
        sys.exit(f"{report}: task_extraction.excluded_workload_keys is not a map of network -> list of keys")
    return {n: list(keys) for n, keys in per_net.items()}


def record_files(root):
    """Every record file under root (or root itself), sorted."""
    if os.path.isfile(root):
        return [root]
    out = []
    for d, _, files in os.walk(root, followlinks=True):
        out += [os.path.join(d, f) for f in files if f.endswith((".json", ".log", ".json.gz", ".log.gz"))]
    return sorted(out)


def read_lines(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return f.readlines()


def workload_key(line, path, line_no):
    """The record's workload key, or None for a line that is no record (blank or a comment)."""
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    try:
        return json.loads(text)["i"][0][0]
    except (ValueError, KeyError, IndexError, TypeError) as e:
        sys.exit(f"{path}:{line_no}: not an Ansor measure record ({type(e).__name__}: {e})")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", required=True, help="record tree (or file) to filter")
    p.add_argument("--hold-out", action="append", required=True, metavar="PATH",
                   help="what to hold out (repeatable): records whose workload keys are held out (the network's "
                        "directory in the public set, a tuning log of the network, ...), or a tclm collect "
                        "collection (directory or collect.json): the tasks of the networks it excluded")
    p.add_argument("-o", "--out", required=True, help="output directory (must not exist)")
    a = p.parse_args(argv)
    if os.path.lexists(a.out):
        p.error(f"--out {a.out} exists; give a new directory")
    held = set()
    for h in a.hold_out:
        nets = collection_keys(h)
        if nets is not None:
            if not any(nets.values()):
                p.error(f"--hold-out {h}: the collection excluded no network (tclm collect --exclude-networks)")
            for keys in nets.values():
                held.update(keys)
            continue
        files = record_files(h)
        if not files:
            p.error(f"--hold-out {h}: no record files (.json, .log, plain or .gz)")
        for f in files:
            for i, line in enumerate(read_lines(f), start=1):
                k = workload_key(line, f, i)
                if k is not None:
                    held.add(k)
    src = os.path.abspath(a.records)
    files = record_files(src)
    if not files:
        p.error(f"--records {a.records}: no record files")
    tmp = a.out.rstrip("/") + ".partial"
    if os.path.lexists(tmp):
        p.error(f"{tmp} exists (an interrupted run?); remove it first")
    report = {"files_linked": 0, "files_left_out": 0, "files_filtered": 0, "records_left_out": 0,
              "records_kept": 0, "left_out_per_directory": {}}
    for f in files:
        rel = os.path.relpath(f, src) if os.path.isdir(src) else os.path.basename(f)
        top = os.path.dirname(rel) or "."
        lines = read_lines(f)
        keep, dropped, kept = [], 0, 0
        for i, line in enumerate(lines, start=1):
            k = workload_key(line, f, i)
            if k is not None and k in held:
                dropped += 1
            else:
                keep.append(line)
                kept += k is not None
        report["records_left_out"] += dropped
        report["records_kept"] += kept
        if dropped:
            report["left_out_per_directory"][top] = report["left_out_per_directory"].get(top, 0) + dropped
        target = os.path.join(tmp, rel)
        if dropped and not kept:
            report["files_left_out"] += 1
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not dropped:
            os.symlink(f, target)
            report["files_linked"] += 1
            continue
        opener = gzip.open if f.endswith(".gz") else open
        with opener(target, "wt", encoding="utf-8") as out:
            out.writelines(keep)
        report["files_filtered"] += 1
    lines = [f"{len(held)} workload keys held out (from {', '.join(a.hold_out)}): {report['records_left_out']} "
             f"records left out ({report['files_left_out']} files whole, {report['files_filtered']} filtered), "
             f"{report['records_kept']} kept in {report['files_linked'] + report['files_filtered']} files of "
             f"{a.records}"]
    lines += [f"  {d}: {n} records left out" for d, n in sorted(report["left_out_per_directory"].items())]
    os.makedirs(tmp, exist_ok=True)
    with open(os.path.join(tmp, "held_out.txt"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    os.rename(tmp, a.out)
    print("\n".join(lines) + f"\n-> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
