#!/usr/bin/env python3
"""Pair two methods' final figures seed by seed across `tclm transfer` outputs.

`tclm transfer` writes the paired-by-seed table into transfer.md for the seeds of one run. When the
seeds ran as parallel jobs (`--first-seed S --seeds 1`, one --out each), the two methods ran in
different jobs, or the jobs held out different workloads (`--split-seed`), this script pairs them
from the jobs' phases.csv files, with the same rule as `paired_by_seed` (include/tclm/metrics.h):
per platform, the method's row of the last phase of each run; A minus B on the runs both have;
mean, sample std, each run's difference; "ahead" / "behind" when |mean| >= 0.0005 and the mean is
beyond one std of the differences, else "level"; with one common run the difference alone,
"(1 seed: no paired verdict)" (src/study/results.h).

A run is a held-out set and a seed. The held-out set is read from the transfer_options.txt that
`tclm transfer` writes beside every phases.csv (--split, --split-seed, --test-fraction,
--valid-fraction, --tuning-split; --sources and --target must agree too): rows pair only within one
set, so a mean over several sets of held-out workloads pairs each set's seed with the same set's seed.

    tools/paired_phases.py --a tcl out/o1-s0/phases.csv out/o1-s1/phases.csv \\
                           --b finetune out/o1-base/phases.csv --platforms mi50,k80

`--kept` reads one method instead of two: per earlier platform, its figure at the end of the run
minus its figure right after its own phase ("learn <platform>"), which says whether the platform was
kept ("lost" / "gained" / "level" by the same rule):

    tools/paired_phases.py --kept tcl out/o1-s*/phases.csv --platforms k80,v100

Only the standard library; prints one Markdown row per platform. It stops with an error, naming the
files, on a run that two files (or one file twice) report for the same method, on runs that end at
different phases (an unfinished job), on runs of one split seed whose other split options or platform
order differ, and on a phases.csv without its transfer_options.txt.
"""
import argparse
import csv
import os
import statistics
import sys

# The options that decide which workloads a run holds out (docs/design.md, "Dataset and splits"), and
# its platforms: runs pair only where all of them are equal.
SET_OPTIONS = ("split", "split-seed", "test-fraction", "valid-fraction", "tuning-split", "sources", "target")


def held_out_set(phases_csv):
    """(key, label) of the held-out set and platform order of the run that wrote `phases_csv`."""
    path = os.path.join(os.path.dirname(os.path.abspath(phases_csv)), "transfer_options.txt")
    try:
        with open(path) as fh:
            lines = fh.read().splitlines()
    except OSError:
        sys.exit(f"{phases_csv}: no transfer_options.txt beside it, so the workloads it held out are unknown "
                 "(tclm transfer writes one next to every phases.csv)")
    opts = {}
    for line in lines:
        key, sep, value = line.partition("=")
        if sep:
            opts[key.strip()] = value.strip().strip('"')
    missing = [k for k in SET_OPTIONS if k not in opts]
    if missing:
        sys.exit(f"{path}: no {', '.join(missing)} (not a transfer_options.txt of tclm transfer?)")
    label = opts["split-seed"] + (" (tuning)" if opts["tuning-split"] == "true" else "")
    return tuple(opts[k] for k in SET_OPTIONS), label


def read_rows(method, files, labels):
    """[(set_key, set_label, row)] of the method in `files`, each row with its "file:line" under "_at";
    a run reported twice is an error. `labels` ({label: (key, file)}, shared by every call of one
    table) catches two held-out sets or orders under one label."""
    out, seen = [], {}
    for f in files:
        key, label = held_out_set(f)
        if labels.setdefault(label, (key, f))[0] != key:
            other_key, other = labels[label]
            differ = [k for k, a, b in zip(SET_OPTIONS, key, other_key) if a != b]
            sys.exit(f"{f} and {other}: split seed {label}, but other {', '.join(differ)} "
                     "(runs of different held-out sets or platform orders): pair them in separate calls")
        with open(f, newline="") as fh:
            for line_no, r in enumerate(csv.DictReader(fh), start=2):
                if r.get("method") is None or r.get("phase_index") is None:
                    sys.exit(f"{f}:{line_no}: not a phases.csv row (no method / phase_index column)")
                if r["method"] != method:
                    continue
                try:
                    r["seed"], r["phase_index"] = int(r["seed"]), int(r["phase_index"])
                except ValueError:
                    sys.exit(f"{f}:{line_no}: seed '{r['seed']}' or phase_index '{r['phase_index']}' is not an integer")
                r["_at"] = f"{f}:{line_no}"
                where = (key, r["seed"], r["phase_index"], r["platform"])
                if where in seen:
                    sys.exit(f"{f}:{line_no}: {method}, seed {r['seed']}, phase {r['phase_index']}, {r['platform']} "
                             f"on split seed {label} is also in {seen[where]}: a run counted twice")
                seen[where] = r["_at"]
                out.append((key, label, r))
    if not out:
        sys.exit(f"no row of method {method} in {', '.join(files)}")
    return out


def by_run(rows, platform, phase=None):
    """{(set_key, seed): (set_label, row)}: the platform's row of the last phase of each run, or of `phase`."""
    these = [(k, lab, r) for k, lab, r in rows if r["platform"] == platform]
    last = {}
    for k, _, r in these:
        run = (k, r["seed"])
        last[run] = max(last.get(run, -1), r["phase_index"])
    if phase is None and len(set(last.values())) > 1:
        ends = "; ".join(f"{r['_at']} (split seed {lab}, seed {r['seed']}) at phase {r['phase_index']}"
                         for k, lab, r in these if r["phase_index"] == last[(k, r["seed"])])
        sys.exit(f"{these[0][2]['method']} on {platform}: the runs end at different phases ({ends}); "
                 "an unfinished run?")
    out = {}
    for k, lab, r in these:
        run = (k, r["seed"])
        if (r["phase"] == phase) if phase is not None else r["phase_index"] == last[run]:
            out[run] = (lab, r)
    return out


def paired(diffs, words=("ahead", "behind")):
    if not diffs:
        return "-"
    sign = lambda v: "+0.000" if f"{v:+.3f}" == "-0.000" else f"{v:+.3f}"
    if len(diffs) == 1:
        return f"{sign(diffs[0])} (1 seed: no paired verdict)"
    mean = statistics.mean(diffs)
    std = statistics.stdev(diffs)
    verdict = "level"
    if abs(mean) >= 0.0005:
        verdict = words[0] if mean - std > 0 else words[1] if mean + std < 0 else "level"
    return f"{sign(mean)} ± {std:.3f} (" + ", ".join(sign(d) for d in diffs) + f") {verdict}"


def label_order(label):
    """Held-out sets sort by split seed, the tuning split after the test split."""
    return int(label.split()[0]), label


def runs_cell(runs, labels):
    """'0,1,2' for one held-out set; 'split seed 1: 0,1; split seed 3: 0' for several."""
    if not runs:
        return "-"
    sets = sorted({r[0] for r in runs}, key=lambda k: label_order(labels[k]))
    if len(sets) == 1:
        return ",".join(str(s) for _, s in runs)
    return "; ".join(f"split seed {labels[k]}: " + ",".join(str(s) for kk, s in runs if kk == k) for k in sets)


def number(row, column):
    try:
        return float(row[column])
    except (TypeError, ValueError):
        sys.exit(f"{row['_at']}: {column} '{row.get(column)}' is not a number")


def table(title, platforms, pairs_of, words):
    """Prints the table once every row is computed, so that an error leaves no partial table."""
    lines = [f"| {title} | seeds | top-1 pooled | top-1 task mean | top-5 |", "|---|---|---|---|---|"]
    for plat in platforms:
        a, b = pairs_of(plat)
        labels = {k: lab for (k, _), (lab, _) in list(a.items()) + list(b.items())}
        runs = sorted(set(a) & set(b), key=lambda run: (label_order(labels[run[0]]), run[1]))
        cells = [paired([number(a[run][1], c) - number(b[run][1], c) for run in runs], words)
                 for c in ("top1", "top1_task_mean", "top5")]
        lines.append(f"| {plat} | {runs_cell(runs, labels)} | " + " | ".join(cells) + " |")
    print("\n".join(lines))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--a", nargs="+", metavar=("METHOD", "PHASES_CSV"), help="method, then its phases.csv files")
    p.add_argument("--b", nargs="+", metavar=("METHOD", "PHASES_CSV"), help="method, then its phases.csv files")
    p.add_argument("--kept", nargs="+", metavar=("METHOD", "PHASES_CSV"),
                   help="instead of --a and --b: method, then its phases.csv files; each platform at the end "
                        "minus right after its own phase")
    p.add_argument("--platforms", required=True, help="comma-separated platforms (target first, by habit)")
    o = p.parse_args()
    platforms = o.platforms.split(",")
    if o.kept is not None:
        if o.a is not None or o.b is not None:
            p.error("--kept reads one method: give it without --a and --b")
        if len(o.kept) < 2:
            p.error("--kept needs a method and at least one phases.csv")
        rows = read_rows(o.kept[0], o.kept[1:], {})
        for plat in platforms:
            if not any(r["platform"] == plat and r["phase"] == "learn " + plat for _, _, r in rows):
                sys.exit(f"--kept: {o.kept[0]} has no phase 'learn {plat}' in {', '.join(o.kept[1:])} "
                         f"({plat} is not a platform it learned)")
        table(f"{o.kept[0]}: end - after its own phase", platforms,
              lambda plat: (by_run(rows, plat), by_run(rows, plat, "learn " + plat)), ("gained", "lost"))
        return
    if o.a is None or o.b is None or len(o.a) < 2 or len(o.b) < 2:
        p.error("--a and --b each need a method and at least one phases.csv")
    labels = {}
    a, b = read_rows(o.a[0], o.a[1:], labels), read_rows(o.b[0], o.b[1:], labels)
    table(f"{o.a[0]} - {o.b[0]}", platforms, lambda plat: (by_run(a, plat), by_run(b, plat)), ("ahead", "behind"))


if __name__ == "__main__":
    main()
