#!/usr/bin/env python3
"""What each sampler's picks look like, before any model is trained on them
(docs/experiments/sampler.md, "What the picks hold").

For every task (workload key) of a directory of Ansor records with at least --min-programs valid
programs, every sampler picks --fraction of the task's programs in one cold-start round
(tclm.select_samples without uncertainty: rdu = R + D; the study's RDU picks half of its budget this
way from the training tasks, then the other half with uncertainty) from the pooled step features, for
--seeds seeds; the picks are then compared with the task's true latencies:

  top10_share  share of the picks among the task's 10% fastest programs (random: 0.10 in expectation)
  top1_share   share of the picks among the task's 1% fastest programs (random: 0.01)
  best_ratio   the task's best latency / the best picked latency (1 = the best program was picked;
               the labels of a study are normalized by the best *picked* program)
  spread       std of log latency over the picks / over the task (< 1: the picks are more alike
               than the task's programs)
  shift        mean log latency of the picks - of the task (> 0: the picks are slower on average)

Needs the tclm Python package (scripts/setup-python.sh; run it with .venv-tvm/bin/python).

    .venv-tvm/bin/python tools/sampler_pick_stats.py ../shared/data/roller_osdi22/k80 --out out/pick-stats.csv
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import sys

import numpy as np

import tclm

SAMPLERS = {
    "random": dict(method="random"),
    "rdu": dict(method="rdu"),
    "rdu-prefilter1": dict(method="rdu", prefilter_fraction=1.0),
    "rdu-D-only": dict(method="rdu", prefilter_fraction=1.0, w_repr=0.0),
    "kcenter": dict(method="kcenter"),
}
METRICS = ["top10_share", "top1_share", "best_ratio", "spread", "shift"]


def record_files(root):
    """root itself when it is a file, else every file below it but notes (.md, .txt), sorted."""
    if os.path.isfile(root):
        return [root]
    out = []
    for dirpath, _, names in os.walk(root):
        out += [os.path.join(dirpath, n) for n in names if not n.endswith((".md", ".txt"))]
    return sorted(out)


def read_tasks(root):
    """workload key -> [(record line, mean cost in seconds)] of the valid records under root; also the
    number of lines skipped (not JSON, error_no != 0, no positive finite cost, not UTF-8)."""
    tasks, skipped = {}, 0
    for path in record_files(root):
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", errors="replace") as f:
            for line in f:
                if not line.strip() or line.startswith("#"):
                    continue
                try:
                    rec = json.loads(line)
                    costs = [float(c) for c in rec["r"][0]]
                    ok = rec["r"][1] == 0 and costs and all(0 < c < 1e9 for c in costs)
                    key = rec["i"][0][0]
                except (ValueError, KeyError, IndexError, TypeError):
                    ok = False
                if not ok:
                    skipped += 1
                    continue
                tasks.setdefault(key, []).append((line.rstrip("\n"), float(np.mean(costs))))
    return tasks, skipped


def pick_stats(lat, pick):
    n, b = len(lat), len(pick)
    order = np.argsort(lat, kind="stable")
    top10 = set(order[:max(1, n // 10)].tolist())
    top1 = set(order[:max(1, n // 100)].tolist())
    picked = set(pick.tolist())
    pl, ll = np.log(lat[pick]), np.log(lat)
    return {"top10_share": len(top10 & picked) / b, "top1_share": len(top1 & picked) / b,
            "best_ratio": float(lat.min() / lat[pick].min()), "spread": float(np.std(pl) / max(np.std(ll), 1e-12)),
            "shift": float(np.mean(pl) - np.mean(ll))}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data", help="directory (or file) of Ansor records, plain or .gz")
    p.add_argument("--fraction", type=float, default=0.1, help="share of every task's programs to pick")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--min-programs", type=int, default=100, help="tasks with fewer valid programs are left out")
    p.add_argument("--samplers", default=",".join(SAMPLERS), help="comma-separated: " + ", ".join(SAMPLERS))
    p.add_argument("--out", default=None, help="CSV with one row per task, sampler and seed")
    a = p.parse_args(argv)
    samplers = [s for s in a.samplers.split(",") if s]
    for s in samplers:
        if s not in SAMPLERS:
            p.error(f"--samplers: unknown sampler '{s}' ({', '.join(SAMPLERS)})")
    tasks, skipped = read_tasks(a.data)
    kept = {k: v for k, v in sorted(tasks.items()) if len(v) >= a.min_programs}
    print(f"{len(tasks)} tasks, {len(kept)} with >= {a.min_programs} valid programs; {skipped} records skipped "
          f"(error_no != 0, bad cost or unreadable)", file=sys.stderr)
    if not kept:
        p.error(f"no task of {a.data} has >= {a.min_programs} valid programs")
    rows = []
    for key, recs in kept.items():
        lat = np.array([c for _, c in recs])
        try:
            x, mask = tclm.featurize([line for line, _ in recs])
        except ValueError as e:  # one unreadable program: leave the task out, say which
            print(f"task {key}: left out, its records cannot be featurized ({e})", file=sys.stderr)
            continue
        points = tclm.pool_features(x, mask)
        budget = max(2, int(np.ceil(a.fraction * len(recs) - 1e-9)))
        for s in samplers:
            for seed in range(a.seeds):
                pick = tclm.select_samples(points, budget, seed=seed, **SAMPLERS[s])
                rows.append({"task": key, "programs": len(recs), "sampler": s, "seed": seed, **pick_stats(lat, pick)})
    if a.out:
        tmp = a.out + ".tmp"
        with open(tmp, "w", newline="") as f:
            w = csv.DictWriter(f, ["task", "programs", "sampler", "seed"] + METRICS)
            w.writeheader()
            w.writerows(rows)
        os.replace(tmp, a.out)
    print(f"| sampler ({a.fraction:g} of each of {len(kept)} tasks, {a.seeds} seeds) | " + " | ".join(METRICS) + " |")
    print("|---|" + "---|" * len(METRICS))
    for s in samplers:
        vals = [[r[m] for r in rows if r["sampler"] == s] for m in METRICS]
        print(f"| {s} | " + " | ".join(f"{np.mean(v):.3f}" for v in vals) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
