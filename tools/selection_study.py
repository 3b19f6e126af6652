#!/usr/bin/env python3
"""Which validation figure should pick the kept epoch? Replays early stopping on learning curves.

usage: selection_study.py CURVES_CSV [--patience 3 --epochs 6 --warmup 0.05] [--csv OUT_CSV]

CURVES_CSV is `tclm study-sampling --curves` output of runs with a patience so large that every
planned epoch ran. The trainer's trajectory does not depend on which epoch it keeps, so early
stopping under any selection rule can be replayed exactly from the curves: walk the epochs, keep
the best one by the rule's validation figure, stop after `patience` epochs without a better one
(patience scaled like the trainer's: ceil(patience * planned epochs / --epochs)), report the kept
epoch's test figures. Rules:

  top1      validation top-1 task mean, ties broken by validation pairwise accuracy (the trainer's
            earlier rule)
  top5      validation top-5 task mean, ties by pairwise
  pairwise  validation pairwise accuracy, ties by validation top-1 task mean
  last      no early stopping: the last planned epoch
  oracle    the epoch with the best test top-1 task mean (an upper bound, not a rule)

Epochs that end inside the learning-rate warm-up are never kept once a later one exists (as in
the trainer); the warm-up's epoch count is estimated from the planned epochs (the curves do not
hold the steps per epoch): max(1, ceil(warmup * planned epochs)). This matches the trainer when
--min-steps sets the planned epochs (steps per epoch * planned ~ min-steps), not in general: the
replay is exact only then.
Prints a markdown table: mean over runs of the kept epoch's test top-1 (pooled and task mean) and
top-5 (pooled), per rule and per (sampler, rate); and how often each rule's run falls below a
random ranking's pooled top-5 when --random-top5 is given.
"""
import argparse
import csv
import math
import statistics
from collections import OrderedDict

RULES = ["top1", "top5", "pairwise", "last", "oracle"]


def key_of(rule, e):
    if rule == "top1":
        return (e["valid_top1_task_mean"], e["valid_pairwise"])
    if rule == "top5":
        return (e["valid_top5_task_mean"], e["valid_pairwise"])
    if rule == "pairwise":
        return (e["valid_pairwise"], e["valid_top1_task_mean"])
    raise ValueError(rule)


def better(a, b):
    """a > b with the trainer's tolerances (1e-9 on the first figure, 1e-6 on the tie-breaker)."""
    if a[0] > b[0] + 1e-9:
        return True
    return len(a) > 1 and a[0] > b[0] - 1e-9 and a[1] > b[1] + 1e-6


def replay(epochs, rule, patience0, epochs0, warmup):
    planned = len(epochs)
    if rule == "last":
        return epochs[-1]
    if rule == "oracle":
        return max(epochs, key=lambda e: e["test_top1_task_mean"])
    patience = math.ceil(patience0 * planned / epochs0) if planned > epochs0 else patience0
    first_selectable = max(1, math.ceil(warmup * planned))
    best, since = None, 0
    for e in epochs:
        k = key_of(rule, e)
        improved = (best is None or (e["epoch"] >= first_selectable > best["epoch"]) or better(k, key_of(rule, best)))
        if improved:
            best, since = e, 0
        else:
            since += 1
        if since >= patience:
            break
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("curves")
    ap.add_argument("--patience", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--warmup", type=float, default=0.05)
    ap.add_argument("--random-top5", type=float, default=None, help="a random ranking's pooled test top-5")
    ap.add_argument("--csv", help="write every run's kept epoch per rule here")
    args = ap.parse_args()

    runs = OrderedDict()
    with open(args.curves, newline="") as f:
        for r in csv.DictReader(f):
            e = {k: (float(v) if k not in ("sampler",) else v) for k, v in r.items()}
            e["epoch"] = int(e["epoch"])
            runs.setdefault((r["sampler"], float(r["rate"]), int(r["seed"])), []).append(e)
    kept = []  # (run, rule, epoch entry)
    for run, epochs in runs.items():
        epochs.sort(key=lambda e: e["epoch"])
        for rule in RULES:
            kept.append((run, rule, replay(epochs, rule, args.patience, args.epochs, args.warmup), len(epochs)))

    def mean_std(v):
        return (statistics.mean(v), statistics.stdev(v) if len(v) > 1 else 0.0)

    print(f"{len(runs)} runs from {args.curves}; patience {args.patience} of {args.epochs} epochs (scaled)\n")
    for metric, name in [("test_top1_task_mean", "test top-1 task mean"), ("test_top1", "test top-1 pooled"),
                         ("test_top5", "test top-5 pooled")]:
        cells = OrderedDict()
        for run, rule, e, _ in kept:
            cells.setdefault((run[0], run[1]), OrderedDict()).setdefault(rule, []).append(e[metric])
            cells.setdefault(("all runs", 0), OrderedDict()).setdefault(rule, []).append(e[metric])
        print(f"{name} of the kept epoch, mean ± std over the runs of a cell\n")
        print("| sampler | rate | " + " | ".join(RULES) + " |")
        print("|---|---|" + "---|" * len(RULES))
        cells.move_to_end(("all runs", 0))
        for (sampler, rate), by_rule in cells.items():
            rate_s = "" if sampler == "all runs" else f"{100 * rate:g}%"
            vals = []
            for rule in RULES:
                m, s = mean_std(by_rule[rule])
                vals.append(f"{m:.3f} ± {s:.3f}" if len(by_rule[rule]) > 1 else f"{m:.3f}")
            print(f"| {sampler} | {rate_s} | " + " | ".join(vals) + " |")
        print()
    # How closely each validation figure follows the test figure across a run's epochs.
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):  # ties share their mean rank
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2
            i = j + 1
        return r

    def spearman(a, b):
        ra, rb = ranks(a), ranks(b)
        ma, mb = statistics.mean(ra), statistics.mean(rb)
        cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
        va = sum((x - ma) ** 2 for x in ra)
        vb = sum((y - mb) ** 2 for y in rb)
        return cov / math.sqrt(va * vb) if va > 0 and vb > 0 else 0.0

    print("Spearman correlation across a run's epochs between a validation figure and the test top-1 task "
          "mean, mean ± std over runs:")
    for fig in ["valid_top1_task_mean", "valid_top5_task_mean", "valid_pairwise"]:
        rhos = [spearman([e[fig] for e in ep], [e["test_top1_task_mean"] for e in ep]) for ep in runs.values()]
        m, sd = mean_std(rhos)
        print(f"  {fig:22s} {m:.3f} ± {sd:.3f}")
    print()
    if args.random_top5 is not None:
        print(f"runs whose kept epoch falls below a random ranking's pooled top-5 ({args.random_top5:.3f}):")
        for rule in RULES:
            n = sum(1 for _, r, e, _ in kept if r == rule and e["test_top5"] < args.random_top5)
            print(f"  {rule:9s} {n} of {len(runs)}")
        print()
    print("kept epoch per run (of the planned epochs):")
    for run in runs:
        es = {rule: e["epoch"] for r0, rule, e, _ in kept if r0 == run}
        print(f"  {run[0]:7s} {100 * run[1]:4g}% seed {run[2]}: " +
              ", ".join(f"{rule} {es[rule]}" for rule in RULES) + f" (of {len(runs[run])})")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["sampler", "rate", "seed", "rule", "epoch", "planned_epochs", "test_top1", "test_top5",
                        "test_top1_task_mean", "test_top5_task_mean", "test_pairwise"])
            for run, rule, e, n in kept:
                w.writerow([run[0], run[1], run[2], rule, e["epoch"], n, e["test_top1"], e["test_top5"],
                            e["test_top1_task_mean"], e["test_top5_task_mean"], e["test_pairwise"]])


if __name__ == "__main__":
    main()
