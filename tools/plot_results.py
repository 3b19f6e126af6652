#!/usr/bin/env python3
"""Draws the PNG plots of tclm's CSV outputs (called by the tclm commands; runnable by hand).

usage: plot_results.py KIND CSV PNG
  compare   tclm compare: top-1 / top-5 per model (mean over seeds, error bar = std)
  sweep     tclm sweep: test top-1 against each varied Mamba hyper-parameter (the paper's Table 2)
  sampling  tclm study-sampling: test top-1 against the sampling rate, one line per sampler (Fig. 7)
  transfer  tclm transfer: each platform's top-1 across the phases of the pipeline (Fig. 8)
  curves    tclm study-sampling --curves (curves.csv): per run, the validation top-1 task mean and
            pairwise accuracy and the test top-1 (task mean and pooled) against the epoch
  tune      tclm tune-bench (tune.csv): best latency against measurements and against wall time,
            one line per model (median over seeds), one row of panels per workload
Needs matplotlib (Debian: python3-matplotlib).
"""
import csv
import statistics
import sys
from collections import OrderedDict, defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def mean_std(values):
    values = [float(v) for v in values]
    if not values:
        return 0.0, 0.0
    return statistics.mean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def plot_compare(rows, png):
    by_model = OrderedDict()
    for r in rows:
        by_model.setdefault(r["model"], []).append(r)
    models = list(by_model)
    fig, ax = plt.subplots(figsize=(1.6 * len(models) + 2, 4))
    width = 0.38
    for i, metric in enumerate(["top1", "top5"]):
        ms = [mean_std([r[metric] for r in by_model[m]]) for m in models]
        ax.bar([x + (i - 0.5) * width for x in range(len(models))], [m for m, _ in ms], width,
               yerr=[s for _, s in ms], capsize=3, label=metric.replace("top", "top-"))
    rnd = float(rows[0]["random_top1"])
    ax.axhline(rnd, color="grey", linestyle=":", label=f"random top-1 ({rnd:.2f})")
    ax.set_xticks(range(len(models)))
    ax.set_xticklabels([f"{m}\n{int(float(by_model[m][0]['bytes'])) / 1e6:.2f} MB" for m in models])
    ax.set_ylabel("test top-k score (pooled)")
    ax.set_ylim(0, 1.05)
    ax.legend(loc="lower right")
    ax.set_title("cost models on held-out tasks")
    fig.tight_layout()
    fig.savefig(png, dpi=120)


def plot_sweep(rows, png):
    params = OrderedDict()
    for r in rows:
        params.setdefault(r["parameter"], []).append(r)
    fig, axes = plt.subplots(1, len(params), figsize=(3.2 * len(params), 3.4), squeeze=False)
    for ax, (param, rs) in zip(axes[0], params.items()):
        by_value = defaultdict(list)
        base = set()
        for r in rs:
            by_value[int(r["value"])].append(float(r["top1"]))
            if r["is_base"] == "1":
                base.add(int(r["value"]))
        xs = sorted(by_value)
        ms = [mean_std(by_value[x]) for x in xs]
        ax.errorbar(xs, [m for m, _ in ms], yerr=[s for _, s in ms], marker="o", capsize=3)
        for x in base:
            ax.axvline(x, color="grey", linestyle=":", linewidth=1)
        ax.set_xticks(xs)
        ax.set_xlabel(param + " (dotted: default)")
        ax.set_ylabel("test top-1")
        ax.grid(alpha=0.3)
    fig.suptitle("Mamba hyper-parameters (one at a time from the default)")
    fig.tight_layout()
    fig.savefig(png, dpi=120)


def plot_sampling(rows, png):
    metrics = [("top1", "test top-1 (pooled)"), ("top1_task_mean", "test top-1 (task mean)")]
    fig, axes = plt.subplots(1, len(metrics), figsize=(11, 4))
    for ax, (metric, label) in zip(axes, metrics):
        by_sampler = OrderedDict()
        for r in rows:
            by_sampler.setdefault(r["sampler"], defaultdict(list))[float(r["rate"])].append(float(r[metric]))
        full = by_sampler.pop("all", None)
        rates = sorted({x for by_rate in by_sampler.values() for x in by_rate})
        if len(rates) == 1:  # one budget: one bar per sampler
            names = list(by_sampler)
            ms = [mean_std(by_sampler[n][rates[0]]) for n in names]
            ax.bar(range(len(names)), [m for m, _ in ms], yerr=[s for _, s in ms], capsize=4,
                   color=[f"C{i}" for i in range(len(names))])
            ax.set_xticks(range(len(names)))
            ax.set_xticklabels(names)
            ax.set_title(f"{100 * rates[0]:g}% of every training task measured")
        for sampler, by_rate in (by_sampler.items() if len(rates) > 1 else []):
            xs = sorted(by_rate)
            ms = [mean_std(by_rate[x]) for x in xs]
            ax.errorbar([100 * x for x in xs], [m for m, _ in ms], yerr=[s for _, s in ms], marker="o", capsize=3,
                        label=sampler)
        if full:
            m, s = mean_std(full[1.0])
            ax.axhline(m, color="black", linestyle="--", label=f"all data ({m:.3f})")
        rnd = float(rows[0]["random_top1"])
        if metric == "top1":
            ax.axhline(rnd, color="grey", linestyle=":", label=f"random ({rnd:.3f})")
        if len(rates) > 1:
            ax.set_xlabel("programs measured (% of every training task)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(png, dpi=120)


def plot_transfer(rows, png):
    # rows: method, seed, phase_index, phase, platform, top1 (one line per platform after each phase);
    # the knowledge base of "tcl" after each KD phase (solid), and its active column after each CL phase
    # (method "tcl:ac", dotted, drawn a little left of the KB's point), mean over seeds (error bar = std).
    phases = OrderedDict()
    by_model = {"tcl": OrderedDict(), "tcl:ac": OrderedDict()}
    for r in rows:
        method = r.get("method", "tcl")
        if method not in by_model:
            continue
        phases.setdefault(int(r["phase_index"]), r["phase"])
        by_model[method].setdefault(r["platform"], defaultdict(list))[int(r["phase_index"])].append(float(r["top1"]))
    fig, ax = plt.subplots(figsize=(1.2 * len(phases) + 3, 4))
    colors = {}
    for platform, vals in by_model["tcl"].items():
        xs = sorted(vals)
        ms = [mean_std(vals[x]) for x in xs]
        line = ax.errorbar(xs, [m for m, _ in ms], yerr=[s for _, s in ms], marker="o", capsize=3,
                           label=f"{platform} (knowledge base)")
        colors[platform] = line[0].get_color()
    for platform, vals in by_model["tcl:ac"].items():
        xs = sorted(vals)
        ms = [mean_std(vals[x]) for x in xs]
        ax.errorbar([x - 0.25 for x in xs], [m for m, _ in ms], yerr=[s for _, s in ms], marker="x",
                    linestyle=":", capsize=2, color=colors.get(platform), alpha=0.7,
                    label=f"{platform} (active column after CL)")
    ax.set_xticks(list(phases))
    ax.set_xticklabels(list(phases.values()), rotation=30, ha="right")
    ax.set_ylabel("test top-1 (pooled)")
    ax.set_ylim(0, 1.05)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(png, dpi=120)


def plot_tune(rows, png):
    runs = defaultdict(list)  # (workload, model, seed) -> rows
    for r in rows:
        runs[(r["workload"], r["model"], r["seed"])].append(r)
    workloads = sorted({k[0] for k in runs})
    models = list(OrderedDict.fromkeys(k[1] for k in runs))
    fig, axes = plt.subplots(len(workloads), 2, figsize=(10, 3.6 * len(workloads)), squeeze=False)
    for i, wl in enumerate(workloads):
        for m in models:
            seeds = [sorted(v, key=lambda r: int(r["trial"])) for k, v in runs.items() if k[0] == wl and k[1] == m]
            if not seeds:
                continue
            n = min(len(s) for s in seeds)
            best = [statistics.median(float(s[t]["best_seconds"]) for s in seeds) * 1e3 for t in range(n)]
            wall = [statistics.median(float(s[t]["wall_seconds"]) for s in seeds) for t in range(n)]
            axes[i][0].plot(range(1, n + 1), best, label=m)
            axes[i][1].plot(wall, best, label=m)
        for j, xl in enumerate(("measurements", "wall time (s)")):
            axes[i][j].set_xlabel(xl)
            axes[i][j].set_ylabel("best latency (ms), median over seeds")
            axes[i][j].set_yscale("log")
            axes[i][j].set_title(wl)
            axes[i][j].grid(alpha=0.3)
            axes[i][j].legend()
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def plot_curves(rows, png):
    runs = OrderedDict()
    for r in rows:
        runs.setdefault(f'{r["sampler"]} {100 * float(r["rate"]):g}% seed {r["seed"]}', []).append(r)
    cols = min(4, len(runs))
    nrows = (len(runs) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.2 * nrows), squeeze=False)
    lines = [("valid_top1_task_mean", "valid top-1 (task mean)", "-"), ("valid_pairwise", "valid pairwise", "-"),
             ("test_top1_task_mean", "test top-1 (task mean)", "--"), ("test_top1", "test top-1 (pooled)", ":")]
    for i, (name, rs) in enumerate(runs.items()):
        ax = axes[i // cols][i % cols]
        ep = [int(r["epoch"]) for r in rs]
        for key, label, style in lines:
            ax.plot(ep, [float(r[key]) for r in rs], style, label=label)
        ax.set_title(name)
        ax.set_xlabel("epoch")
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
    for j in range(len(runs), nrows * cols):
        axes[j // cols][j % cols].axis("off")
    axes[0][0].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(png, dpi=100)


def main(argv):
    if len(argv) != 4 or argv[1] not in ("compare", "sweep", "sampling", "transfer", "tune", "curves"):
        sys.stderr.write(__doc__)
        return 2
    rows = read(argv[2])
    if not rows:
        sys.stderr.write(f"{argv[2]}: no rows to plot\n")
        return 1
    globals()["plot_" + argv[1]](rows, argv[3])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
