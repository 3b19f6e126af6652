"""Collect measurements on this machine: TVM samples candidate programs, the RDU sampler picks which
to measure, TVM's local builder and runner measure them, and the results go into standard MetaSchedule
JSON databases or Ansor record files (readable by TVM and by ``tclm train -d``).

    python -m tclm.collect --out out/collect --workloads matmul-512,conv2d-resnet --pool 1000 --budget 0.1
    python -m tclm.collect --scheduler ansor --networks resnet-50 --exclude-networks resnet-18 --out out/ansor

``--scheduler metaschedule`` (the default; apache-tvm in .venv-tvm) collects fixed operators
(``--workloads``) as described below. ``--scheduler ansor`` (TVM 0.19 in .venv-ansor;
tclm._collect_ansor, whose docstring has the details) collects the tasks of whole networks
(``--networks``, ``--onnx``) from Ansor's sketch sampler into one Ansor record file per task, with
provenance.json; ``--help`` with a scheduler lists that scheduler's options.

MetaSchedule:

Per workload: the design spaces of MetaSchedule's default space generator are replayed with fresh
random decisions (what MetaSchedule's ``ReplayTrace`` strategy does) and post-processed, ``--pool``
times, giving a pool of distinct candidate traces; duplicates (same trace JSON) and candidates that
fail post-processing are dropped and counted. Their pooled trace features (``tclm.pool_features``)
go to ``tclm.select_samples`` (``--method``, default ``rdu``), which picks ``ceil(budget * pool)``.
The picks are built and run; a build or run failure is recorded as a failed measurement
(run_secs = 1e10, as MetaSchedule does), never a crash. The database is appended after every
measured batch, so an interrupted collection resumes: the pool and the picks are a function of the
seed, and the picks already in the database are not measured again. ``collect.json`` reports the
counts (pool, duplicates, post-processing failures, picked, measured, failed, seconds).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import Optional

import numpy as np

from . import featurize, pool_features, select_samples
from ._cli import HelpFormatter, available_cores, claim_output_dir, finite_float, release_output_dir
from ._remote import add_rpc_options, from_args, ms_runner, require_remote_target
from .tune_bench import WORKLOADS, llvm_target, make_workload

_NO_TVM: Optional[ImportError] = None
try:
    from .metaschedule import FAILED_RUN_SECONDS, build_candidate, trace_json
except ImportError as e:  # no TVM in this Python: main() says where to run it (after --help)
    _NO_TVM = e


def _ms():
    from tvm.s_tir import meta_schedule as ms
    return ms


def candidate_pool(mod, target, size, seed, max_attempts_factor=4):
    """Up to `size` distinct post-processed candidate schedules of `mod`. Returns (schedules, stats)."""
    from tvm.s_tir import Schedule
    from tvm.s_tir.schedule import Trace

    ms = _ms()
    ctx = ms.TuneContext(mod=mod, target=target, space_generator="post-order-apply", task_name="collect",
                         num_threads=1, rand_state=seed)
    spaces = ctx.generate_design_space()
    postprocs = ctx.space_generator.postprocs
    seen, out = set(), []
    stats = {"design_spaces": len(spaces), "attempts": 0, "duplicates": 0, "postproc_failures": 0}
    rng = np.random.default_rng(seed)
    while len(out) < size and stats["attempts"] < max_attempts_factor * size:
        stats["attempts"] += 1
        space = spaces[int(rng.integers(len(spaces)))]
        sch = Schedule(mod, seed=int(rng.integers(1, 2**31 - 1)))
        try:
            Trace(space.trace.insts, {}).apply_to_schedule(sch, remove_postproc=True)
            sch.enter_postproc()  # as MetaSchedule does before its post-processors (the trace marks it)
            if not all(p.apply(sch) for p in postprocs):
                stats["postproc_failures"] += 1
                continue
        except Exception:  # noqa: BLE001 - a sampled schedule TVM rejects: counted, not fatal
            stats["postproc_failures"] += 1
            continue
        key = trace_json(sch)
        if key in seen:
            stats["duplicates"] += 1
            continue
        seen.add(key)
        out.append(sch)
    return out, stats


def measure(schedules, target, cores, timeout, remote=None):
    """Builds `schedules` here and runs them on this machine (or on the devices of `remote`, a
    tclm._remote.Remote); returns one list of run seconds per schedule ([FAILED_RUN_SECONDS] for a
    failure) and the error messages."""
    ms = _ms()
    builder = ms.builder.LocalBuilder(max_workers=cores, timeout_sec=timeout, f_build=build_candidate)
    runner = (ms_runner(remote, timeout=timeout, evaluator_config=ms.runner.EvaluatorConfig())
              if remote is not None else ms.runner.LocalRunner(timeout_sec=timeout))
    built = builder.build([ms.builder.BuilderInput(s.mod, target) for s in schedules])
    secs, errors = [None] * len(schedules), [None] * len(schedules)
    to_run, idx = [], []
    for i, b in enumerate(built):
        if b.error_msg is not None:
            secs[i], errors[i] = [FAILED_RUN_SECONDS], "build: " + str(b.error_msg)[:500]
        else:
            to_run.append(ms.runner.RunnerInput(b.artifact_path, "cpu",
                                                ms.arg_info.ArgInfo.from_prim_func(schedules[i].mod["main"])))
            idx.append(i)
    for i, fut in zip(idx, runner.run(to_run)):
        r = fut.result()
        vals = [float(getattr(x, "value", x)) for x in (r.run_secs or [])]
        if r.error_msg is not None or not vals:
            secs[i], errors[i] = [FAILED_RUN_SECONDS], "run: " + str(r.error_msg)[:500]
        else:
            secs[i] = vals
    for i in idx:
        try:
            ms.utils.remove_build_dir(built[i].artifact_path)
        except Exception:  # noqa: BLE001
            pass
    return secs, errors


def collect_workload(name, out, pool_size, budget, method, seed, cores, timeout, batch, mcpu="native",
                     progress=True, mtriple=None, remote=None):
    import tvm
    from tvm.target import Target

    ms = _ms()
    t0 = time.time()
    mod = tvm.IRModule({"main": make_workload(name)})
    target = Target(llvm_target(cores, mcpu, mtriple))
    db_dir = os.path.join(out, name)
    os.makedirs(db_dir, exist_ok=True)
    db = ms.database.JSONDatabase(work_dir=db_dir)
    workload = db.commit_workload(mod)
    done = {trace_json(r.as_measure_candidate().sch) for r in db.get_all_tuning_records()}

    pool, stats = candidate_pool(mod, target, pool_size, seed)
    x, mask = featurize([trace_json(s) for s in pool], max_steps=160)
    points = pool_features(x, mask)
    k = min(len(pool), max(1, math.ceil(budget * len(pool) - 1e-9)))
    picks = [int(i) for i in select_samples(points, k, method=method, seed=seed)]
    todo = [i for i in picks if trace_json(pool[i]) not in done]
    stats.update({"workload": name, "pool": len(pool), "picked": len(picks), "already_measured": len(picks) - len(todo),
                  "measured": 0, "failed": 0, "method": method, "budget": budget, "seed": seed,
                  "target": str(target),
                  "measured_on": remote.provenance() if remote is not None else "this machine (local runner)"})
    for b in range(0, len(todo), batch):
        chunk = [pool[i] for i in todo[b:b + batch]]
        secs, errors = measure(chunk, target, cores, timeout, remote)
        for sch, s in zip(chunk, secs):
            db.commit_tuning_record(ms.database.TuningRecord(sch.trace, workload, s, target,
                                                             ms.arg_info.ArgInfo.from_prim_func(sch.mod["main"])))
        stats["measured"] += len(chunk)
        stats["failed"] += sum(1 for s in secs if s == [FAILED_RUN_SECONDS])
        if progress:
            print(f"\r{name}: measured {stats['measured']}/{len(todo)} ({stats['failed']} failed), "
                  f"{time.time() - t0:.0f} s", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    stats["seconds"] = time.time() - t0
    return stats


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    pre = argparse.ArgumentParser(prog="tclm collect", add_help=False)
    pre.add_argument("--scheduler", choices=["metaschedule", "ansor"], default="metaschedule")
    s, _ = pre.parse_known_args(argv)
    if s.scheduler == "ansor":
        from ._collect_ansor import main as collect_ansor

        return collect_ansor(argv)
    return main_metaschedule(argv)


def main_metaschedule(argv):
    p = argparse.ArgumentParser(prog="tclm collect", description=__doc__.split("\n\n")[0],
                                formatter_class=HelpFormatter)
    p.add_argument("--scheduler", choices=["metaschedule", "ansor"], default="metaschedule",
                   help="metaschedule (default): these operators into MetaSchedule databases; ansor: whole "
                        "networks' tasks into Ansor record files (TVM 0.19; --scheduler ansor --help lists its "
                        "options)")
    p.add_argument("--out", default="out/collect", help="one MetaSchedule database directory per workload")
    p.add_argument("--workloads", default="matmul-128", help="comma-separated: " + ", ".join(WORKLOADS))
    p.add_argument("--target", default="llvm", choices=["llvm"], help="this machine's CPU (the only target so far)")
    p.add_argument("--pool", type=int, default=1000, help="candidates sampled per workload")
    p.add_argument("--budget", type=finite_float, default=0.1, help="fraction of the pool to measure, in (0, 1]")
    p.add_argument("--method", default="rdu", help="rdu, random, kcenter (tclm.select_samples)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampling and of the picks")
    p.add_argument("--cores", type=int, default=available_cores(), help="target num-cores and parallel builds")
    p.add_argument("--timeout", type=finite_float, default=30.0, help="build and run timeout per candidate, seconds")
    p.add_argument("--batch", type=int, default=16, help="candidates measured per batch (the database grows per batch)")
    p.add_argument("--mcpu", default="native", help="LLVM CPU: 'native' (this machine's, the default), or a name "
                   "such as 'generic' or 'skylake-avx512'")
    p.add_argument("--mtriple", default=None, help="LLVM target triple of the devices when they are not this "
                   "machine's kind (e.g. aarch64-linux-gnu with --rpc-key)")
    add_rpc_options(p)
    a = p.parse_args(argv)
    if _NO_TVM is not None:
        p.error(f"this Python ({sys.executable}) has no MetaSchedule TVM ({_NO_TVM}); run it in .venv-tvm "
                "(scripts/setup-python.sh makes it)")
    if not 0 < a.budget <= 1:
        p.error("--budget must be in (0, 1]")
    workloads = [w for w in a.workloads.split(",") if w]
    for w in workloads:
        if w not in WORKLOADS:
            p.error(f"--workloads: unknown workload '{w}' ({', '.join(WORKLOADS)})")
    require_remote_target(a, p, argv, need_platform=False)
    a.remote = from_args(a, p)
    claim_output_dir(a.out, "collect")
    try:
        return _collect_metaschedule(a, workloads)
    finally:
        release_output_dir(a.out)  # a caller may resume into it in the same process


def _collect_metaschedule(a, workloads):
    report = []
    for w in workloads:
        report.append(collect_workload(w, a.out, a.pool, a.budget, a.method, a.seed, a.cores, a.timeout, a.batch,
                                       a.mcpu, mtriple=a.mtriple, remote=a.remote))
        tmp = os.path.join(a.out, "collect.json.tmp")
        with open(tmp, "w") as f:
            json.dump(report, f, indent=1)
        os.replace(tmp, os.path.join(a.out, "collect.json"))
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
