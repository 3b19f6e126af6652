"""``tclm tune`` with Ansor (TVM 0.19 auto_scheduler, .venv-ansor): tune every task of a network with
Ansor's task scheduler and a cost model (tclm by default), compile the network with the best schedules
found and measure its end-to-end latency.

    tclm tune --network resnet-18 --trials 1000 --model kb.tclm --out out/tune/resnet-18
    tclm tune --onnx model.onnx --input data:1x3x224x224 --trials 1000 --model kb.tclm --out out/tune/mine
    tclm tune --network mobilenet --cost-model xgb-pre --pretrain-records out/collect-ansor --out out/tune/mn

Cost models: ``tclm`` (:class:`tclm.ansor.TclmAnsorModel` from --model, fine-tuned online on what this
run measured), ``xgb`` (Ansor's XGBModel, random scores until tasks x per-round measurements arrived, as
the task scheduler's default), ``xgb-pre`` (the same, first trained on the Ansor records of
--pretrain-records) and ``random``.

xgb-pre: Ansor featurizes a record only when its workload key is registered in the process, i.e. its
task was extracted here. For records of a ``tclm collect --scheduler ansor`` collection (a
provenance.json in their directory or one above, up to the parent of --pretrain-records), the
collection's networks (its --networks and --onnx files, of every run) are extracted first with its
target and core count, which registers their workloads; other records can only be used when they are
of the tuned network's own tasks. tune.json's entry of the run reports the records read, matched, not matched
(by reason), the networks extracted per collection and the records XGBModel trained on (the
successfully measured ones: a failed measurement has no weight).

Outputs in --out: tuning.json (every measurement, Ansor's record format: ApplyHistoryBest,
``tclm train -d`` and Ansor's own tools read it), curve.csv (one row per measurement round: trials and
wall seconds so far, Ansor's estimated network latency = sum over tasks of weight x best measured
latency; empty until every task has a successful measurement (Ansor prints "-" until then) or was
given up: a task none of whose candidates built and ran in 1 + --retry-failed-tasks rounds is left
out of the estimate and compiled with TVM's fallback schedule; tasks_given_up counts them),
latency.json (the network compiled with the best schedules, its end-to-end latency with the graph
executor's time_evaluator), tune.json (network, tasks and weights, settings, machine, TVM version,
wall time split into measurement (build, run), cost-model updates/training, prediction and search).

Resumable: rerunning the same command continues from tuning.json (the task scheduler restores every
task's best latency and measured count, each search policy its measured states, the cost model is
retrained on the log) up to --trials in all, and a compile + latency measurement of the same log is
not redone. Wall time of a round interrupted by a crash is not counted in curve.csv. tune.json keeps
one entry per run of the command ("runs", written when it starts and rewritten after every round: a
run that died inside TVM keeps "ended": "died" and its time up to its last round) and their sum
("time").
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from typing import Dict, List, Optional

from ._cli import (HelpFormatter, add_tune_options, claim_output_dir, cpu_info, read_json, release_output_dir,
                   write_csv_atomic, write_json_atomic)
from ._remote import ansor_runner, from_args, report_device_losses, require_remote_target

COST_MODELS = ("tclm", "xgb", "xgb-pre", "random")
CURVE_FIELDS = ["round", "trials", "wall_seconds", "estimated_ms", "tasks_with_schedule", "tasks_given_up", "task"]
#: Files a run writes in --out.
LOG, CURVE, LATENCY, SUMMARY = "tuning.json", "curve.csv", "latency.json", "tune.json"
#: tune.json keys that must match for a rerun to continue a run (the rest may change, e.g. --trials).
IDENTITY = ("network", "cost_model", "seed", "model", "target")


def _machine() -> Dict[str, object]:
    """tune.json's CPU fields: model name and logical CPUs (tclm._cli.cpu_info)."""
    cpu = cpu_info()
    return {"cpu_model": cpu["model"], "cpu_cores": cpu["logical_cpus"], "cpu_flags": cpu["flags"]}


def _say(msg: str) -> None:
    print(f"tclm tune: {msg}", file=sys.stderr, flush=True)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tclm tune", description=__doc__.split("\n\n")[0].replace("``", ""),
        formatter_class=HelpFormatter, allow_abbrev=False,
        epilog="Outputs in --out: tuning.json (Ansor records), curve.csv, latency.json, tune.json. "
               "Rerunning the same command resumes.")
    p.add_argument("--scheduler", choices=["ansor"], default="ansor", help="this is Ansor's (TVM 0.19) tuner")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--network", help="a relay.testing network: " + ", ".join(_network_names()))
    src.add_argument("--onnx", metavar="FILE", help="an ONNX model file instead of --network")
    p.add_argument("--input", action="append", default=[], metavar="NAME:SHAPE",
                   help="ONNX input shape, e.g. data:1x3x224x224 (repeatable; default: the model's own static shapes)")
    p.add_argument("--batch", type=int, default=1, help="batch size of a --network")
    p.add_argument("--trials", type=int, default=1000, help="measurements in all, over every task (at least the "
                   "number of tasks)")
    p.add_argument("--cost-model", choices=COST_MODELS, default="tclm", help="Ansor's cost model")
    p.add_argument("--model", help="the tclm model (.tclm, Ansor step encoding); required for --cost-model tclm")
    p.add_argument("--out", help="output directory (default out/tune/NETWORK)")
    p.add_argument("--pretrain-records", metavar="PATH",
                   help="xgb-pre: an Ansor record file or a directory of them, e.g. a tclm collect --scheduler "
                        "ansor OUT (its provenance.json names the networks whose tasks are extracted so that their "
                        "records can be featurized; other records only for this network's tasks)")
    p.add_argument("--seed", type=int, default=0, help="seed of the search, the cost model and fine-tuning")
    p.add_argument("--per-round", type=int, default=64,
                   help="measurements per task-scheduler round (Ansor caps it at trials / tasks)")
    p.add_argument("--early-stopping", type=int, default=0,
                   help="stop when the estimated latency did not improve in this many trials (0: never)")
    p.add_argument("--per-task-early-stopping", type=int, default=0,
                   help="stop tuning a task after this many trials without improvement (0: never)")
    p.add_argument("--strategy", choices=["gradient", "round-robin"], default="gradient",
                   help="task scheduler's choice of the next task")
    p.add_argument("--retry-failed-tasks", type=int, default=3,
                   help="rounds more for a task none of whose candidates built and ran yet (Ansor drops such "
                        "a task after its first round)")
    p.add_argument("--population", type=int, default=2048, help="evolutionary search population (Ansor's default)")
    p.add_argument("--search-param", action="append", default=[], metavar="KEY=VALUE",
                   help="another SketchPolicy parameter, e.g. evolutionary_search_num_iters=2 (repeatable); "
                        "eps_greedy, the share of a round's measurements that are random programs, defaults to "
                        "the larger of Ansor's 0.05 and 1 / --per-round (at least one a round)")
    add_tune_options(p, min_new_records=64)
    p.add_argument("--no-compile", action="store_true", help="tune only: no compile and latency measurement")
    p.add_argument("--verify", action="store_true",
                   help="also build the network with TVM's default schedules and compare the outputs (latency.json)")
    return p


def _network_names() -> List[str]:
    from .networks import NETWORKS

    return list(NETWORKS)


# -- records --------------------------------------------------------------------------------------------

#: JSON files tclm writes beside record files (a collection's OUT, a tune --out): not records.
REPORT_FILES = ("provenance.json", "collect.json", "tune.json", "latency.json")


def record_files(path: str) -> List[str]:
    """A record file, or the record files under a directory (recursively: *.json, *.log, *.tsv, no
    hidden files, not tclm's reports REPORT_FILES, not a tclm collection's pool/ of unmeasured
    candidates), sorted; ValueError when there is none."""
    if os.path.isfile(path):
        return [path]
    if not os.path.isdir(path):
        raise ValueError(f"--pretrain-records '{path}' does not exist")
    out = []
    for root, dirs, files in os.walk(path):
        in_collection = "provenance.json" in files
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not (in_collection and d == "pool"))
        out += [os.path.join(root, f) for f in sorted(files)
                if not f.startswith(".") and f.endswith((".json", ".log", ".tsv")) and f not in REPORT_FILES]
    if not out:
        raise ValueError(f"--pretrain-records '{path}': no record files (*.json, *.log) under it")
    return out


def read_records(files: List[str], origin: Optional[List[str]] = None):
    """(inputs, results) of every readable Ansor record line of `files` (other lines are skipped); the
    file of each record is appended to `origin` when given."""
    from tvm import auto_scheduler

    inputs, results = [], []
    for fn in files:
        try:
            i, r = auto_scheduler.RecordReader(fn).read_lines()
        except Exception as e:  # noqa: BLE001 - not a record file: said, skipped
            _say(f"skipping {fn}: not an Ansor record file ({e})")
            continue
        inputs += list(i)
        results += list(r)
        if origin is not None:
            origin += [fn] * len(i)
    return inputs, results


def known_workload(key: str) -> bool:
    """Whether Ansor can rebuild the compute DAG of `key` in this process (a registered workload)."""
    from tvm.auto_scheduler.workload_registry import WORKLOAD_FUNC_REGISTRY

    if key in WORKLOAD_FUNC_REGISTRY:
        return True
    try:
        return json.loads(key)[0] in WORKLOAD_FUNC_REGISTRY
    except (ValueError, IndexError, TypeError, KeyError):
        return False


def log_trials(log: str, tasks) -> int:
    """Records of `log` that belong to `tasks` (their workload key and target), as Ansor's task
    scheduler counts them when it restores from the log."""
    if not os.path.exists(log) or os.path.getsize(log) == 0:
        return 0
    from tvm import auto_scheduler

    keys = {t.workload_key for t in tasks}
    target = str(tasks[0].target)
    inputs, _ = auto_scheduler.RecordReader(log).read_lines()
    return sum(1 for i in inputs if i.task.workload_key in keys and str(i.task.target) == target)


def best_by_task(log: str, tasks) -> List[Optional[float]]:
    """Best mean measured seconds per task in `log` (None for a task without a successful one)."""
    from tvm import auto_scheduler

    index = {t.workload_key: k for k, t in enumerate(tasks)}
    best: List[Optional[float]] = [None] * len(tasks)
    if not os.path.exists(log):
        return best
    for inp, res in zip(*auto_scheduler.RecordReader(log).read_lines()):
        k = index.get(inp.task.workload_key)
        if k is None or int(res.error_no) != 0:
            continue
        secs = statistics.mean(float(c.value) for c in res.costs)
        if best[k] is None or secs < best[k]:
            best[k] = secs
    return best


def estimate_ms(best_seconds, weights) -> float:
    """Ansor's estimated network latency in ms: sum over tasks of weight x best latency, over the tasks
    that have one (best < 1e9 s; None counts as none)."""
    return 1e3 * sum(float(w) * b for w, b in zip(weights, best_seconds) if b is not None and b < 1e9)


# -- xgb-pre: the workloads of a tclm collection ---------------------------------------------------------

#: Why a pretraining record could not be matched to a registered workload (tune.json keys).
NOT_FROM_COLLECTION = "not_from_a_collection"
NOT_IN_COLLECTION = "not_a_task_of_the_collection_networks"


def find_provenance(path: str, files: List[str]) -> Dict[str, Optional[str]]:
    """For each record file, the provenance.json of the ``tclm collect --scheduler ansor`` collection it
    belongs to (None when it has none): the nearest one in the file's directory or a directory above it,
    up to the parent of --pretrain-records `path` (so OUT, OUT/records, a record file in OUT/records or
    a directory of several collections all find theirs)."""
    root = os.path.abspath(path)
    stop = os.path.dirname(root if os.path.isdir(root) else os.path.dirname(root))
    found: Dict[str, Optional[str]] = {}
    cache: Dict[str, bool] = {}
    for fn in files:
        d, prov = os.path.dirname(os.path.abspath(fn)), None
        while True:
            cand = os.path.join(d, "provenance.json")
            if cand not in cache:
                data = read_json(cand)
                cache[cand] = isinstance(data, dict) and data.get("scheduler") == "ansor"
            if cache[cand]:
                prov = cand
                break
            if d == stop or os.path.dirname(d) == d or not d.startswith(stop):
                break
            d = os.path.dirname(d)
        found[fn] = prov
    return found


def collection_networks(prov: dict) -> List[dict]:
    """The networks of a collection's provenance.json: ``networks`` and ``onnx`` (with ``onnx_inputs``)
    of its last run, and those of every earlier run's ``argv`` (a resumed collection may have added
    networks; provenance.json keeps the last run's). A list of {"network": name} and
    {"onnx": path, "inputs": [NAME:SHAPE]}, without repeats."""
    specs = [{"network": n} for n in prov.get("networks") or []]
    specs += [{"onnx": f, "inputs": list(prov.get("onnx_inputs") or [])} for f in prov.get("onnx") or []]
    for run in prov.get("runs") or []:
        argv, names, onnx, inputs = list(run.get("argv") or []), [], [], []
        for k, arg in enumerate(argv):
            opt, eq, value = arg.partition("=")
            if not eq:
                value = argv[k + 1] if k + 1 < len(argv) else ""
            if opt == "--networks":
                names += [n for n in value.split(",") if n]
            elif opt == "--onnx" and value:
                onnx.append(os.path.abspath(value))
            elif opt == "--input" and value:
                inputs.append(value)
        specs += [{"network": n} for n in names] + [{"onnx": f, "inputs": inputs} for f in onnx]
    out: List[dict] = []
    for s in specs:
        if s not in out:
            out.append(s)
    return out


def register_collection_workloads(prov_path: str, needed: set) -> dict:
    """Extracts the Ansor tasks of the networks of the collection of `prov_path` with its target and
    hardware parameters (as ``tclm collect --scheduler ansor`` made them), which registers their workload
    keys in this process; stops once every key of `needed` is known. Returns what it did: provenance,
    target, networks extracted (with their task count), networks that could not be loaded (why),
    seconds."""
    import tvm
    from tvm import auto_scheduler

    from .networks import extract_ansor_tasks, onnx_network, relay_network

    t0 = time.time()
    prov = read_json(prov_path) or {}
    info: Dict[str, object] = {"provenance": prov_path, "target": prov.get("target"), "cores": prov.get("cores"),
                               "tvm_version": prov.get("tvm_version"), "extracted": {}, "failed": {}}
    if prov.get("tvm_version") and prov["tvm_version"] != tvm.__version__:
        _say(f"warning: {prov_path}: collected with TVM {prov['tvm_version']}, this is {tvm.__version__}: "
             "workload keys may differ")
    try:
        target = tvm.target.Target(prov["target"])
        cores = int(prov.get("cores") or target.attrs.get("num-cores") or 0)
        # As the collector: tasks remade with its core count (TVM 0.19 takes it from the thread pool).
        hardware = auto_scheduler.HardwareParams(num_cores=cores, target=target) if cores > 0 else None
    except Exception as e:  # noqa: BLE001 - a provenance.json without a usable target
        info["failed"]["target"] = f"{type(e).__name__}: {e}"
        info["seconds"] = time.time() - t0
        return info
    for spec in collection_networks(prov):
        if all(known_workload(k) for k in needed):
            break
        name = spec.get("network") or spec["onnx"]
        try:
            if "network" in spec:
                net = relay_network(spec["network"])
            else:
                net = onnx_network(spec["onnx"], spec["inputs"])
            tasks, _ = extract_ansor_tasks(net, target, hardware)
            info["extracted"][name] = len(tasks)
        except Exception as e:  # noqa: BLE001 - a missing or unreadable ONNX file, an unknown name: said
            info["failed"][name] = f"{type(e).__name__}: {e}"
    info["seconds"] = time.time() - t0
    return info


def pretrain_records(path: str):
    """(inputs, results, info) of xgb-pre: the records of --pretrain-records `path` whose workload Ansor
    can rebuild in this process. The networks of the tclm collections the records come from (their
    provenance.json) are extracted first, which registers their workloads; a record outside a
    collection can only be used when it is of a task of the tuned network. info: files, records read,
    matched, unmatched by reason, and per collection what was extracted."""
    files = record_files(path)
    origin: List[str] = []
    inputs, results = read_records(files, origin)
    provs = find_provenance(path, files)
    collections = []
    t0 = time.time()
    for prov in sorted({p for p in provs.values() if p}):
        needed = {i.task.workload_key for i, fn in zip(inputs, origin) if provs[fn] == prov}
        needed = {k for k in needed if not known_workload(k)}
        if needed:
            collections.append(register_collection_workloads(prov, needed))
        else:
            collections.append({"provenance": prov, "target": (read_json(prov) or {}).get("target"),
                                "extracted": {}, "failed": {}, "seconds": 0.0})
    keep, unmatched = [], {}
    for k, (inp, fn) in enumerate(zip(inputs, origin)):
        if known_workload(inp.task.workload_key):
            keep.append(k)
        else:
            why = NOT_IN_COLLECTION if provs[fn] else NOT_FROM_COLLECTION
            unmatched[why] = unmatched.get(why, 0) + 1
    info = {"pretrain_files": len(files), "pretrain_records": len(inputs), "pretrain_records_usable": len(keep),
            "pretrain_records_unmatched": sum(unmatched.values()), "pretrain_unmatched_reasons": unmatched,
            "pretrain_files_in_collections": sum(1 for p in provs.values() if p),
            "pretrain_collections": collections, "pretrain_extract_seconds": time.time() - t0}
    return [inputs[k] for k in keep], [results[k] for k in keep], info


def _say_pretrain(info: dict) -> None:
    """The stderr lines of xgb-pre's pretraining data: records, collections, unmatched and why."""
    n, files, usable = info["pretrain_records"], info["pretrain_files"], info["pretrain_records_usable"]
    _say(f"xgb-pre: {n} records in {files} files, {usable} matched to a registered workload, "
         f"{info['pretrain_records_unmatched']} not")
    for c in info["pretrain_collections"]:
        ext = ", ".join(f"{k} ({v} tasks)" for k, v in c["extracted"].items()) or "nothing (workloads known)"
        _say(f"xgb-pre: collection {c['provenance']}: extracted {ext} for {c.get('target')} in "
             f"{c['seconds']:.1f} s" + "".join(f"; could not load {k}: {v}" for k, v in c["failed"].items()))
    reasons = info["pretrain_unmatched_reasons"]
    if reasons.get(NOT_FROM_COLLECTION):
        _say(f"xgb-pre: {reasons[NOT_FROM_COLLECTION]} records are not from a tclm collection (no provenance.json "
             "of tclm collect --scheduler ansor in their directory or above) and not of this network's tasks: "
             "without a collection only the network's own tasks' records can be used; ignored")
    if reasons.get(NOT_IN_COLLECTION):
        _say(f"xgb-pre: {reasons[NOT_IN_COLLECTION]} records of a collection are of no task of its networks "
             "extracted here (another TVM version or target, or a network that could not be loaded); ignored")


# -- timing of TVM's measurement and of the cost model ---------------------------------------------------

class Timers:
    """Wall seconds spent in Ansor's builder and runner (the global functions LocalBuilder/LocalRunner
    call, wrapped while tuning) and in the cost model's update/predict."""

    NAMES = {"auto_scheduler.local_builder.build": "build", "auto_scheduler.local_runner.run": "run",
             "auto_scheduler.rpc_runner.run": "run"}

    def __init__(self):
        self.seconds = {"build": 0.0, "run": 0.0, "model_update": 0.0, "model_predict": 0.0}
        self._saved = {}

    def __enter__(self):
        import tvm

        for name, key in self.NAMES.items():
            orig = tvm.get_global_func(name, allow_missing=True)
            if orig is None:
                continue
            self._saved[name] = orig
            tvm.register_func(name, self._wrap(orig, key), override=True)
        return self

    def _wrap(self, fn, key):
        def timed(*args):
            t0 = time.time()
            try:
                return fn(*args)
            finally:
                self.seconds[key] += time.time() - t0
        return timed

    def __exit__(self, *exc):
        import tvm

        for name, orig in self._saved.items():
            tvm.register_func(name, orig, override=True)
        self._saved.clear()


def timed_model(model, timers: Timers):
    """Wraps a Python cost model's update and predict (XGBModel, TclmAnsorModel) to add their time to
    `timers`; Ansor's C++ RandomModel is returned as it is."""
    from tvm.auto_scheduler.cost_model.cost_model import PythonBasedModel

    if not isinstance(model, PythonBasedModel):
        return model
    update, predict = model.update, model.predict

    def timed_update(inputs, results):
        t0 = time.time()
        try:
            return update(inputs, results)
        finally:
            timers.seconds["model_update"] += time.time() - t0

    def timed_predict(task, states):
        t0 = time.time()
        try:
            return predict(task, states)
        finally:
            timers.seconds["model_predict"] += time.time() - t0

    # PythonBasedModel's packed functions call self.update / self.predict: instance attributes win.
    model.update, model.predict = timed_update, timed_predict
    return model


# -- the tuning run -------------------------------------------------------------------------------------

class _Stop(Exception):
    """Raised by the round callback to end the task scheduler's loop at the trial budget."""


class _DevicesGone(Exception):
    """Raised by the round callback when no device is left under the --rpc-key."""


def read_curve(path: str) -> List[dict]:
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def load_network(a):
    from .networks import onnx_network, parse_input_spec, relay_network

    if a.onnx:
        for s in a.input:
            parse_input_spec(s)  # refuse a bad spec before the (slow) import
        return onnx_network(a.onnx, a.input)
    return relay_network(a.network, batch=a.batch)


def make_cost_model(a, out: str, tasks, per_round: int, resuming: bool, timers: Timers):
    """The cost model of --cost-model, restored from this run's log when resuming. Returns
    (model, info) with what the summary reports (pretraining records, fine-tuning)."""
    import shutil

    from tvm import auto_scheduler

    log = os.path.join(out, LOG)
    info: Dict[str, object] = {}
    if a.cost_model == "random":
        return auto_scheduler.RandomModel(), info
    if a.cost_model in ("xgb", "xgb-pre"):
        # Ansor's task scheduler gives its own XGBModel tasks x per-round warm-up measurements.
        model = auto_scheduler.XGBModel(seed=a.seed, verbose_eval=0, num_warmup_sample=len(tasks) * per_round)
        inputs, results = [], []
        if a.cost_model == "xgb-pre":
            inputs, results, pre = pretrain_records(a.pretrain_records)
            info.update(pre)
            _say_pretrain(pre)
            if not inputs:
                _say("warning: no pretraining record matches a registered workload: xgb-pre starts untrained")
        n_pre = len(inputs)
        if resuming:
            more_i, more_r = read_records([log])
            inputs, results = inputs + more_i, results + more_r
        # Ansor's feature extraction gives nothing for a record of an unregistered workload (and none
        # for any record of the batch, then): keep only those it can rebuild.
        keep = [k for k, i in enumerate(inputs) if known_workload(i.task.workload_key)]
        inputs, results = [inputs[k] for k in keep], [results[k] for k in keep]
        if inputs:
            t0 = time.time()
            model.update(inputs, results)
            info["pretrain_seconds"] = time.time() - t0
        if a.cost_model == "xgb-pre":
            # What XGBModel trained on: a record with program features; a failed measurement has
            # throughput ~0, its weight in XGBModel's loss, so only the successful ones count.
            feats = list(model.inputs_feature_cache)[:n_pre] if inputs else []
            ok = [len(f) > 0 and int(r.error_no) == 0 for f, r in zip(feats, results[:n_pre])]
            used = sum(ok)
            info.update(pretrain_records_trained=used,
                        pretrain_records_failed_measurement=sum(1 for r in results[:n_pre] if int(r.error_no) != 0),
                        pretrain_records_without_features=sum(1 for f in feats if len(f) == 0),
                        pretrain_tasks_trained=len({inputs[k].task.workload_key for k, o in enumerate(ok) if o}))
            _say(f"xgb-pre: XGBModel trained on {used} successfully measured records of "
                 f"{info['pretrain_tasks_trained']} tasks ({info['pretrain_records_failed_measurement']} failed "
                 f"measurements carry no weight, {info['pretrain_records_without_features']} without features)"
                 + (f" in {info['pretrain_seconds']:.1f} s" if "pretrain_seconds" in info else ""))
        return timed_model(model, timers), info
    from .ansor import TclmAnsorModel

    tclm_dir = os.path.join(out, "tclm")
    os.makedirs(tclm_dir, exist_ok=True)
    measured = os.path.join(tclm_dir, "measured.json")
    start, done_trainings = a.model, 0
    if resuming:
        # Continue from the last fine-tuned model, on every measurement of the log.
        shutil.copyfile(log, measured)
        for d in os.listdir(tclm_dir):
            n = d[6:] if d.startswith("model-") else ""
            if n.isdigit() and int(n) > done_trainings and os.path.isfile(os.path.join(tclm_dir, d, "best.tclm")):
                done_trainings = int(n)
        if done_trainings:
            start = os.path.join(tclm_dir, f"model-{done_trainings}", "best.tclm")
    elif os.path.exists(measured):
        os.remove(measured)
    model = TclmAnsorModel(start, log_file=measured, retrain=not a.no_retrain, work_dir=tclm_dir,
                           min_new_records=a.min_new_records, max_train_share=a.max_train_share,
                           epochs=a.train_epochs, seed=a.seed)
    if model.tuner is not None:
        model.tuner.trainings = done_trainings  # the next fine-tuned model goes to model-(N+1)
    info["start_model"] = start
    return timed_model(model, timers), info


def tune(a, out: str, tasks, weights, target, summary: dict) -> None:
    """Runs (or continues) Ansor's task scheduler up to a.trials measurements in all. This run's entry
    in summary["runs"] (tune.json) is written when it starts and rewritten after every round, so that a
    run that dies inside TVM is still counted, with its time: such an entry keeps "ended": "died" and
    its figures up to its last round."""
    import random as pyrandom

    import numpy as np
    from tvm import auto_scheduler
    from tvm.auto_scheduler.search_policy import PreloadMeasuredStates
    from tvm.auto_scheduler.task_scheduler import TaskSchedulerCallback

    log = os.path.join(out, LOG)
    curve_path = os.path.join(out, CURVE)
    done = log_trials(log, tasks)
    curve = read_curve(curve_path)
    if done >= a.trials:
        _say(f"tuning: {done} trials in {log} already (--trials {a.trials}): nothing to tune")
        return
    resuming = done > 0
    if not resuming:
        curve = []
    wall0 = float(curve[-1]["wall_seconds"]) if curve else 0.0
    round0 = int(curve[-1]["round"]) if curve else 0
    # Keep every completed round of the curve (a crash may have left records after the last one).
    write_csv_atomic(curve_path, CURVE_FIELDS, curve)
    # Per-round size from the whole budget, so that a resumed run keeps the rounds of the first one.
    per_round = min(a.per_round, a.trials // len(tasks))
    np.random.seed(a.seed)
    pyrandom.seed(a.seed)
    timers = Timers()
    cost_model, model_info = make_cost_model(a, out, tasks, per_round, resuming, timers)
    params = search_params(a.population, per_round, a.search_param)
    set_params = dict(params)  # SketchPolicy adds its defaults to `params`; tune.json keeps what was set
    preload = [PreloadMeasuredStates(log)] if resuming else None
    # SketchPolicy draws a random seed for a seed of 0 (`seed or random.randint(...)`): seed + 1.
    policies = [auto_scheduler.SketchPolicy(t, program_cost_model=cost_model, params=params, seed=a.seed + 1,
                                            verbose=0, init_search_callbacks=preload) for t in tasks]
    remaining = a.trials - done
    t_start = time.time()
    entry = len(summary["runs"])

    def record(ended: str, trials: int) -> dict:
        """This run's figures so far, `trials` in the log, as its entry in tune.json (written atomically)."""
        seconds = time.time() - t_start
        s = timers.seconds
        run = {"started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t_start)), "ended": ended,
               "trials_before": done, "trials_after": trials, "per_round": per_round, "search_params": set_params,
               "tune_seconds": seconds, "measure_build_seconds": s["build"], "measure_run_seconds": s["run"],
               "model_update_seconds": s["model_update"], "model_predict_seconds": s["model_predict"],
               "search_seconds": max(0.0, seconds - s["build"] - s["run"] - s["model_update"] - s["model_predict"]),
               **model_info}
        if hasattr(cost_model, "stats"):
            st = cost_model.stats()
            run.update(tclm_trainings=st["trainings"], tclm_train_seconds=st["train_seconds"],
                       tclm_predicted=st["predicted"], tclm_unreadable=st["unreadable"], tclm_final_model=st["model"])
        summary["runs"][entry:] = [run]
        write_json_atomic(os.path.join(out, SUMMARY), summary)
        return run

    devices_left = [True]

    class DeviceWatch(auto_scheduler.measure.PythonBasedMeasureCallback):
        """With --rpc-key: says how many candidates of a batch the remote devices lost."""

        def callback(self, policy, inputs, results):
            devices_left[0] = report_device_losses(a.remote, [int(r.error_no) for r in results], _say)

    class Round(TaskSchedulerCallback):
        rounds = 0

        def pre_tune(self, ts, task_id):
            if ts.ct >= remaining:
                raise _Stop()
            if not devices_left[0]:
                raise _DevicesGone()

        def post_tune(self, ts, task_id):
            costs = list(ts.best_costs)
            if costs[task_id] >= 1e9 and ts.task_cts[task_id] > a.retry_failed_tasks:
                set.add(ts.dead_tasks, task_id)  # out of retries: given up, as Ansor does after one round
            have = sum(1 for c in costs if c < 1e9)
            given_up = sum(1 for k, c in enumerate(costs) if c >= 1e9 and k in ts.dead_tasks)
            est = estimate_ms(costs, weights) if have and have + given_up == len(costs) else None
            self.rounds += 1
            row = {"round": round0 + self.rounds, "trials": done + ts.ct,
                   "wall_seconds": f"{wall0 + time.time() - t_start:.3f}",
                   "estimated_ms": f"{est:.6g}" if est is not None else "", "tasks_with_schedule": have,
                   "tasks_given_up": given_up, "task": task_id}
            with open(curve_path, "a", newline="") as f:
                csv.DictWriter(f, CURVE_FIELDS).writerow(row)
            _say(f"trials {row['trials']}/{a.trials}  estimated "
                 + (f"{est:.3f} ms" if est is not None else f"- ({have}/{len(costs)} tasks measured)")
                 + (f" ({given_up} tasks given up: no candidate built and ran)" if given_up else "")
                 + f"  task {task_id}  {float(row['wall_seconds']):.0f} s")
            record("died", done + ts.ct)  # what stays in tune.json if the process dies before the next round

    scheduler = auto_scheduler.TaskScheduler(tasks, task_weights=[float(w) for w in weights],
                                             strategy=a.strategy, load_log_file=log if resuming else None,
                                             callbacks=[Round()])
    opts = auto_scheduler.TuningOptions(
        num_measure_trials=a.trials, num_measures_per_round=per_round,
        early_stopping=a.early_stopping if a.early_stopping > 0 else None, verbose=0,
        builder=auto_scheduler.LocalBuilder(n_parallel=a.cores, timeout=a.build_timeout),
        runner=(ansor_runner(a.remote, timeout=a.run_timeout, number=3, repeat=1, min_repeat_ms=a.min_repeat_ms)
                if a.remote is not None else
                auto_scheduler.LocalRunner(number=3, repeat=1, min_repeat_ms=a.min_repeat_ms, timeout=a.run_timeout)),
        measure_callbacks=[auto_scheduler.RecordToFile(log)] + ([DeviceWatch()] if a.remote is not None else []))
    # Ansor drops a task whose first round measured nothing valid (e.g. every candidate failed to
    # build); with no schedule the estimate never exists and the network keeps TVM's fallback for it.
    # Give such a task a.retry_failed_tasks more rounds (the gradient strategy picks it at once).
    class _DeadTasks(set):
        def add(self, idx):
            # Bounded: task_cts grows every round of the task, measured or not.
            if scheduler.best_costs[idx] >= 1e9 and scheduler.task_cts[idx] <= a.retry_failed_tasks:
                return
            super().add(idx)

    scheduler.dead_tasks = _DeadTasks()
    _say(f"tuning {len(tasks)} tasks with {a.cost_model}: {done} trials done, {remaining} to go, "
         f"{per_round} per round")
    record("died", done)  # every process has its entry, also one that dies before its first round
    interrupted = False
    with timers:
        try:
            scheduler.tune(opts, search_policy=policies, search_policy_params=params,
                           per_task_early_stopping=a.per_task_early_stopping or None)
        except _Stop:
            pass
        except KeyboardInterrupt:  # Ctrl-C: keep this run's numbers in tune.json, then stop
            interrupted = True
        except _DevicesGone:
            interrupted = "devices"
    run = record("interrupted" if interrupted else "finished", log_trials(log, tasks))
    if interrupted:
        if interrupted == "devices":
            raise SystemExit(f"tclm tune: error: no device is left under {a.remote.describe()}: stopped after "
                             f"{run['trials_after']} trials; rerun the same command once devices are registered again")
        _say(f"interrupted after {run['trials_after']} trials; rerun the same command to continue")
        raise KeyboardInterrupt


def search_params(population: int, per_round: int, overrides: List[str]) -> dict:
    """SketchPolicy's parameters for a run measuring `per_round` programs a round.

    SketchPolicy measures int(eps_greedy * per_round) randomly sampled programs a round and lets the cost
    model pick the rest. Its eps_greedy of 0.05 makes that 3 of its default 64, but none below 20 a round:
    the cost model alone then picks every candidate, and a task whose good schedules it ranks low is never
    measured there, so online training never sees them either. Unless --search-param sets it, eps_greedy is
    raised to 1 / per_round: one random program a round, the same for every cost model.
    """
    from tvm import auto_scheduler

    defaults = auto_scheduler.SketchPolicy.DEFAULT_PARAMS
    params = {"evolutionary_search_population": population,
              "eps_greedy": max(float(defaults["eps_greedy"]), 1.0 / per_round)}
    for kv in overrides:
        k, v = kv.split("=", 1)
        params[k] = type(defaults.get(k, v))(v)
    return params


def compile_network(net, target, log: Optional[str]):
    """The network built with the best schedules of `log` (Ansor's ApplyHistoryBest with
    relay.backend.use_auto_scheduler), or with TVM's default schedules when log is None; without
    TopHub (networks.without_tophub), also in a process that extracted no tasks first."""
    from .networks import without_tophub

    without_tophub()
    import tvm
    from tvm import auto_scheduler, relay

    if log is None:
        with tvm.transform.PassContext(opt_level=3):
            return relay.build(net.mod, target=target, params=net.params)
    with auto_scheduler.ApplyHistoryBest(log):
        with tvm.transform.PassContext(opt_level=3, config={"relay.backend.use_auto_scheduler": True}):
            return relay.build(net.mod, target=target, params=net.params)


def random_inputs(net, seed: int = 0) -> Dict[str, object]:
    import numpy as np

    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal(shape).astype(dtype) for name, (shape, dtype) in net.inputs.items()}


def run_network(lib, inputs: Dict[str, object], dev=None):
    """(graph executor module, its outputs as numpy arrays) for `inputs`, on `dev` (a remote
    connected device and the module loaded there, or this CPU)."""
    import tvm
    from tvm.contrib import graph_executor

    dev = dev or tvm.cpu()
    m = graph_executor.GraphModule(lib["default"](dev))
    for name, value in inputs.items():
        m.set_input(name, value)
    m.run()
    return m, [m.get_output(i).numpy() for i in range(m.get_num_outputs())]


def time_network(m, dev, repeat: int, min_repeat_ms: int) -> List[float]:
    """Milliseconds of `repeat` runs of graph executor module `m` (on `dev`, this CPU for None), each
    repeat running the network as many times as fill `min_repeat_ms` (TVM's time_evaluator)."""
    import tvm

    ftimer = m.module.time_evaluator("run", dev or tvm.cpu(), number=1, repeat=repeat, min_repeat_ms=min_repeat_ms)
    return [float(x) * 1e3 for x in ftimer().results]


def measure(a, out: str, net, tasks, weights, target) -> dict:
    """Compiles the network with the best schedules of the log, measures its end-to-end latency
    (optionally checks its outputs against the default-schedule build) and writes latency.json; with
    --rpc-key, both run on a device under the key (uploaded as a tar the device links)."""
    import numpy as np

    log = os.path.join(out, LOG)
    trials = log_trials(log, tasks)
    best = best_by_task(log, tasks)
    missing = [k for k, b in enumerate(best) if b is None]
    if missing:
        _say(f"warning: tasks {missing} have no successful measurement: TVM's fallback schedules are used")
    _say("compiling the network with the best schedules")
    t0 = time.time()
    lib = compile_network(net, target, log)
    compile_seconds = time.time() - t0
    inputs = random_inputs(net)
    dev, sess = None, None
    if a.remote is not None:
        from ._remote import connect_device, load_on_device

        _say(f"measuring on a device under {a.remote.describe()}")
        sess = connect_device(a.remote)
        dev = sess.cpu()
    with tempfile.TemporaryDirectory(prefix="tclm-net-") as tmp:

        def on_device(built, name):
            return load_on_device(sess, built, tmp, name) if sess is not None else built

        lib = on_device(lib, "net.tar")
        m, outputs = run_network(lib, inputs, dev)
        _say(f"compiled in {compile_seconds:.1f} s; measuring latency ({a.latency_repeat} repeats of "
             f">= {a.latency_min_repeat_ms} ms)")
        t0 = time.time()
        ms = time_network(m, dev, a.latency_repeat, a.latency_min_repeat_ms)
        measure_seconds = time.time() - t0
        result = {
            "network": summary_network_name(a), "trials": trials, "log": LOG, "mean_ms": statistics.mean(ms),
            "std_ms": statistics.stdev(ms) if len(ms) > 1 else 0.0, "min_ms": min(ms),
            "median_ms": statistics.median(ms), "repeats_ms": ms,
            "settings": {"executor": "graph", "repeat": a.latency_repeat, "min_repeat_ms": a.latency_min_repeat_ms,
                         "number": "grown by TVM to min_repeat_ms", "threads": os.environ.get("TVM_NUM_THREADS"),
                         "target": str(target),
                         "device": a.remote.provenance() if a.remote is not None else "this machine"},
            "estimated_ms": estimate_ms(best, weights) if len(missing) < len(best) else None,
            "tasks_without_schedule": missing, "compile_seconds": compile_seconds, "measure_seconds": measure_seconds,
        }
        if a.verify:
            _say("verifying: building with TVM's default schedules (TVM says they are not tuned: expected)")
            t0 = time.time()
            _, want = run_network(on_device(compile_network(net, target, None), "default.tar"), inputs, dev)
            errs = [float(np.max(np.abs(o - w))) if o.size else 0.0 for o, w in zip(outputs, want)]
            scale = [float(np.max(np.abs(w))) if w.size else 0.0 for w in want]
            ok = all(e <= 1e-3 * max(1.0, s) for e, s in zip(errs, scale))
            result["verify"] = {"max_abs_error": max(errs, default=0.0), "max_abs_reference": max(scale, default=0.0),
                                "ok": ok, "seconds": time.time() - t0}
            if not ok:
                _say(f"warning: outputs differ from the default-schedule build (max abs error {max(errs):.3g})")
        write_json_atomic(os.path.join(out, LATENCY), result)
        _say(f"end-to-end latency {result['mean_ms']:.3f} ± {result['std_ms']:.3f} ms (min {result['min_ms']:.3f}), "
             "Ansor's estimate " + ("-" if result["estimated_ms"] is None else f"{result['estimated_ms']:.3f} ms"))
        return result


def summary_network_name(a) -> str:
    return a.network if a.network else os.path.abspath(a.onnx)


def main(argv: Optional[List[str]] = None) -> int:
    p = parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    a = p.parse_args(argv)
    # -- refuse bad input before anything slow
    if a.network:
        if a.network not in _network_names():
            p.error(f"--network: unknown network '{a.network}' (known: {', '.join(_network_names())}; "
                    "or give --onnx FILE)")
        if a.input:
            p.error("--input goes with --onnx (a --network has its own input)")
    else:
        if not os.path.isfile(a.onnx):
            p.error(f"--onnx: file '{a.onnx}' does not exist")
        from .networks import parse_input_spec

        for s in a.input:
            try:
                parse_input_spec(s)
            except ValueError as e:
                p.error(str(e))
    if a.cost_model == "tclm":
        if not a.model:
            p.error("--cost-model tclm needs --model (a tclm model trained on Ansor records, e.g. "
                    "tclm train -d platinum=../shared/data/tlcbench_platinum8358)")
        if not os.path.isfile(a.model):
            p.error(f"--model: file '{a.model}' does not exist")
    elif a.model and not os.path.isfile(a.model):
        p.error(f"--model: file '{a.model}' does not exist")
    if a.cost_model == "xgb-pre":
        if not a.pretrain_records:
            p.error("--cost-model xgb-pre needs --pretrain-records (an Ansor record file or directory)")
        try:
            record_files(a.pretrain_records)
        except ValueError as e:
            p.error(str(e))
    for name in ("trials", "per_round", "population", "cores", "latency_repeat", "batch", "min_new_records",
                 "train_epochs"):
        if getattr(a, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive")
    for name in ("early_stopping", "per_task_early_stopping", "min_repeat_ms", "latency_min_repeat_ms",
                 "retry_failed_tasks"):
        if getattr(a, name) < 0:
            p.error(f"--{name.replace('_', '-')} must not be negative")
    if not (math.isfinite(a.max_train_share) and 0 <= a.max_train_share <= 1):
        p.error("--max-train-share must be in [0, 1]")
    for kv in a.search_param:
        if "=" not in kv or not kv.split("=", 1)[0]:
            p.error(f"--search-param '{kv}': expected KEY=VALUE")
    out = a.out or os.path.join("out", "tune", a.network or os.path.splitext(os.path.basename(a.onnx))[0])
    # The runtime's thread pool (TVM's default is half the logical CPUs); builder/runner workers inherit it.
    os.environ.setdefault("TVM_NUM_THREADS", str(a.cores))
    try:
        import tvm
        from tvm import auto_scheduler  # noqa: F401
    except ImportError as e:
        p.error(f"this Python ({sys.executable}) has no TVM with auto_scheduler ({e}); run it in .venv-ansor "
                "(scripts/setup-ansor.sh) or use --scheduler metaschedule")
    if a.search_param:
        known = auto_scheduler.SketchPolicy.DEFAULT_PARAMS
        for kv in a.search_param:
            k, v = kv.split("=", 1)
            if k not in known:
                p.error(f"--search-param: unknown SketchPolicy parameter '{k}' ({', '.join(known)})")
            try:
                type(known[k])(v)
            except ValueError:
                p.error(f"--search-param {kv}: not a {type(known[k]).__name__}")
    require_remote_target(a, p, argv, need_platform=False)
    a.remote = from_args(a, p)
    claim_output_dir(out, "tune")
    try:
        return _run(p, a, out)
    finally:
        release_output_dir(out)


def _run(p: argparse.ArgumentParser, a, out: str) -> int:
    import tvm

    from .tune_bench import llvm_target

    t_all = time.time()
    _say("loading the network")
    try:
        net = load_network(a)
    except (ValueError, OSError) as e:
        p.error(str(e))
    except Exception as e:  # noqa: BLE001 - e.g. a corrupt ONNX file or one Relay cannot import
        p.error(f"cannot import {a.onnx or a.network}: {type(e).__name__}: {e}")
    target = tvm.target.Target(llvm_target(a.cores, a.mcpu, a.mtriple))
    from .networks import extract_ansor_tasks

    t0 = time.time()
    tasks, weights = extract_ansor_tasks(net, target)
    extract_seconds = time.time() - t0
    if not tasks:
        p.error("the network has no tunable tasks")
    if a.trials < len(tasks):
        p.error(f"--trials {a.trials}: the network has {len(tasks)} tasks; Ansor measures at least one per task")
    _say(f"{len(tasks)} tasks extracted in {extract_seconds:.1f} s (weights {list(map(int, weights))})")

    summary_path = os.path.join(out, SUMMARY)
    old = read_json(summary_path) or {}
    identity = {"network": summary_network_name(a), "cost_model": a.cost_model, "seed": a.seed,
                "model": os.path.abspath(a.model) if a.cost_model == "tclm" else None, "target": str(target)}
    if os.path.exists(os.path.join(out, LOG)) and old:
        differ = [k for k in IDENTITY if old.get(k) != identity[k]]
        if differ:
            p.error(f"--out {out} holds a run with other settings ({', '.join(f'{k}: {old.get(k)}' for k in differ)});"
                    " give another --out")
    summary = dict(old)
    summary.update(identity)
    summary.update({
        "format": "tclm-tune-ansor", "inputs": {k: list(v[0]) for k, v in net.inputs.items()},
        "tasks": [{"workload_key": t.workload_key, "desc": t.desc, "weight": int(w),
                   "flop_ct": float(t.compute_dag.flop_ct)} for t, w in zip(tasks, weights)],
        "trials_requested": a.trials, "pretrain_records": a.pretrain_records,
        "settings": {k: v for k, v in vars(a).items() if k not in ("network", "onnx", "out", "remote")},
        "measured_on": a.remote.provenance() if a.remote is not None else "this machine (local runner)",
        "machine": {**_machine(), "tvm_version": tvm.__version__, "python": platform.python_version(),
                    "threads": os.environ.get("TVM_NUM_THREADS")},
        "extract_seconds": extract_seconds,
    })
    summary.setdefault("runs", [])
    write_json_atomic(summary_path, summary)

    tune(a, out, tasks, weights, target, summary)
    runs = summary["runs"]
    summary["trials"] = log_trials(os.path.join(out, LOG), tasks)
    curve = read_curve(os.path.join(out, CURVE))
    summary["final_estimated_ms"] = float(curve[-1]["estimated_ms"]) if curve and curve[-1]["estimated_ms"] else None
    summary["time"] = {k: sum(s.get(k, 0.0) for s in runs) for k in (
        "tune_seconds", "measure_build_seconds", "measure_run_seconds", "model_update_seconds",
        "model_predict_seconds", "search_seconds")}
    summary["time"]["tclm_train_seconds"] = sum(s.get("tclm_train_seconds", 0.0) for s in runs)
    write_json_atomic(summary_path, summary)

    if not a.no_compile:
        lat = read_json(os.path.join(out, LATENCY))
        if lat and lat.get("trials") == summary["trials"] and (not a.verify or "verify" in lat):
            _say(f"latency of this log measured already ({lat['mean_ms']:.3f} ms, {LATENCY})")
        else:
            lat = measure(a, out, net, tasks, weights, target)
        summary["latency_ms"] = {k: lat[k] for k in ("mean_ms", "std_ms", "min_ms")}
        summary["time"]["compile_seconds"] = lat["compile_seconds"]
        summary["time"]["latency_measure_seconds"] = lat["measure_seconds"]
    summary["time"]["this_command_seconds"] = time.time() - t_all
    write_json_atomic(summary_path, summary)
    _say(f"done: {summary['trials']} trials, outputs in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
