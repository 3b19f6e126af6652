"""``tclm tune-bench --scheduler ansor --network NAME``: cost models compared on whole networks.

    tclm tune-bench --scheduler ansor --network resnet-18 --models tclm,xgb,tclm-public:1,xgb-pre:1,random:1 \\
        --seeds 2 --trials 1000 --tclm-model kb.tclm --public-model public.tclm --pretrain-records DIR \\
        --out out/tune-bench-rn18

Every (network, model, seed) run (``MODEL:N`` in --models: seeds 0..N-1 for that model, else
--seeds) is one ``tclm tune`` run (tclm._tune_ansor: Ansor's task scheduler over all the network's
tasks, then the network compiled with the best schedules and its end-to-end latency measured) in
OUT/runs/NETWORK-MODEL-sSEED/; a finished run is skipped and an interrupted one resumes from its log.
Each run is a child process: when TVM aborts inside it (the TVM 0.19 wheel is built with libstdc++'s
assertions, and Ansor's XGBoost path has been seen to fail one), the run is resumed from its log, up
to --resume-after-crash times, instead of the abort ending the whole benchmark.
Options this command does not know (--per-round, --population, --search-param, --min-repeat-ms,
--latency-repeat, ...) go to every run.

Models: ``tclm`` (--tclm-model, fine-tuned online), ``tclm-public`` (the same with --public-model, e.g.
trained on public records only), ``xgb`` (Ansor's XGBModel as its task scheduler sets it up), ``xgb-pre``
(XGBModel first trained on --pretrain-records) and ``random``.

Measured latency: once every run is finished, the runs' networks are compiled from their logs and
measured again in one batch of --latency-rounds rounds, the runs interleaved (every run's round 1,
then every run's round 2, ..., each round in another order), so that a drift of the machine touches
every model alike; a network measured right after its own tuning, hours apart from another, is not
comparable on a shared or virtual machine (on a 2-vCPU virtual machine one and the same ResNet-18
log measured 19.4-21.6 ms). latency.csv keeps every batch: a rerun comparing the same runs tops up
the latest batch that holds them all, one that compares a run no batch holds with the others (a
model added later) measures a new batch of them all. The measured column is, per run, the median of
its rounds in that batch.

Outputs: curves.csv (every run's curve: one row per measurement round with trials, wall seconds and
Ansor's estimated network latency), latency.csv (every run's interleaved latency measurements),
summary.csv and summary.md (per network and model: final estimated latency, measured end-to-end
latency, trials and wall time to reach xgb's and xgb-pre's final estimated latency and the speed-up
against them; per run, its latency right after tuning and in each round), time.csv and summary.md's
second table (per run: where its tuning time went, from its tune.json: building and running
candidates, search, cost-model updates (tclm's fine-tuning, XGBModel's training), prediction; and
how many of its processes died inside TVM), curves.png (estimated latency against trials and against
wall time, median over seeds; needs matplotlib).
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from typing import Dict, List, Optional, Tuple

from ._cli import (HelpFormatter, claim_output_dir, read_json, release_output_dir, save_figure_atomic,
                   write_csv_atomic, write_text_atomic)

MODELS = ("tclm", "tclm-public", "xgb", "xgb-pre", "random")
#: Signals a run's process dies of when it crashes (resumed by run_tune).
CRASH_SIGNALS = {int(s) for s in (signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL)}
CURVE_FIELDS = ["network", "model", "seed", "round", "trials", "wall_seconds", "estimated_ms", "tasks_with_schedule",
                "tasks_given_up"]
SUMMARY_FIELDS = ["network", "model", "seeds", "trials", "final_estimated_ms", "measured_ms", "measured_spread_ms",
                  "trials_to_xgb", "x_trials_vs_xgb", "seconds_to_xgb", "x_time_vs_xgb",
                  "trials_to_xgb_pre", "x_trials_vs_xgb_pre", "seconds_to_xgb_pre", "x_time_vs_xgb_pre",
                  "wall_seconds"]
#: time.csv: per run, seconds from its tune.json "time" (summed over the run's processes) and its "runs".
TIME_FIELDS = ["network", "model", "seed", "trials", "tune_seconds", "measure_build_seconds", "measure_run_seconds",
               "search_seconds", "model_update_seconds", "model_predict_seconds", "processes", "died"]
#: latency.csv: one row per run, measurement batch and interleaved round (mean, std and min of its repeats).
LATENCY_FIELDS = ["network", "model", "seed", "trials", "batch", "round", "mean_ms", "std_ms", "min_ms",
                  "measured_at"]


def _say(msg: str) -> None:
    print(f"tclm tune-bench: {msg}", file=sys.stderr, flush=True)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tclm tune-bench --network",
                                description=__doc__.split("\n\n")[0].replace("``", ""),
                                formatter_class=HelpFormatter, allow_abbrev=False,
                                epilog="Other options go to every tclm tune run (tclm tune --help lists them).")
    p.add_argument("--scheduler", default="metaschedule", choices=("metaschedule", "ansor"),
                   help="only ansor (TVM 0.19, .venv-ansor) tunes networks here")
    p.add_argument("--network", required=True, help="comma-separated relay.testing networks (tclm tune --help)")
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated: " + ", ".join(MODELS)
                   + " (default: all); MODEL:N runs that model with seeds 0..N-1 instead of --seeds")
    p.add_argument("--seeds", type=int, default=2, help="seeds 0..N-1 per network and model (default 2)")
    p.add_argument("--trials", type=int, default=1000, help="measurements per run, over all tasks (default 1000)")
    p.add_argument("--tclm-model", help="model of 'tclm' (Ansor step encoding), e.g. trained on this machine's kind")
    p.add_argument("--public-model", help="model of 'tclm-public', e.g. trained on public records only")
    p.add_argument("--pretrain-records", help="xgb-pre: Ansor record file or directory to pre-train XGBModel on")
    p.add_argument("--out", default="out/tune-bench-network", help="output directory (default out/tune-bench-network)")
    p.add_argument("--latency-rounds", type=int, default=3,
                   help="once every run is finished, measure the runs' compiled networks again, interleaved, in "
                        "one batch of at least this many rounds for all the runs compared; the measured column is "
                        "each run's median over the batch (0: each run's own measurement right after its tuning)")
    p.add_argument("--resume-after-crash", type=int, default=10,
                   help="resume a run this many times when its process crashes (an abort or a segmentation fault "
                        "inside TVM, which TVM 0.19's XGBModel path does now and then: docs/tuning.md); 0: stop the "
                        "benchmark at the first crash")
    return p


def run_args(model: str, a) -> List[str]:
    """The tclm tune options that make `model`."""
    if model == "tclm":
        return ["--cost-model", "tclm", "--model", a.tclm_model]
    if model == "tclm-public":
        return ["--cost-model", "tclm", "--model", a.public_model]
    if model == "xgb-pre":
        return ["--cost-model", "xgb-pre", "--pretrain-records", a.pretrain_records]
    return ["--cost-model", model]


def run_finished(run_dir: str, trials: int) -> bool:
    """Whether run_dir holds a finished run of `trials` trials: tuned (its log has them, or no task
    could go on) and its latency measured on that log."""
    s = read_json(os.path.join(run_dir, "tune.json"))
    lat = read_json(os.path.join(run_dir, "latency.json"))
    return bool(s and lat and s.get("trials_requested") == trials and lat.get("trials") == s.get("trials")
                and s.get("runs"))


# -- curves ---------------------------------------------------------------------------------------------

def read_curve(run_dir: str) -> List[Tuple[int, float, Optional[float]]]:
    """(trials, wall seconds, estimated ms or None) per round of a run."""
    path = os.path.join(run_dir, "curve.csv")
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return [(int(r["trials"]), float(r["wall_seconds"]), float(r["estimated_ms"]) if r["estimated_ms"] else None)
                for r in csv.DictReader(f)]


def first_reaching(curve, target: Optional[float], axis: int) -> float:
    """The trials (axis 0) or wall seconds (axis 1) at which `curve` first has an estimate <= target;
    inf if never."""
    if target is None:
        return math.inf
    for row in curve:
        if row[2] is not None and row[2] <= target * (1 + 1e-9):
            return float(row[axis])
    return math.inf


def median_curve(curves, axis: int) -> Tuple[List[float], List[float]]:
    """Median over runs of the best estimate so far, as a step function of trials (axis 0) or wall
    seconds (axis 1), on the union of the runs' points where every run has an estimate."""
    xs = sorted({row[axis] for c in curves for row in c if row[2] is not None})
    out_x, out_y = [], []
    for x in xs:
        vals = []
        for c in curves:
            seen = [row[2] for row in c if row[axis] <= x and row[2] is not None]
            if not seen:
                break
            vals.append(min(seen))
        else:
            out_x.append(x)
            out_y.append(statistics.median(vals))
    return out_x, out_y


def _median(values: List[float]) -> float:
    return statistics.median(values) if values else math.inf


def _fmt(x: Optional[float], digits: str = ".4g") -> str:
    return "-" if x is None or not math.isfinite(x) else format(x, digits)


def run_tune(args: List[str], resumes: int, name: str, command: Optional[List[str]] = None) -> int:
    """Runs ``tclm tune ARGS`` in a child process (this Python) and returns its exit code. A child that
    crashes (dies of SIGABRT, SIGSEGV, SIGBUS, SIGFPE or SIGILL: an abort inside TVM) is started again
    with the same arguments, which resumes it from its log, at most `resumes` times; any other exit
    (Ctrl-C, a kill, an error) is returned as it is."""
    cmd = (command or [sys.executable, "-m", "tclm.tune"]) + list(args)
    for attempt in range(resumes + 1):
        rc = subprocess.run(cmd).returncode
        if rc >= 0 or -rc not in CRASH_SIGNALS:
            return rc
        sig = signal.Signals(-rc).name
        if attempt < resumes:
            _say(f"{name}: the run died of {sig}; resuming it from its log ({attempt + 1} of {resumes})")
        else:
            _say(f"{name}: the run died of {sig} {resumes + 1} times; stopping (rerun the same command to resume)")
    return 128 - rc


def run_trials(run_dir: str) -> Optional[int]:
    """The trials of a finished run's log (its latency.json's, the log the network was compiled from)."""
    lat = read_json(os.path.join(run_dir, "latency.json")) or {}
    return lat.get("trials")


def read_latency_rows(path: str) -> List[dict]:
    """latency.csv's rows; a file with other columns is refused (SystemExit naming it), not overwritten."""
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != LATENCY_FIELDS:
            raise SystemExit(f"tclm tune-bench: error: {path}: columns {reader.fieldnames} are not those of "
                             f"latency.csv ({', '.join(LATENCY_FIELDS)}); move the file away to measure anew")
        return list(reader)


def plan_latency(rows: List[dict], keys: List[Tuple[str, str, int]], rounds: int) -> Tuple[int, list]:
    """Which measurement batch of latency.csv reports `keys` (the runs of one network now compared),
    and the (round, run) pairs still to measure in it, interleaved: round r measures every run once,
    starting from the r-th. The batch is the latest one holding every run of `keys` (rows of their
    current logs only), topped up to `rounds`; where none does, a new one measures them all together,
    so the reported rounds of different runs are always measured side by side, never hours apart."""
    have: Dict[int, Dict[Tuple[str, str, int], set]] = {}
    for r in rows:
        have.setdefault(int(r["batch"]), {}).setdefault((r["network"], r["model"], int(r["seed"])), set()).add(
            int(r["round"]))
    covering = [b for b, runs in have.items() if set(keys) <= set(runs)]
    batch = max(covering) if covering else max(have, default=0) + 1
    measured = have.get(batch, {})
    keys = sorted(keys)
    todo = [(r, k) for r in range(1, rounds + 1) for k in keys[(r - 1) % len(keys):] + keys[:(r - 1) % len(keys)]
            if r not in measured.get(k, set())]
    return batch, todo


def measure_latency_rounds(runs: Dict[Tuple[str, str, int], str], rest: List[str], rounds: int,
                           path: str) -> Dict[Tuple[str, str, int], List[float]]:
    """Per run, the means of the rounds of latency.csv (`path`) that report it: end-to-end latency
    measurements of every run's network, compiled from its log, in one batch per network in which the
    runs are interleaved (plan_latency), so that the machine's drift touches every model alike. Rows of
    a log a run no longer has (tuned further since) are dropped; every other row is kept, also those
    of runs this call does not compare. Each new row is written at once (atomically): a rerun of an
    interrupted benchmark resumes its batch once the batch has every run (its first round is through;
    before that it begins a new one). The network and its measurement settings
    (--latency-repeat, --latency-min-repeat-ms, --cores, --batch) are those of the runs (`rest`); the
    target is the one each run tuned for (its tune.json)."""
    from . import _tune_ansor

    rows = []
    for r in read_latency_rows(path):
        key = (r["network"], r["model"], int(r["seed"]))
        if key not in runs or str(run_trials(runs[key])) == r["trials"]:
            rows.append(r)
    reported: Dict[Tuple[str, str, int], List[float]] = {}
    for net in sorted({k[0] for k in runs}):
        keys = [k for k in runs if k[0] == net and run_trials(runs[k]) is not None]  # compiled and measured
        if not keys:
            continue
        batch, todo = plan_latency([r for r in rows if r["network"] == net], keys, rounds)
        if todo:
            import tvm

            ta = _tune_ansor.parser().parse_args(["--network", net, "--cost-model", "random"] + rest)
            os.environ.setdefault("TVM_NUM_THREADS", str(ta.cores))  # as in every run
            network = _tune_ansor.load_network(ta)
            inputs = _tune_ansor.random_inputs(network)
            libs = {}
            for k in sorted({k for _, k in todo}):
                target = tvm.target.Target((read_json(os.path.join(runs[k], "tune.json")) or {})["target"])
                _say(f"latency: compiling {net}-{k[1]}-s{k[2]} from its log")
                libs[k] = _tune_ansor.compile_network(network, target, os.path.join(runs[k], _tune_ansor.LOG))
            for r, k in todo:
                m, _ = _tune_ansor.run_network(libs[k], inputs)
                ms = _tune_ansor.time_network(m, None, ta.latency_repeat, ta.latency_min_repeat_ms)
                del m
                row = {"network": net, "model": k[1], "seed": k[2], "trials": run_trials(runs[k]), "batch": batch,
                       "round": r, "mean_ms": f"{statistics.mean(ms):.6g}",
                       "std_ms": f"{statistics.stdev(ms) if len(ms) > 1 else 0.0:.4g}", "min_ms": f"{min(ms):.6g}",
                       "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S")}
                rows.append({k2: str(v) for k2, v in row.items()})
                write_csv_atomic(path, LATENCY_FIELDS, rows)
                _say(f"latency batch {batch} round {r}/{rounds}: {net}-{k[1]}-s{k[2]} {row['mean_ms']} ± "
                     f"{row['std_ms']} ms")
            del libs
        for k in keys:
            mine = sorted((int(r["round"]), float(r["mean_ms"])) for r in rows
                          if int(r["batch"]) == batch and (r["network"], r["model"], int(r["seed"])) == k)
            reported[k] = [ms for _, ms in mine]
    write_csv_atomic(path, LATENCY_FIELDS, rows)
    return reported


def summarize(runs: Dict[Tuple[str, str, int], str], models: List[str],
              rounds: Optional[Dict[Tuple[str, str, int], List[float]]] = None) -> List[dict]:
    """Per network and model, over seeds: see the module docstring and SUMMARY_FIELDS. Each run is
    compared with the reference model's run of the same seed (seed 0 when the reference has no such
    seed): the trials / seconds at which it first reaches that run's final estimate, and the
    reference run's own trials / seconds to it divided by them; medians over seeds (a run that never
    reaches it counts as a ratio of 0). Measured latency: per run the median of its `rounds` (its
    interleaved measurements) where it has any, else its own latency.json; per model the mean over
    seeds ± the std over seeds (one seed: ± the std over its rounds, or of its repeats)."""
    rounds = rounds or {}
    out = []
    for net in sorted({k[0] for k in runs}):
        data = {}
        for m in models:
            seeds = sorted(sd for (n, mm, sd) in runs if n == net and mm == m)
            if not seeds:
                continue
            dirs = [runs[(net, m, sd)] for sd in seeds]
            curves = [read_curve(d) for d in dirs]
            finals = [next((r[2] for r in reversed(c) if r[2] is not None), None) for c in curves]
            lats = [read_json(os.path.join(d, "latency.json")) or {} for d in dirs]
            data[m] = {"seeds": seeds, "dirs": dirs, "curves": dict(zip(seeds, curves)),
                       "finals": dict(zip(seeds, finals)), "lats": lats,
                       "rounds": [rounds.get((net, m, sd), []) for sd in seeds]}

        for m, d in data.items():
            known_finals = [f for f in d["finals"].values() if f is not None]
            means, within = [], []
            for lat, rr in zip(d["lats"], d["rounds"]):
                if rr:
                    means.append(statistics.median(rr))
                    within.append(statistics.stdev(rr) if len(rr) > 1 else 0.0)
                elif "mean_ms" in lat:
                    means.append(lat["mean_ms"])
                    within.append(lat.get("std_ms", 0.0))
            if len(means) > 1:
                spread = statistics.stdev(means)
            elif means:
                spread = within[0]
            else:
                spread = None
            curves = list(d["curves"].values())
            row = {"network": net, "model": m, "seeds": len(d["dirs"]),
                   "trials": _fmt(_median([c[-1][0] for c in curves if c]), "g"),
                   "final_estimated_ms": _fmt(_median(known_finals) if len(known_finals) == len(curves) else None),
                   "measured_ms": _fmt(statistics.mean(means) if means else None),
                   "measured_spread_ms": _fmt(spread, ".2g"),
                   "wall_seconds": _fmt(_median([c[-1][1] for c in curves if c]), ".0f")}
            for key, ref_model in (("xgb", "xgb"), ("xgb_pre", "xgb-pre")):
                ref = data.get(ref_model)
                for axis, name, digits in ((0, "trials", "g"), (1, "seconds", ".0f")):
                    mine, ratios = [], []
                    for sd, c in d["curves"].items():
                        ref_seed = sd if ref is not None and sd in ref["curves"] else 0
                        target = ref["finals"].get(ref_seed) if ref is not None else None
                        if target is None:
                            continue
                        reach = first_reaching(c, target, axis)
                        theirs = first_reaching(ref["curves"][ref_seed], target, axis)
                        mine.append(reach)
                        ratios.append(theirs / reach if math.isfinite(reach) and reach > 0 else 0.0)
                    row[f"{name}_to_{key}"] = _fmt(_median(mine) if mine else math.inf, digits)
                    ratio = _median(ratios) if ratios else None
                    row[f"x_{'trials' if axis == 0 else 'time'}_vs_{key}"] = _fmt(ratio if ratio else None, ".2f")
            out.append(row)
    return out


def time_rows(runs: Dict[Tuple[str, str, int], str]) -> List[dict]:
    """Per run (TIME_FIELDS): where its tuning time went. A run's process that died inside TVM counts
    up to its last finished round ("ended": "died" in tune.json)."""
    rows = []
    for (net, m, seed), d in sorted(runs.items()):
        s = read_json(os.path.join(d, "tune.json")) or {}
        t, parts = s.get("time") or {}, s.get("runs") or []
        if not t:
            continue
        rows.append({"network": net, "model": m, "seed": seed, "trials": s.get("trials", ""),
                     **{k: f"{t.get(k, 0.0):.0f}" for k in TIME_FIELDS[4:10]},
                     "processes": len(parts), "died": sum(1 for r in parts if r.get("ended") == "died")})
    return rows


def time_markdown(rows: List[dict]) -> str:
    cols = [("model", "model"), ("seed", "seed"), ("trials", "trials"), ("tune_seconds", "tuning s"),
            ("measure_build_seconds", "build"), ("measure_run_seconds", "run"), ("search_seconds", "search"),
            ("model_update_seconds", "model update"), ("model_predict_seconds", "prediction"),
            ("died", "processes died in TVM")]
    md = ""
    for net in sorted({r["network"] for r in rows}):
        md += (f"\n### {net}: where the tuning time went (seconds per run)\n\n| " + " | ".join(c[1] for c in cols)
               + " |\n|" + "---|" * len(cols) + "\n")
        for r in (r for r in rows if r["network"] == net):
            md += "| " + " | ".join(str(r[k]) for k, _ in cols) + " |\n"
    return md


def latency_markdown(runs: Dict[Tuple[str, str, int], str], rounds: Dict[Tuple[str, str, int], List[float]]) -> str:
    """Per run: its network's latency right after its tuning and in each interleaved round."""
    if not rounds:
        return ""
    n = max(len(v) for v in rounds.values())
    md = ""
    for net in sorted({k[0] for k in runs}):
        md += (f"\n### {net}: measured latency per run (ms, mean of the repeats)\n\n| model | seed | after tuning | "
               + " | ".join(f"round {i + 1}" for i in range(n)) + " | median of the rounds |\n|"
               + "---|" * (n + 4) + "\n")
        for (nn, m, seed), d in sorted(runs.items()):
            if nn != net:
                continue
            own = (read_json(os.path.join(d, "latency.json")) or {}).get("mean_ms")
            rr = rounds.get((nn, m, seed), [])
            cells = [m, str(seed), _fmt(own, ".2f")] + [f"{x:.2f}" for x in rr] + ["-"] * (n - len(rr))
            cells.append(_fmt(statistics.median(rr) if rr else None, ".2f"))
            md += "| " + " | ".join(cells) + " |\n"
    return md


def markdown(summary: List[dict], header: str) -> str:
    cols = [("model", "model"), ("seeds", "seeds"), ("trials", "trials"),
            ("final_estimated_ms", "estimated ms (final)"), ("measured", "measured ms"),
            ("trials_to_xgb", "trials to xgb final"), ("x_trials_vs_xgb", "x vs xgb (trials)"),
            ("seconds_to_xgb", "s to xgb final"), ("x_time_vs_xgb", "x vs xgb (time)"),
            ("trials_to_xgb_pre", "trials to xgb-pre final"), ("x_trials_vs_xgb_pre", "x vs xgb-pre (trials)"),
            ("seconds_to_xgb_pre", "s to xgb-pre final"), ("x_time_vs_xgb_pre", "x vs xgb-pre (time)"),
            ("wall_seconds", "wall s")]
    md = header
    for net in sorted({r["network"] for r in summary}):
        md += f"\n### {net}\n\n| " + " | ".join(c[1] for c in cols) + " |\n|" + "---|" * len(cols) + "\n"
        for r in (r for r in summary if r["network"] == net):
            cells = []
            for key, _ in cols:
                if key == "measured":
                    cells.append(f"{r['measured_ms']} ± {r['measured_spread_ms']}" if r["measured_ms"] != "-" else "-")
                else:
                    cells.append(str(r[key]))
            md += "| " + " | ".join(cells) + " |\n"
    return md


def plot(runs: Dict[Tuple[str, str, int], str], models: List[str], png: str) -> bool:
    """curves.png: per network, median-over-seeds estimated latency against trials and wall time.
    False (and a message) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        _say(f"no {os.path.basename(png)}: matplotlib is not installed in this Python ({e}); "
             "pip install -r python/requirements-ansor.txt adds it")
        return False
    nets = sorted({k[0] for k in runs})
    fig, axes = plt.subplots(len(nets), 2, figsize=(11, 3.8 * len(nets)), squeeze=False)
    for i, net in enumerate(nets):
        for m in models:
            curves = [read_curve(d) for (n, mm, _), d in sorted(runs.items()) if n == net and mm == m]
            curves = [c for c in curves if c]
            if not curves:
                continue
            for j in (0, 1):
                x, y = median_curve(curves, j)
                if x:
                    axes[i][j].step(x, y, where="post", marker=".", label=m)
        for j, xl in enumerate(("measurements (trials)", "wall time (s)")):
            ax = axes[i][j]
            ax.set_xlabel(xl)
            ax.set_ylabel("estimated latency (ms), median over seeds")
            ax.set_yscale("log")
            ax.set_title(net)
            ax.grid(alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend()
    fig.tight_layout()
    save_figure_atomic(fig, png, dpi=110)
    plt.close(fig)
    return True


def main(argv: Optional[List[str]] = None) -> int:
    p = parser()
    a, rest = p.parse_known_args(sys.argv[1:] if argv is None else list(argv))
    if a.scheduler != "ansor":
        p.error("--network needs --scheduler ansor (network tuning runs Ansor's task scheduler, TVM 0.19)")
    from . import _tune_ansor
    from .networks import NETWORKS

    networks = [n for n in a.network.split(",") if n]
    for n in networks:
        if n not in NETWORKS:
            p.error(f"--network: unknown network '{n}' (known: {', '.join(NETWORKS)})")
    if a.seeds <= 0 or a.trials <= 0:
        p.error("--seeds and --trials must be positive")
    if a.latency_rounds < 0:
        p.error("--latency-rounds must not be negative")
    seeds: Dict[str, int] = {}
    for entry in (e for e in a.models.split(",") if e):
        m, _, n = entry.partition(":")
        if m not in MODELS:
            p.error(f"--models: unknown model '{m}' ({', '.join(MODELS)})")
        if m in seeds:
            p.error("--models: a model is listed twice")
        if n and not (n.isdigit() and int(n) > 0):
            p.error(f"--models: '{entry}': the number of seeds after ':' must be a positive integer")
        seeds[m] = int(n) if n else a.seeds
    models = list(seeds)
    for m, opt, val in (("tclm", "--tclm-model", a.tclm_model), ("tclm-public", "--public-model", a.public_model),
                        ("xgb-pre", "--pretrain-records", a.pretrain_records)):
        if m in models and not val:
            p.error(f"--models {m} needs {opt}")
        if m in models and not os.path.exists(val):
            p.error(f"{opt} '{val}' does not exist")
    for opt in ("--cost-model", "--model", "--out", "--seed", "--onnx", "--input", "--no-compile"):
        if any(r == opt or r.startswith(opt + "=") for r in rest):
            p.error(f"{opt}: the benchmark sets it for every run (or needs what it turns off)")
    # The options for every run: refused now by tclm tune's own parser rather than in the first run.
    try:
        _tune_ansor.parser().parse_args(["--network", networks[0], "--cost-model", "random"] + rest)
    except SystemExit:
        p.error(f"options for the runs not understood: {' '.join(rest)} (tclm tune --help lists them)")
    claim_output_dir(a.out, "tune-bench")
    try:
        return _bench(a, rest, networks, seeds)
    finally:
        release_output_dir(a.out)


def _bench(a, rest: List[str], networks: List[str], seeds: Dict[str, int]) -> int:
    models = list(seeds)
    runs_dir = os.path.join(a.out, "runs")
    os.makedirs(runs_dir, exist_ok=True)
    runs: Dict[Tuple[str, str, int], str] = {}
    t0 = time.time()
    for net in networks:
        for seed in range(max(seeds.values())):  # seed 0 of every model first: a stopped run still compares
            for m in (m for m in models if seed < seeds[m]):
                name = f"{net}-{m}-s{seed}"
                d = os.path.join(runs_dir, name)
                runs[(net, m, seed)] = d
                if run_finished(d, a.trials):
                    _say(f"== {name}: done earlier ({d})")
                    continue
                _say(f"== {name}")
                args = ["--network", net, "--trials", str(a.trials), "--seed", str(seed), "--out", d] + run_args(m, a)
                rc = run_tune(["--scheduler", "ansor"] + args + rest, a.resume_after_crash, name)
                if rc != 0:
                    _say(f"{name}: tclm tune failed (exit {rc})")
                    return rc
    # -- the networks measured again, interleaved
    latency_path = os.path.join(a.out, "latency.csv")
    rounds: Dict[Tuple[str, str, int], List[float]] = {}
    if a.latency_rounds > 0 and any(r == "--rpc-key" or r.startswith("--rpc-key=") for r in rest):
        _say("latency rounds: with --rpc-key each run's own measurement on its device is reported "
             "(the interleaved rounds measure on this machine only)")
    elif a.latency_rounds > 0:
        rounds = measure_latency_rounds(runs, rest, a.latency_rounds, latency_path)
    # -- reports
    rows = []
    for (net, m, seed), d in sorted(runs.items()):
        path = os.path.join(d, "curve.csv")
        if not os.path.exists(path):
            continue
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                rows.append({"network": net, "model": m, "seed": seed, **{k: r.get(k, "") for k in CURVE_FIELDS[3:]}})
    write_csv_atomic(os.path.join(a.out, "curves.csv"), CURVE_FIELDS, rows)
    summary = summarize(runs, models, rounds)
    write_csv_atomic(os.path.join(a.out, "summary.csv"), SUMMARY_FIELDS, summary)
    info = read_json(os.path.join(next(iter(runs.values())), "tune.json")) or {}
    mach = info.get("machine", {})
    search = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                       for k, v in sorted((((info.get("runs") or [{}])[-1]).get("search_params") or {}).items()))
    ntasks = {net: len((read_json(os.path.join(runs[(net, models[0], 0)], "tune.json")) or {}).get("tasks", []))
              for net in networks}
    header = (f"## Ansor network tuning: {', '.join(f'{n} ({ntasks[n]} tasks)' for n in networks)}\n\n"
              f"CPU: {mach.get('cpu_model', '?')}, {mach.get('cpu_cores', '?')} cores "
              f"({mach.get('threads', '?')} threads); TVM {mach.get('tvm_version', '?')}; "
              f"{a.trials} trials per run; seeds: {', '.join(f'{m} {n}' for m, n in seeds.items())}"
              + (f"; run options: {' '.join(rest)}" if rest else "")
              + (f"; SketchPolicy: {search}" if search else "")
              + ".\n\n"
              "Estimated latency: Ansor's sum over tasks of weight x best measured latency (median over seeds of "
              "the final value; a task none of whose candidates built and ran is left out: tasks_given_up in "
              "curves.csv). Measured: end-to-end latency of the network compiled with the best schedules; "
              + (f"per run the median of its rounds in one measurement batch of every run compared here (at least "
                 f"{a.latency_rounds} rounds, the runs interleaved; latency.csv and the last table); " if rounds else
                 "per run its measurement right after its tuning; ")
              + "mean over seeds ± std over seeds (one seed: ± the std over its rounds, or of its repeats). "
              "Trials / s to X final: each run against X's run of the same seed (seed 0 where X has no such "
              "seed): the first trial count / wall second at which the run's estimate reaches that X run's final "
              "estimated latency, median over seeds ('-': the median run never does); x vs X: that X run's own "
              "number divided by this run's, median over seeds (a run that never reaches it counts 0; > 1: fewer "
              "trials / less time than X).\n")
    times = time_rows(runs)
    write_csv_atomic(os.path.join(a.out, "time.csv"), TIME_FIELDS, times)
    md = markdown(summary, header) + time_markdown(times) + latency_markdown(runs, rounds)
    write_text_atomic(os.path.join(a.out, "summary.md"), md)
    plot(runs, models, os.path.join(a.out, "curves.png"))
    print(md)
    _say(f"done in {time.time() - t0:.0f} s: {a.out}/summary.md, curves.csv, summary.csv, time.csv, "
         + ("latency.csv, " if rounds else "") + "curves.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
