#!/usr/bin/env python3
"""Pair two methods' final figures seed by seed across `tclm transfer` outputs.

`tclm transfer` writes the paired-by-seed table into transfer.md for the seeds of one run. When the
seeds ran as parallel jobs (`--first-seed S --seeds 1`, one --out each), or the two methods ran in
different jobs, this script pairs them from the jobs' phases.csv files, with the same rule as
`paired_by_seed` (include/tclm/metrics.h): per platform, the method's row of the last phase of each
seed; A minus B on the seeds both have; mean, sample std, each seed's difference; "ahead" /
"behind" when |mean| >= 0.0005 and the mean is beyond one std of the differences, else "level";
with one common seed the difference alone, "(1 seed: no paired verdict)" (src/study/results.h).

    tools/paired_phases.py --a tcl out/o1-s0/phases.csv out/o1-s1/phases.csv \\
                           --b finetune out/o1-base/phases.csv --platforms mi50,k80

Only the standard library; prints one Markdown row per platform.
"""
import argparse
import csv
import statistics
import sys


def final_rows(method, files):
    """{platform: {seed: row}} of the method's last phase per platform and seed."""
    rows = []
    for f in files:
        with open(f, newline="") as fh:
            for line_no, r in enumerate(csv.DictReader(fh), start=2):
                if r.get("method") is None or r.get("phase_index") is None:
                    sys.exit(f"{f}:{line_no}: not a phases.csv row (no method / phase_index column)")
                if r["method"] == method:
                    rows.append(r)
    out = {}
    for plat in {r["platform"] for r in rows}:
        these = [r for r in rows if r["platform"] == plat]
        last = max(int(r["phase_index"]) for r in these)
        out[plat] = {int(r["seed"]): r for r in these if int(r["phase_index"]) == last}
    return out


def paired(diffs):
    if not diffs:
        return "-"
    sign = lambda v: "+0.000" if f"{v:+.3f}" == "-0.000" else f"{v:+.3f}"
    if len(diffs) == 1:
        return f"{sign(diffs[0])} (1 seed: no paired verdict)"
    mean = statistics.mean(diffs)
    std = statistics.stdev(diffs)
    verdict = "level"
    if abs(mean) >= 0.0005:
        verdict = "ahead" if mean - std > 0 else "behind" if mean + std < 0 else "level"
    return f"{sign(mean)} ± {std:.3f} (" + ", ".join(sign(d) for d in diffs) + f") {verdict}"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--a", nargs="+", required=True, metavar=("METHOD", "PHASES_CSV"), help="method, then its phases.csv files")
    p.add_argument("--b", nargs="+", required=True, metavar=("METHOD", "PHASES_CSV"), help="method, then its phases.csv files")
    p.add_argument("--platforms", required=True, help="comma-separated platforms (target first, by habit)")
    o = p.parse_args()
    if len(o.a) < 2 or len(o.b) < 2:
        p.error("--a and --b each need a method and at least one phases.csv")
    a, b = final_rows(o.a[0], o.a[1:]), final_rows(o.b[0], o.b[1:])
    print(f"| {o.a[0]} - {o.b[0]} | seeds | top-1 pooled | top-1 task mean | top-5 |")
    print("|---|---|---|---|---|")
    for plat in o.platforms.split(","):
        sa, sb = a.get(plat, {}), b.get(plat, {})
        seeds = sorted(set(sa) & set(sb))
        cells = [paired([float(sa[s][c]) - float(sb[s][c]) for s in seeds]) for c in ("top1", "top1_task_mean", "top5")]
        print(f"| {plat} | {','.join(map(str, seeds)) or '-'} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
