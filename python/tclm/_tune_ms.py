"""``tclm tune --scheduler metaschedule``: tune every task of a Relax network with MetaSchedule
(apache-tvm 0.26) on this CPU, compile the network with the best schedules found and measure its
end-to-end latency.

    tclm tune --scheduler metaschedule --network resnet-18 --trials 1000 --model ms.tclm --out out/tune/rn18-ms
    tclm tune --scheduler metaschedule --onnx model.onnx --input data:1x3x224x224 --trials 1000 \\
        --model ms.tclm --out out/tune/mine

The network (tclm.relax_networks) is legalized and fused as ``compile_relax`` does (BindParams,
library dispatch, LegalizeOps, AnnotateTIROpPattern, FoldConstant, FuseOps, FuseTIR); each distinct
fused TIR function is a task, and its weight is the number of times the network calls it
(``relax_integration.extract_tasks``). MetaSchedule's gradient-based task scheduler shares
``--trials`` measurements among the tasks, the evolutionary search ranking candidates with the cost
model: ``tclm`` (:class:`tclm.metaschedule.TclmCostModel`, fine-tuned online on what was measured),
``xgb`` (TVM's XGBModel, the default of ``tune_relax``) or ``random``.

Outputs in --out:

* ``database_workload.json``, ``database_tuning_record.json``: the MetaSchedule JSON database, the
  tuning log (``tclm train -d`` reads it); ``logs/``: MetaSchedule's per-task logs.
* ``curve.csv``: one row per measured batch: trials so far, tuning wall seconds so far, the task,
  the batch's size and best, and the estimated network latency = sum over tasks of weight x best
  measured latency (empty until every task has a successful measurement).
* ``latency.json``: the network compiled with the database's best schedules (``compile_relax``;
  tasks without a record fall back to the default schedule) and run by the Relax VM with
  ``time_evaluator``: mean, std, median, min, max and every repeat, in seconds, and the settings.
* ``tune.json``: network, inputs, target, tasks (weight, trials, best), trials, cost model, model,
  seed, CPU (/proc/cpuinfo), TVM version and where the wall time went.
* ``cost-model.tclm`` (+ ``.state.json``) / ``cost-model.xgb``: the cost model as tuning left it,
  which a resumed run continues from; ``tclm/``: TclmCostModel's work directory.

Resumable: a rerun of the same command counts the records already in the database and measures only
the rest of --trials; candidates already in the database are never measured again (a search-strategy
wrapper drops them), and a compile + latency measurement of the same database is not redone.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import hashlib
import logging
import math
import os
import platform
import sys
import time
from typing import Dict, List, Optional

from ._cli import (HelpFormatter, add_tune_options, claim_output_dir, cpu_info, read_json, release_output_dir,
                   write_json_atomic)
from ._remote import from_args, ms_runner, require_remote_target

COST_MODELS = ("tclm", "xgb", "random")
CURVE_FIELDS = ["trials", "wall_seconds", "task", "batch_size", "batch_best_seconds", "estimated_latency_seconds"]
DB_FILES = ("database_workload.json", "database_tuning_record.json")
#: run_secs of a failed build or run in a MetaSchedule database (as tclm.metaschedule counts them).
FAILED_SECONDS = 1e9


def _log(msg: str) -> None:
    print(f"tclm tune: {msg}", file=sys.stderr, flush=True)


# -- small helpers ------------------------------------------------------------------------------------
def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _secs(values) -> List[float]:
    return [float(getattr(x, "value", x)) for x in (values or [])]


def _ok(secs: List[float]) -> bool:
    return bool(secs) and all(0 < s < FAILED_SECONDS and math.isfinite(s) for s in secs)


def _structural():
    """(structural_hash, structural_equal): tvm_ffi's (apache-tvm 0.26), else tvm.ir's."""
    try:
        from tvm_ffi import structural_equal, structural_hash
    except ImportError:
        from tvm.ir import structural_equal, structural_hash
    return structural_hash, structural_equal


def estimate(best: List[Optional[float]], weights: List[float]) -> Optional[float]:
    """Estimated network latency: sum of weight x best latency over the tasks; None while a task has none."""
    if any(b is None for b in best):
        return None
    return float(sum(w * b for w, b in zip(weights, best)))


# -- the network and its tasks ------------------------------------------------------------------------
def load_network(a):
    from .relax_networks import onnx_network, relax_network

    if a.onnx:
        return onnx_network(a.onnx, a.input)
    return relax_network(a.network, batch=a.batch)


def fuse(net, target):
    """The network with its weights bound, legalized and fused as compile_relax prepares it (the fused
    TIR functions are the tasks, and compile_relax finds their records under the same modules)."""
    import tvm
    from tvm import relax
    from tvm.relax import pipeline as relax_pipeline

    mod = net.mod
    if net.params:
        mod = relax.transform.BindParams("main", net.params)(mod)
    try:
        dispatch = list(relax_pipeline.library_dispatch_passes(target))
    except (ValueError, AttributeError):
        dispatch = []
    seq = tvm.transform.Sequential([*dispatch, relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern(),
                                    relax.transform.FoldConstant(), relax.transform.FuseOps(),
                                    relax.transform.FuseTIR()])
    with target, tvm.transform.PassContext(opt_level=3):
        return seq(mod)


class Measured:
    """What the database holds for each task: the number of records, the best latency and (hashes())
    the structural hashes of the measured programs, to skip them when the search proposes them again."""

    def __init__(self, database, task_mods: List[object]):
        shash, sequal = _structural()
        self._by_task: List[list] = [[] for _ in task_mods]
        self.best: List[Optional[float]] = [None] * len(task_mods)
        by_hash: Dict[int, List[int]] = {}
        for i, m in enumerate(task_mods):
            by_hash.setdefault(int(shash(m)), []).append(i)
        self.unmatched = 0
        for rec in database.get_all_tuning_records():
            wmod = rec.workload.mod
            idx = next((i for i in by_hash.get(int(shash(wmod)), []) if sequal(task_mods[i], wmod)), None)
            if idx is None:
                self.unmatched += 1
                continue
            self._by_task[idx].append(rec)
            secs = _secs(rec.run_secs)
            if _ok(secs):
                mean = sum(secs) / len(secs)
                self.best[idx] = mean if self.best[idx] is None else min(self.best[idx], mean)
        self.records = [len(r) for r in self._by_task]

    @property
    def total(self) -> int:
        return sum(self.records)

    def hashes(self) -> List[set]:
        """Per task, the structural hashes of its measured programs (each record's trace replayed on
        the task: a few ms per record)."""
        shash = _structural()[0]
        out: List[set] = []
        for recs in self._by_task:
            h = set()
            for rec in recs:
                try:
                    h.add(int(shash(rec.as_measure_candidate().sch.mod)))
                except Exception:  # noqa: BLE001  a trace that no longer replays cannot be proposed either
                    pass
            out.append(h)
        return out


# -- MetaSchedule glue ----------------------------------------------------------------------------------
def _make_classes(ms, derived_object):
    """The PySearchStrategy and PyMeasureCallback subclasses (defined once TVM is imported)."""

    @derived_object
    class SkipMeasured(ms.search_strategy.PySearchStrategy):
        """MetaSchedule's evolutionary search, less the candidates that the database already holds
        from an earlier run (EvolutionarySearch only remembers what it measured itself), so that a
        resumed run never measures a program twice. `known`: task name -> structural hashes."""

        def __init__(self, inner, known: Dict[str, set], skipped: List[int]):
            self.inner = inner
            self.known = known
            self.skipped = skipped  # one shared counter
            self.task_name = None

        def _initialize_with_tune_context(self, context) -> None:
            self.task_name = str(context.task_name)
            self.inner._initialize_with_tune_context(context)

        def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None, cost_model=None):
            self.inner.pre_tuning(max_trials, num_trials_per_iter, design_spaces, database, cost_model)

        def post_tuning(self) -> None:
            self.inner.post_tuning()

        def generate_measure_candidates(self):
            shash = _structural()[0]
            known = self.known.get(self.task_name)
            for _ in range(8):
                cands = self.inner.generate_measure_candidates()
                if cands is None or not known:
                    return cands
                fresh = [c for c in cands if int(shash(c.sch.mod)) not in known]
                self.skipped[0] += len(cands) - len(fresh)
                if fresh:
                    return fresh
                # All of them were measured in an earlier run: the search remembers them as picked
                # and proposes others next time.
                self.inner.notify_runner_results([], [])
            return None

        def notify_runner_results(self, measure_candidates, results) -> None:
            self.inner.notify_runner_results(measure_candidates, results)

        def clone(self):
            return SkipMeasured(self.inner.clone(), self.known, self.skipped)

    @derived_object
    class Curve(ms.measure_callback.PyMeasureCallback):
        """Appends one curve.csv row per measured batch and says it on stderr."""

        def __init__(self, path, names, weights, best, trials0, wall0, budget):
            self.path, self.names, self.weights, self.best = path, names, weights, list(best)
            self.trials, self.wall0, self.budget = trials0, wall0, budget
            self.t0 = time.time()
            self.failed = 0

        def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results) -> None:
            batch = []
            for b, r in zip(builder_results, runner_results):
                secs = _secs(r.run_secs)
                if b.error_msg is None and r.error_msg is None and _ok(secs):
                    batch.append(sum(secs) / len(secs))
                else:
                    self.failed += 1
            self.trials += len(runner_results)
            task_id = int(task_id)
            if batch:
                b = min(batch)
                self.best[task_id] = b if self.best[task_id] is None else min(self.best[task_id], b)
            est = estimate(self.best, self.weights)
            wall = self.wall0 + time.time() - self.t0
            row = {"trials": self.trials, "wall_seconds": f"{wall:.2f}", "task": self.names[task_id],
                   "batch_size": len(runner_results), "batch_best_seconds": f"{min(batch):.6g}" if batch else "",
                   "estimated_latency_seconds": f"{est:.6g}" if est is not None else ""}
            new = not os.path.exists(self.path)
            with open(self.path, "a", newline="") as f:
                w = csv.DictWriter(f, CURVE_FIELDS)
                if new:
                    w.writeheader()
                w.writerow(row)
            have = sum(x is not None for x in self.best)
            _log(f"[{self.trials}/{self.budget}] {self.names[task_id]}: {len(batch)}/{len(runner_results)} ok"
                 + (f", best {min(batch) * 1e3:.4g} ms" if batch else "")
                 + (f"; network estimate {est * 1e3:.4g} ms" if est is not None
                    else f"; {have}/{len(self.best)} tasks measured") + f" ({wall:.0f} s)")

    return SkipMeasured, Curve


@contextlib.contextmanager
def _quiet_ms_console():
    """Around MetaSchedule's logger set-up (get_loggers_from_work_dir): its console handler (stdout)
    takes the level of the "tvm.s_tir.meta_schedule" logger, INFO would print a table per measured
    batch; WARNING keeps the warnings there (the full log is in OUT/logs, the progress on stderr).
    Handlers without a name (pytest's, in-process reruns) are set aside meanwhile: the set-up lists the
    logger's handlers by name and fails on an unnamed one."""
    g = logging.getLogger("tvm.s_tir.meta_schedule")
    unnamed = [h for h in g.handlers if not h.get_name()]
    for h in unnamed:
        g.removeHandler(h)
    g.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for h in unnamed:
            g.addHandler(h)


def make_cost_model(a, ms, out: str):
    """The cost model of --cost-model, continued from --out's saved one when there is one. Returns
    (model, path it is saved to or None)."""
    if a.cost_model == "tclm":
        from .metaschedule import TclmCostModel

        cm = TclmCostModel(model=a.model, work_dir=os.path.join(out, "tclm"), retrain=not a.no_retrain,
                           min_new_records=a.min_new_records, max_train_share=a.max_train_share,
                           epochs=a.train_epochs, seed=a.seed)
        path = os.path.join(out, "cost-model.tclm")
        if os.path.exists(path + ".state.json"):
            cm.load(path)
            _log(f"continuing with the cost model saved in {path}")
        return cm, path
    if a.cost_model == "xgb":
        import numpy as np

        np.random.seed(a.seed)  # XGBModel's warm-up scores draw from numpy's global generator
        cm = ms.cost_model.XGBModel(num_tuning_cores=a.cores, tree_method="auto")  # as tune_relax makes it
        path = os.path.join(out, "cost-model.xgb")
        if os.path.exists(path):
            cm.load(path)
            _log(f"continuing with the cost model saved in {path}")
        return cm, path
    return ms.cost_model.RandomModel(seed=a.seed), None


def check_model(a, parser) -> None:
    """--model: exists, and is a MetaSchedule (trace encoding) model; a parser error otherwise."""
    if a.cost_model != "tclm":
        if a.model:
            _log(f"--model is not used with --cost-model {a.cost_model}")
        return
    if a.model is None:
        _log("no --model: tclm starts cold (random scores until its first fine-tuning on what was measured)")
        return
    if not os.path.isfile(a.model):
        parser.error(f"--model {a.model}: no such file (a tclm model trained on MetaSchedule databases: "
                     "tclm collect + tclm train)")
    from . import TRACE_FEATURE_VERSION, Engine, feature_version_name

    try:
        engine = Engine(a.model)
    except Exception as e:  # noqa: BLE001
        parser.error(f"--model {a.model}: cannot be read as a tclm model ({e})")
    if engine.feature_version != TRACE_FEATURE_VERSION:
        hint = " (an Ansor model: use it with --scheduler ansor)" if "Ansor" in engine.feature_encoding else ""
        parser.error(f"--model {a.model}: a model trained on {engine.feature_encoding}{hint}; --scheduler "
                     f"metaschedule needs one trained on {feature_version_name(TRACE_FEATURE_VERSION)} "
                     "(tclm collect + tclm train -d on MetaSchedule databases)")


def make_runner(a, ms):
    """MetaSchedule's LocalRunner, or its RPCRunner on the devices of --rpc-key."""
    config = ms.runner.EvaluatorConfig(number=3, repeat=1, min_repeat_ms=a.min_repeat_ms,
                                       enable_cpu_cache_flush=False)
    if a.remote is not None:
        return ms_runner(a.remote, timeout=a.run_timeout, evaluator_config=config)
    return ms.runner.LocalRunner(timeout_sec=a.run_timeout, evaluator_config=config)


def measure_latency(a, net, db, target, out: str, n_records: int) -> dict:
    """Compiles the network with the database's best schedules and times it with the Relax VM (on a
    device under --rpc-key when given: uploaded as a tar the device links)."""
    import tempfile

    import numpy as np
    import tvm
    from tvm import relax

    from .relax_networks import random_inputs

    ms = _ms()
    t0 = time.time()
    ex = ms.relax_integration.compile_relax(db, net.mod, target, net.params or None)
    compile_s = time.time() - t0
    dev = tvm.cpu()
    if a.remote is not None:
        from ._remote import connect_device, load_on_device

        sess = connect_device(a.remote)
        dev = sess.cpu()
        with tempfile.TemporaryDirectory(prefix="tclm-net-") as tmp:
            ex = load_on_device(sess, ex, tmp)
    vm = relax.VirtualMachine(ex, dev)
    inputs = [tvm.runtime.tensor(v, dev) for v in random_inputs(net, a.seed).values()]
    out0 = vm["main"](*inputs)
    first = out0 if not isinstance(out0, (list, tuple)) and hasattr(out0, "numpy") else None
    t1 = time.time()
    ftimer = vm.time_evaluator("main", dev, number=1, repeat=a.latency_repeat, min_repeat_ms=a.latency_min_repeat_ms)
    res = ftimer(*inputs)
    results = [float(x) for x in res.results]
    measure_s = time.time() - t1
    lat = {"network": net.name, "database_records": n_records, "mean_seconds": float(np.mean(results)),
           "std_seconds": float(np.std(results)), "median_seconds": float(np.median(results)),
           "min_seconds": float(np.min(results)), "max_seconds": float(np.max(results)),
           "repeats_seconds": results,
           "settings": {"evaluator": "relax.VirtualMachine.time_evaluator", "number": 1, "repeat": a.latency_repeat,
                        "min_repeat_ms": a.latency_min_repeat_ms,
                        "note": "each repeat runs main as often as min_repeat_ms needs and reports the mean",
                        "TVM_NUM_THREADS": os.environ.get("TVM_NUM_THREADS"),
                        "device": a.remote.provenance() if a.remote is not None else "this machine"},
           "compile_seconds": compile_s, "measure_seconds": measure_s,
           "output_shape": list(first.shape) if first is not None else None}
    return lat


def _ms():
    from tvm.s_tir import meta_schedule as ms

    return ms


# -- main -------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    from .relax_networks import NETWORKS

    p = argparse.ArgumentParser(
        prog="tclm tune --scheduler metaschedule", allow_abbrev=False,
        description="Tune every task of a Relax network with MetaSchedule (apache-tvm, .venv-tvm) and a cost "
                    "model, compile it with the best schedules and measure its latency. Resumable: rerun the "
                    "same command to continue.",
        formatter_class=HelpFormatter,
        epilog="networks: " + "; ".join(f"{k}: {v}" for k, v in NETWORKS.items()) +
               ". Outputs in --out: database_*.json (the MetaSchedule database), curve.csv, latency.json, "
               "tune.json (docs/tuning.md).")
    p.add_argument("--scheduler", choices=["metaschedule"], default="metaschedule",
                   help="accepted for `tclm tune`; this module is MetaSchedule's")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--network", default=None, help=f"a built-in network: {', '.join(NETWORKS)}")
    src.add_argument("--onnx", default=None, metavar="FILE", help="an ONNX model file instead of --network")
    p.add_argument("--input", action="append", default=[], metavar="NAME:SHAPE",
                   help="with --onnx: an input's shape, e.g. data:1x3x224x224 (repeat for several inputs; "
                        "default: the model's own static shapes)")
    p.add_argument("--batch", type=int, default=1, help="batch size of a --network")
    p.add_argument("--trials", type=int, default=1000, help="measurements over all tasks (max_trials_global)")
    p.add_argument("--model", default=None, help="tclm model trained on MetaSchedule databases (trace encoding); "
                   "none: tclm starts cold")
    p.add_argument("--out", required=True, help="output directory (database, curve.csv, latency.json, tune.json)")
    p.add_argument("--cost-model", choices=COST_MODELS, default="tclm",
                   help="tclm (TclmCostModel with --model, fine-tuned online), xgb (TVM's XGBModel), random")
    p.add_argument("--seed", type=int, default=0, help="seed of the search, the task scheduler and the cost model")
    p.add_argument("--per-iter", type=int, default=0,
                   help="candidates measured per search iteration of a task; 0: trials / (2 x tasks), "
                        "within 1..64, so that every task is measured in the first round")
    p.add_argument("--population", type=int, default=512, help="evolutionary search population")
    add_tune_options(p, min_new_records=32)
    return p


def main(argv: Optional[List[str]] = None) -> int:
    t_start = time.time()
    p = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    a = p.parse_args(argv)
    if not a.network and not a.onnx:
        p.error("give --network NAME or --onnx FILE")
    if a.input and not a.onnx:
        p.error("--input goes with --onnx")
    for name, value, low in (("--trials", a.trials, 1), ("--per-iter", a.per_iter, 0), ("--population", a.population, 2),
                             ("--cores", a.cores, 1), ("--batch", a.batch, 1),
                             ("--min-repeat-ms", a.min_repeat_ms, 0), ("--build-timeout", a.build_timeout, 1),
                             ("--run-timeout", a.run_timeout, 1), ("--latency-repeat", a.latency_repeat, 1),
                             ("--latency-min-repeat-ms", a.latency_min_repeat_ms, 0),
                             ("--min-new-records", a.min_new_records, 1), ("--train-epochs", a.train_epochs, 1)):
        if value < low:
            p.error(f"{name} must be >= {low} (got {value})")
    from .relax_networks import NETWORKS, parse_input_spec

    if a.network and a.network not in NETWORKS:
        p.error(f"--network: unknown network '{a.network}' (known: {', '.join(NETWORKS)}; or --onnx FILE)")
    for spec in a.input:
        try:
            parse_input_spec(spec)
        except ValueError as e:
            p.error(str(e))
    if a.onnx and not os.path.isfile(a.onnx):
        p.error(f"--onnx {a.onnx}: no such file")
    try:
        ms = _ms()
        import tvm
        from tvm.ir.utils import derived_object
        from tvm.target import Target
    except ImportError as e:
        p.error(f"--scheduler metaschedule: this Python ({sys.executable}) has no apache-tvm with "
                f"tvm.s_tir.meta_schedule ({e}); run it in .venv-tvm (scripts/setup-python.sh)")
    check_model(a, p)
    require_remote_target(a, p, argv, need_platform=False)
    a.remote = from_args(a, p)
    out = os.path.abspath(a.out)
    claim_output_dir(out, "tune")
    try:
        prev = read_json(os.path.join(out, "tune.json")) or {}
        name = os.path.splitext(os.path.basename(a.onnx))[0] if a.onnx else a.network
        if prev.get("network") not in (None, name):
            p.error(f"--out {a.out} holds a tuning of {prev['network']}; choose another --out for {name}")
        if prev and (prev.get("cost_model"), prev.get("seed")) != (a.cost_model, a.seed):
            _log(f"note: --out {a.out} was tuned with --cost-model {prev.get('cost_model')} --seed {prev.get('seed')}; "
                 "this run continues its database")
        os.environ.setdefault("TVM_NUM_THREADS", str(a.cores))
        from .metaschedule import build_candidate
        from .tune_bench import llvm_target

        wall = {}
        t0 = time.time()
        try:
            net = load_network(a)
        except ValueError as e:
            p.error(str(e))
        target = Target(llvm_target(a.cores, a.mcpu, a.mtriple))
        fused = fuse(net, target)
        extracted = ms.relax_integration.extract_tasks(fused, target)
        wall["extract_seconds"] = time.time() - t0
        SkipMeasured, Curve = _make_classes(ms, derived_object)

        database = ms.database.JSONDatabase(work_dir=out)
        t0 = time.time()
        measured = Measured(database, [t.dispatched[0] for t in extracted])
        wall["read_database_seconds"] = time.time() - t0
        done = measured.total
        remaining = a.trials - done
        per_iter = a.per_iter or max(1, min(64, a.trials // (2 * max(1, len(extracted)))))
        _log(f"{net.name}: {len(extracted)} tasks ({sum(t.weight for t in extracted)} calls), target {target}; "
             f"{done} of {a.trials} trials in the database" + (f", {measured.unmatched} records of other tasks"
                                                                if measured.unmatched else ""))
        curve_path = os.path.join(out, "curve.csv")
        wall0 = 0.0
        if os.path.exists(curve_path):
            with open(curve_path) as f:
                rows = list(csv.DictReader(f))
            if rows:
                wall0 = float(rows[-1]["wall_seconds"])
        skipped = [0]
        stats = {}
        tuning_wall = wall0
        t0 = time.time()
        names = [str(t.task_name) for t in extracted]
        weights = [float(t.weight) for t in extracted]
        if remaining > 0:
            known = {n: h for n, h in zip(names, measured.hashes()) if h}
            strategy = SkipMeasured(ms.search_strategy.EvolutionarySearch(
                population_size=a.population, init_min_unmeasured=min(50, max(1, a.population // 2))), known, skipped)
            with _quiet_ms_console():
                contexts, ctx_weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
                    extracted, out, strategy=strategy, num_threads=a.cores, seed=a.seed)
            index = {n: i for i, n in enumerate(names)}
            ids = [index[str(c.task_name)] for c in contexts]
            cost_model, cm_path = make_cost_model(a, ms, out)
            curve = Curve(curve_path, [names[i] for i in ids], [float(w) for w in ctx_weights],
                          [measured.best[i] for i in ids], done, wall0, a.trials)
            _log(f"tuning {len(contexts)} tasks, {remaining} more trials, {per_iter} per iteration, cost model "
                 f"{a.cost_model}")
            ms.tune.tune_tasks(
                tasks=contexts, task_weights=ctx_weights, work_dir=out, max_trials_global=remaining,
                num_trials_per_iter=per_iter,
                builder=ms.builder.LocalBuilder(max_workers=a.cores, timeout_sec=a.build_timeout,
                                                f_build=build_candidate),
                runner=make_runner(a, ms),
                database=database, cost_model=cost_model,
                measure_callbacks=ms.measure_callback.MeasureCallback.create("default") + [curve],
                task_scheduler=ms.task_scheduler.GradientBased(seed=a.seed))
            tuning_wall = curve.wall0 + time.time() - curve.t0
            if cm_path:
                cost_model.save(cm_path)
            if hasattr(cost_model, "stats"):
                stats = cost_model.stats()
            if skipped[0]:
                _log(f"{skipped[0]} candidates proposed again were already in the database: not measured again")
            measured = Measured(database, [t.dispatched[0] for t in extracted])
        else:
            _log("tuning done earlier (the database holds --trials records)")
        wall["tune_seconds"] = time.time() - t0

        lat_path = os.path.join(out, "latency.json")
        lat = read_json(lat_path)
        if lat and lat.get("database_records") == measured.total and \
                lat.get("settings", {}).get("repeat") == a.latency_repeat and \
                lat.get("settings", {}).get("min_repeat_ms") == a.latency_min_repeat_ms:
            _log(f"latency measured earlier for this database: {lat['mean_seconds'] * 1e3:.4g} ms ({lat_path})")
            wall["compile_seconds"] = wall["latency_seconds"] = 0.0
        else:
            _log("compiling the network with the best schedules and measuring its latency")
            lat = measure_latency(a, net, database, target, out, measured.total)
            lat["estimated_seconds"] = estimate(measured.best, weights)
            write_json_atomic(lat_path, lat)
            wall["compile_seconds"], wall["latency_seconds"] = lat["compile_seconds"], lat["measure_seconds"]
            _log(f"latency {lat['mean_seconds'] * 1e3:.4g} ms (std {lat['std_seconds'] * 1e3:.3g}, min "
                 f"{lat['min_seconds'] * 1e3:.4g}; {a.latency_repeat} repeats; compile {lat['compile_seconds']:.1f} s)")

        runs = prev.get("runs", [])
        wall["total_seconds"] = time.time() - t_start
        runs.append({"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t_start)), "trials_before": done,
                     "cost_model": a.cost_model, "model": os.path.abspath(a.model) if a.model else None,
                     "measured": measured.total - done, "skipped_already_measured": skipped[0], "wall": wall,
                     "cost_model_stats": stats})
        model_info = None
        if a.cost_model == "tclm" and a.model:
            model_info = {"path": os.path.abspath(a.model), "sha256": _sha256(a.model)}
        report = {
            "network": net.name, "onnx": os.path.abspath(a.onnx) if a.onnx else None,
            "inputs": {k: {"shape": list(s), "dtype": d} for k, (s, d) in net.inputs.items()},
            "target": str(target), "trials": a.trials, "trials_in_database": measured.total,
            "per_iter": per_iter, "population": a.population, "batch": a.batch if a.network else None,
            "measure": {"number": 3, "repeat": 1, "min_repeat_ms": a.min_repeat_ms, "build_timeout": a.build_timeout,
                        "run_timeout": a.run_timeout,
                        "on": a.remote.provenance() if a.remote is not None else "this machine (local runner)"},
            "cost_model": a.cost_model, "model": model_info,
            "retrain": a.cost_model == "tclm" and not a.no_retrain, "seed": a.seed, "cores": a.cores,
            "task_weights": "number of calls of each distinct fused TIR function in the network's main "
                            "(relax_integration.extract_tasks after compile_relax's legalization and fusion)",
            "tasks": [{"name": n, "weight": w, "trials": r, "best_seconds": b}
                      for n, w, r, b in zip(names, weights, measured.records, measured.best)],
            "estimated_latency_seconds": estimate(measured.best, weights),
            "latency_mean_seconds": lat.get("mean_seconds"),
            "tuning_wall_seconds": tuning_wall,
            "cpu": cpu_info(), "tvm_version": tvm.__version__, "python": platform.python_version(),
            "runs": runs,
        }
        write_json_atomic(os.path.join(out, "tune.json"), report)
        _log(f"done: {measured.total} trials in {out}; {wall['total_seconds']:.0f} s "
             f"(tune {wall['tune_seconds']:.0f}, compile {wall['compile_seconds']:.0f}, "
             f"latency {wall['latency_seconds']:.0f})")
        return 0
    finally:
        release_output_dir(out)  # main() may run again into it in the same process (tests)


if __name__ == "__main__":
    sys.exit(main())
