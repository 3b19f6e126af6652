"""Tuning benchmark: MetaSchedule or Ansor on this machine's CPU with TVM's default XGBoost cost model,
with tclm, and with random scores, on a fixed set of operators; best latency against the number of
measurements and against wall time.

    python -m tclm.tune_bench --out out/tune-bench --workloads matmul-512 --models xgb,tclm,random \\
        --seeds 2 --trials 64
    python -m tclm.tune_bench --scheduler ansor --tclm-model platinum.tclm ...   # in .venv-ansor (TVM 0.19)
    python -m tclm.tune_bench --scheduler ansor --network resnet-18 ...   # whole networks: tclm._network_bench

Every (workload, model, seed) run tunes with the same search settings (evolutionary search, the same
population, the local builder and runner on this machine) and logs each measurement with a measure
callback: tune.csv has one row per measured candidate (wall seconds since the run started, its mean
run time in seconds, the best so far). summary.csv / summary.md give per workload and model, on the
median-over-seeds curve of best latency against measurements (what tune.png draws), the final latency,
the measurements needed to reach the XGBoost curve's final latency and the ratio of XGBoost's own
measurements to that. A run is resumable: a finished run (its rows in runs/<name>.csv) is not repeated.

Models: ``xgb`` (TVM's default XGBoost model with its defaults, which score randomly until 100
measurements arrived), ``xgb-wN`` (the same with N warm-up measurements instead of 100), ``random``,
``tclm`` (MetaSchedule: :class:`tclm.metaschedule.TclmCostModel`; Ansor:
:class:`tclm.ansor.TclmAnsorModel`; both fine-tuned online on what they measured; ``--tclm-model``
gives the starting model: for MetaSchedule one trained on databases collected on this machine for
other workloads, for Ansor one trained on public Ansor records of other CPUs).
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import statistics
import sys
import time

from ._cli import (HelpFormatter, available_cores, claim_output_dir, release_output_dir, write_csv_atomic,
                   write_json_atomic, write_text_atomic)
from ._remote import add_rpc_options, ansor_runner, from_args, ms_runner, require_remote_target

WORKLOADS = {
    # name: (te_workload function, arguments)
    "matmul-512": ("matmul", (512, 512, 512)),
    "matmul-1024": ("matmul", (1024, 1024, 1024)),
    "dense-16x1024": ("matmul", (16, 1024, 1024)),
    "conv2d-resnet": ("conv2d_nhwc", (1, 56, 56, 64, 64, 3, 1, 1)),
    "matmul-128": ("matmul", (128, 128, 128)),
}


def _ms():
    from tvm.s_tir import meta_schedule as ms
    return ms


def llvm_target(cores, mcpu="native", mtriple=None):
    """The target JSON for this CPU: mcpu 'native' = LLVM's name of the host CPU (TVM's default without
    mcpu is 'generic', i.e. baseline x86-64 without the vector extensions); mtriple for devices of
    another kind (cross-compilation, e.g. aarch64-linux-gnu)."""
    t = {"kind": "llvm", "num-cores": cores}
    if mtriple:
        t["mtriple"] = mtriple
    if mcpu == "native":
        from tvm.target import codegen

        mcpu = codegen.llvm_get_system_cpu()
    if mcpu:
        t["mcpu"] = mcpu
    return t


def make_workload(name):
    from tvm import te
    from tvm.s_tir.meta_schedule.testing import te_workload

    fn, args = WORKLOADS[name]
    return te.create_prim_func(getattr(te_workload, fn)(*args))


def xgb_warmup(model_name):
    """N of 'xgb-wN' (None for 'xgb': the tuner's default); ValueError for anything else."""
    if model_name == "xgb":
        return None
    if model_name.startswith("xgb-w") and model_name[5:].isdigit():
        return int(model_name[5:])
    raise ValueError(model_name)


def is_model_name(name):
    if name in ("tclm", "random"):
        return True
    try:
        xgb_warmup(name)
        return True
    except ValueError:
        return False


def best_rows(log, workload, model_name, seed, rows_out):
    """Appends one tune.csv row per (wall seconds, latency) of `log`, with the best so far."""
    best = float("inf")
    for i, (wall, lat) in enumerate(log):
        best = min(best, lat)
        rows_out.append({"workload": workload, "model": model_name, "seed": seed, "trial": i + 1,
                         "wall_seconds": f"{wall:.3f}", "latency_seconds": f"{lat:.9g}",
                         "best_seconds": f"{best:.9g}"})


def tune_one(scheduler, *args, **kwargs):
    """One tuning run with `scheduler` ('metaschedule' or 'ansor'); see tune_one_metaschedule."""
    return (tune_one_ansor if scheduler == "ansor" else tune_one_metaschedule)(*args, **kwargs)


def tune_one_ansor(workload, model_name, seed, trials, per_iter, population, work_dir, cores, tclm_model, rows_out,
                   mcpu="native", mtriple=None, remote=None):
    """One Ansor run (TVM 0.19 auto_scheduler, SketchPolicy): the same measurement settings as the
    MetaSchedule runs (one measurement of at least 3 runs, lasting at least 100 ms; builder with `cores`
    workers)."""
    import random as pyrandom

    import numpy as np
    import tvm
    from tvm import auto_scheduler

    from ._ansor_workloads import FUNCTIONS

    # RandomModel and XGBModel's warm-up scores draw from numpy's global generator.
    np.random.seed(seed)
    pyrandom.seed(seed)
    fn, wl_args = WORKLOADS[workload]
    target = tvm.target.Target(llvm_target(cores, mcpu, mtriple))
    # Ansor takes its core count from the runtime's thread pool, not from the target's num-cores
    # (one core on a 2-vCPU machine): say it, as MetaSchedule reads it from the target.
    task = auto_scheduler.SearchTask(func=FUNCTIONS[fn], args=wl_args, target=target,
                                     hardware_params=auto_scheduler.HardwareParams(num_cores=cores, target=target))
    os.makedirs(work_dir, exist_ok=True)
    t0 = time.time()
    log = []

    class Logger(auto_scheduler.measure.PythonBasedMeasureCallback):
        def callback(self, policy, inputs, results):
            now = time.time() - t0
            for r in results:
                secs = [float(getattr(x, "value", x)) for x in r.costs]
                ok = int(r.error_no) == 0 and secs and all(0 < s < 1e9 for s in secs)
                log.append((now, statistics.mean(secs) if ok else float("inf")))

    tclm_cm = None
    if model_name == "tclm":
        from .ansor import TclmAnsorModel

        if tclm_model is None:
            raise ValueError("--scheduler ansor --models tclm needs --tclm-model (a model trained on Ansor records)")
        tclm_cm = TclmAnsorModel(tclm_model, log_file=os.path.join(work_dir, "tclm-measured.json"), retrain=True,
                                 work_dir=os.path.join(work_dir, "tclm"), min_new_records=per_iter,
                                 max_train_share=0.25, epochs=100, seed=seed)
        cost_model = tclm_cm
    elif model_name == "random":
        cost_model = auto_scheduler.RandomModel()
    else:
        warmup = xgb_warmup(model_name)
        cost_model = auto_scheduler.XGBModel(seed=seed, verbose_eval=0, **(
            {} if warmup is None else {"num_warmup_sample": warmup}))
    opts = auto_scheduler.TuningOptions(
        num_measure_trials=trials, num_measures_per_round=per_iter, verbose=0,
        builder=auto_scheduler.LocalBuilder(n_parallel=cores, timeout=60),
        runner=(ansor_runner(remote, timeout=30, number=3, repeat=1, min_repeat_ms=100) if remote is not None
                else auto_scheduler.LocalRunner(number=3, repeat=1, min_repeat_ms=100, timeout=30)),
        measure_callbacks=[auto_scheduler.RecordToFile(os.path.join(work_dir, "ansor.json")), Logger()])
    # SketchPolicy draws a random seed for a seed of 0 (`seed or random.randint(...)`): seed + 1.
    policy = auto_scheduler.SketchPolicy(task, program_cost_model=cost_model, seed=seed + 1, verbose=0,
                                         params={"evolutionary_search_population": population})
    task.tune(opts, search_policy=policy)
    best_rows(log, workload, model_name, seed, rows_out)
    extra = tclm_cm.stats() if tclm_cm is not None else {}
    return {"seconds": time.time() - t0, "measured": len(log), **extra}


def tune_one_metaschedule(workload, model_name, seed, trials, per_iter, population, work_dir, cores, tclm_model,
                          rows_out, mcpu="native", mtriple=None, remote=None):
    import tvm
    from tvm.ir.utils import derived_object
    from tvm.target import Target

    ms = _ms()
    mod = make_workload(workload)
    target = Target(llvm_target(cores, mcpu, mtriple))
    t0 = time.time()
    log = []

    @derived_object
    class Logger(ms.measure_callback.PyMeasureCallback):
        def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
            now = time.time() - t0
            for b, r in zip(builder_results, runner_results):
                secs = [float(getattr(x, "value", x)) for x in (r.run_secs or [])]
                ok = b.error_msg is None and r.error_msg is None and secs and all(0 < s < 1e9 for s in secs)
                log.append((now, statistics.mean(secs) if ok else float("inf")))

    cost_model = model_name
    tclm_cm = None
    if model_name.startswith("xgb-w"):  # the XGBoost settings tune_tir gives cost_model="xgb"
        cost_model = ms.cost_model.XGBModel(num_warmup_samples=xgb_warmup(model_name), num_tuning_cores=cores,
                                            tree_method="auto")
    if model_name == "tclm":
        from .metaschedule import TclmCostModel

        tclm_cm = TclmCostModel(model=tclm_model, work_dir=os.path.join(work_dir, "tclm"), seed=seed,
                                min_new_records=per_iter, max_train_share=0.25, epochs=100)
        cost_model = tclm_cm
    callbacks = ms.measure_callback.MeasureCallback.create("default") + [Logger()]
    from .metaschedule import build_candidate

    ms.tune_tir(
        mod, target, os.path.join(work_dir, "tune"), max_trials_global=trials, num_trials_per_iter=per_iter,
        cost_model=cost_model, measure_callbacks=callbacks,
        strategy=ms.search_strategy.EvolutionarySearch(population_size=population),
        runner=(ms_runner(remote, timeout=30, evaluator_config=ms.runner.EvaluatorConfig(
            number=3, repeat=1, min_repeat_ms=100)) if remote is not None else ms.runner.LocalRunner(timeout_sec=30)),
        builder=ms.builder.LocalBuilder(max_workers=cores, timeout_sec=60, f_build=build_candidate),
        num_tuning_cores=cores, seed=seed)
    best_rows(log, workload, model_name, seed, rows_out)
    extra = tclm_cm.stats() if tclm_cm is not None else {}
    return {"seconds": time.time() - t0, "measured": len(log), **extra}


FIELDS = ["workload", "model", "seed", "trial", "wall_seconds", "latency_seconds", "best_seconds"]


def median_curve(runs):
    """Trial-wise median over seeds of the best-so-far latency (runs: one sorted row list per seed)."""
    n = min(len(r) for r in runs)
    return [statistics.median(float(r[t]["best_seconds"]) for r in runs) for t in range(n)]


def reference_model(models):
    """The XGBoost model the others are compared with: 'xgb' (TVM's default) if run, else the first
    'xgb-wN'; None without any."""
    if "xgb" in models:
        return "xgb"
    return next((m for m in models if m.startswith("xgb-w")), None)


def summarize(rows, models):
    """Per workload and model, on the median-over-seeds curve of best latency against measurements
    (what tune.png draws): its final value, the measurements it needs to reach the final value of the
    XGBoost curve (reference_model: xgb, else the first xgb-wN; '-' if never), and the ratio of that
    model's own measurements to that ('speed-up in measurements');
    plus how many seeds reach that latency on their own."""
    by = {}
    for r in rows:
        by.setdefault((r["workload"], r["model"], int(r["seed"])), []).append(r)
    out = []
    for wl in sorted({k[0] for k in by}):
        curves = {}
        for m in models:
            runs = [sorted(v, key=lambda r: int(r["trial"])) for k, v in by.items() if k[0] == wl and k[1] == m]
            if runs:
                curves[m] = (median_curve(runs), runs)
        ref_model = reference_model(curves)
        ref = curves[ref_model][0][-1] if ref_model else None
        first = {}
        for m, (curve, _) in curves.items():
            first[m] = next((t + 1 for t, v in enumerate(curve) if ref is not None and v <= ref), None)
        for m, (curve, runs) in curves.items():
            seeds_reaching = sum(1 for rr in runs if ref is not None and
                                 any(float(r["best_seconds"]) <= ref for r in rr))
            speedup = (f"{first[ref_model] / first[m]:.2f}" if ref_model and first.get(ref_model) and first.get(m)
                       else "-")
            walls = [float(rr[-1]["wall_seconds"]) for rr in runs]
            out.append({"workload": wl, "model": m, "seeds": len(runs), "trials": len(curve),
                        "final_best_seconds": f"{curve[-1]:.6g}",
                        "measurements_to_xgb_final": first[m] if first[m] is not None else "-",
                        "speedup_in_measurements": speedup,
                        "seeds_reaching_xgb_final": f"{seeds_reaching}/{len(runs)}",
                        "wall_seconds_median": f"{statistics.median(walls):.0f}"})
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if any(x == "--network" or x.startswith("--network=") for x in argv):
        from ._network_bench import main as network_main  # whole networks (Ansor's task scheduler)

        return network_main(argv)
    # allow_abbrev=False: `tclm tune-bench` chooses the venv from the exact spelling of --scheduler.
    p = argparse.ArgumentParser(prog="tclm tune-bench", description=__doc__.split("\n\n")[0],
                                formatter_class=HelpFormatter, allow_abbrev=False)
    p.add_argument("--out", default="out/tune-bench", help="output directory (tune.csv, summary.csv/md, runs/)")
    p.add_argument("--workloads", default="matmul-512", help="comma-separated: " + ", ".join(WORKLOADS))
    p.add_argument("--network", help="whole networks instead of operators (with --scheduler ansor; "
                   "--network NAME --help lists that benchmark's options)")
    p.add_argument("--scheduler", default="metaschedule", choices=("metaschedule", "ansor"),
                   help="TVM's auto-scheduler: metaschedule (apache-tvm, .venv-tvm) or ansor (TVM 0.19, .venv-ansor)")
    p.add_argument("--models", default="xgb,tclm,random",
                   help="comma-separated: xgb (the default XGBoost model: random scores until 100 measurements), "
                        "xgb-wN (N warm-up measurements), tclm, random")
    p.add_argument("--seeds", type=int, default=2, help="seeds 0..N-1 per workload and model")
    p.add_argument("--trials", type=int, default=64, help="measured candidates per run (max_trials_global)")
    p.add_argument("--per-iter", type=int, default=16, help="candidates measured per search iteration")
    p.add_argument("--population", type=int, default=256, help="evolutionary search population")
    p.add_argument("--cores", type=int, default=available_cores(), help="target num-cores and builder workers")
    p.add_argument("--tclm-model", default=None,
                   help="starting tclm model: MetaSchedule trace encoding for metaschedule, Ansor step encoding "
                        "for ansor (required there)")
    p.add_argument("--mcpu", default="native", help="LLVM CPU: 'native' (this machine's, the default), or a name "
                   "such as 'generic' (what docs/tuning.md's first results used)")
    p.add_argument("--mtriple", default=None, help="LLVM target triple of the devices when they are not this "
                   "machine's kind (e.g. aarch64-linux-gnu with --rpc-key)")
    add_rpc_options(p)
    a = p.parse_args(argv)
    models = [m for m in a.models.split(",") if m]
    for m in models:
        if not is_model_name(m):
            p.error(f"--models: unknown model '{m}' (xgb, xgb-wN, tclm, random)")
    if a.scheduler == "ansor" and "tclm" in models and not a.tclm_model:
        p.error("--scheduler ansor --models tclm needs --tclm-model (a model trained on Ansor records, e.g. "
                "tclm train -d platinum8358=../shared/data/tlcbench_platinum8358)")
    workloads = [w for w in a.workloads.split(",") if w]
    for w in workloads:
        if w not in WORKLOADS:
            p.error(f"--workloads: unknown workload '{w}' ({', '.join(WORKLOADS)})")
    # The runner's thread pool: TVM's default is half the logical CPUs (1 on a 2-vCPU machine), which
    # would run kernels built for --cores on fewer threads. The builder/runner workers inherit it.
    os.environ.setdefault("TVM_NUM_THREADS", str(a.cores))
    require_remote_target(a, p, argv, need_platform=False)
    remote = from_args(a, p)
    claim_output_dir(a.out, "tune-bench")
    try:
        os.makedirs(os.path.join(a.out, "runs"), exist_ok=True)
        # One scheduler per --out: the run files are named by workload, model and seed only.
        marker = os.path.join(a.out, "scheduler.txt")
        if os.path.exists(marker):
            with open(marker) as f:
                earlier = f.read().strip()
        else:  # runs made before the marker existed were MetaSchedule's
            earlier = "metaschedule" if os.listdir(os.path.join(a.out, "runs")) else None
            with open(marker, "w") as f:
                f.write((earlier or a.scheduler) + "\n")
        if earlier is not None and earlier != a.scheduler:
            p.error(f"--out {a.out} holds {earlier} runs; give another --out for --scheduler {a.scheduler}")
        try:
            if a.scheduler == "ansor":
                import tvm.auto_scheduler  # noqa: F401
            else:
                _ms()
        except ImportError as e:
            p.error(f"--scheduler {a.scheduler}: this Python ({sys.executable}) has no such TVM ({e}); "
                    + ("run it in .venv-ansor (scripts/setup-ansor.sh)" if a.scheduler == "ansor"
                       else "run it in .venv-tvm (scripts/setup-python.sh)"))
        info = {}
        for wl in workloads:
            for seed in range(a.seeds):
                for m in models:
                    name = f"{wl}-{m}-s{seed}"
                    run_csv = os.path.join(a.out, "runs", name + ".csv")
                    if os.path.exists(run_csv):
                        print(f"== {name}: done earlier ({run_csv})", file=sys.stderr)
                        continue
                    print(f"== {name}", file=sys.stderr, flush=True)
                    rows = []
                    work = os.path.join(a.out, "work", name)
                    # An interrupted run's databases would seed this one's search and training: start clean.
                    shutil.rmtree(work, ignore_errors=True)
                    stats = tune_one(a.scheduler, wl, m, seed, a.trials, a.per_iter, a.population, work, a.cores,
                                     a.tclm_model, rows, a.mcpu, mtriple=a.mtriple, remote=remote)
                    write_csv_atomic(run_csv, FIELDS, rows)
                    info[name] = stats
                    print(f"   {stats}", file=sys.stderr, flush=True)
        rows = []
        for fn in sorted(os.listdir(os.path.join(a.out, "runs"))):
            if fn.endswith(".csv"):
                with open(os.path.join(a.out, "runs", fn)) as f:
                    rows += list(csv.DictReader(f))
        write_csv_atomic(os.path.join(a.out, "tune.csv"), FIELDS, rows)
        summary = summarize(rows, models)
        keys = ["workload", "model", "seeds", "trials", "final_best_seconds", "measurements_to_xgb_final",
                "speedup_in_measurements", "seeds_reaching_xgb_final", "wall_seconds_median"]
        write_csv_atomic(os.path.join(a.out, "summary.csv"), keys, summary)
        md = "| " + " | ".join(keys) + " |\n|" + "---|" * len(keys) + "\n"
        md += "".join("| " + " | ".join(str(s[k]) for k in keys) + " |\n" for s in summary)
        write_text_atomic(os.path.join(a.out, "summary.md"), md)
        if info:
            write_json_atomic(os.path.join(a.out, "runs", f"info-{int(time.time())}.json"), info)
        print(md)
        return 0
    finally:
        release_output_dir(a.out)  # a caller may run another benchmark into it in the same process


if __name__ == "__main__":
    sys.exit(main())
