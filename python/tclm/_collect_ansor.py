"""``tclm collect --scheduler ansor``: measure randomly sampled Ansor programs of whole networks' tasks
on this machine, as TenSet did, into standard Ansor record files (TVM 0.19 auto_scheduler, .venv-ansor).

    tclm collect --scheduler ansor --networks resnet-50,squeezenet --exclude-networks resnet-18,mobilenet \\
        --pool 256 --budget 0.1 --out out/collect-ansor
    tclm collect --scheduler ansor --onnx model.onnx --input data:1x3x224x224 --budget 1 --out out/mine

Tasks: the Ansor tasks of every network (``tclm.networks``: ``--networks`` names, ``--onnx`` files),
extracted for this CPU (``llvm -mcpu=<LLVM's host CPU> -num-cores=<--cores>``), deduplicated by
workload key (``occurrences`` counts how often a task appears across the networks). Every task whose
workload key also occurs in an ``--exclude-networks`` network is dropped (the networks a model will
later tune must not be in its training data); collect.json reports how many.

Pool: per task, Ansor's own sketch sampler (``SketchPolicy`` with a ``RandomModel``,
``sample_initial_population``: random sketches with random annotations, the programs Ansor's search
starts from; not a search log) draws batches of ``--sample-batch`` programs until ``--pool`` distinct
ones (by their transform steps) or the attempt limit (``--max-sample-factor`` x pool programs drawn, or
three batches in a row without a new program: small tasks have few distinct programs). ``duplicates``
counts returned programs already in the pool; ``sampling_failures`` the programs a batch lost inside
Ansor (an annotation rule or bound inference failed, or a repeat within the batch). The policy's seed is
derived from ``--seed`` and the workload key, so the pool is a function of the seed.

Picks: ``tclm.select_samples`` (``--method``, default ``rdu``) on the pooled step features
(``tclm.featurize`` of the pool as record lines, ``tclm.pool_features``) picks ``ceil(budget * pool)``
programs (at least 1); ``--budget 1`` measures the whole pool.

Measurement: Ansor's LocalBuilder (``--cores`` parallel builds, ``--build-timeout``) and LocalRunner
(``--repeat``, ``--number``, ``--min-repeat-ms``, ``--timeout``, ``--cooldown``, ``--cache-flush``), in
batches of ``--batch``; each batch is appended to the task's record file OUT/records/<index>-<hash>.json
(one standard record line per program, ``auto_scheduler.load_records`` and ``tclm train -d`` read
it), failures included with their error_no (build/run errors, timeouts: counted, never fatal).
With ``--rpc-key`` (tclm._remote) the programs are built here and measured by Ansor's RPCRunner on
every device registered under the key at the tracker (``--rpc-tracker`` or ``$TVM_TRACKER_HOST`` /
``$TVM_TRACKER_PORT``); the devices' ``--mcpu`` (and ``--mtriple``), ``--cores`` and ``--platform``
must then be given, and provenance.json names the tracker, the key and the devices instead of this
CPU. Candidates a device loses are run timeouts; the collection stops when no device is left.
Defaults (3 repeats, one run each, of at least 20 ms: ``--min-repeat-ms`` adds runs to fast
programs; 10 s run and 30 s build timeouts; 2 parallel builds on 2 cores): a 40-task x 256-program
collection measuring everything (~10k programs) should take ~1.5-2 hours on an idle 2-core machine.
Randomly sampled programs are slow (ResNet-18 convolutions: median 35-50 ms, up to 0.6 s), so the
run phase is dominated by the programs' own run time (warm-up + 3 runs: ~0.28 s per program on
average; ~0.34 s with 50 ms, ~0.48 s with Ansor's tuning default of 100 ms); building costs ~0.7 s
of CPU per program (two at a time). 3 repeats keep the spread of every measurement in its record
(the costs list), and a program that takes longer than the 10 s timeout for its warm-up and 3 runs
(~100 times the median) is hopeless: recorded as a run timeout (error_no 7) instead of stalling
the collection.

Outputs: OUT/records/*.json, OUT/pool/*.json (every task's whole pool, one Ansor line without "r" per
program, measured or not, under the name of its record file: ``tclm transfer --candidates``),
OUT/collect.json (per task: pool, sampled, duplicates,
sampling_failures, picked, measured (successful), failed, new (measured in this run), seconds; and
totals), OUT/provenance.json (platform, CPU, flags, target, versions, settings, networks, dates), a
progress line per task on stderr.

Noise: ``--remeasure K`` measures again, with the same settings, K successful programs (seeded) of every
task already collected, writes nothing to the records and reports the run-to-run noise in
OUT/remeasure.json: per program the record's costs and the new ones; in all, the median and 90th
percentile of |new mean / recorded mean - 1|, the spread of the repeats within a measurement, and the
fraction of a task's pairs of re-measured programs that both measurements order alike. Run it on an
idle machine after the collection (it extracts the tasks again; ~1 s per program).

Resume: the pool and the picks are a function of the seed, and a pick whose program is already in the
task's record file is not measured again; a task collect.json marks done with the same settings is
skipped without sampling. Ctrl-C or SIGTERM lets the batch being measured end and stops without
writing it (a second one stops at once), so a resumed run measures it again. Another --pool,
--budget, --method, --seed, --sample-batch, --max-sample-factor, target (--cores, --mcpu, --mtriple)
or platform in the same OUT is refused (its picks would differ); the networks may change (tasks
accumulate).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import math
import os
import platform as _platform
import re
import signal
import sys
import time
from typing import Dict, List, Optional, Tuple

from ._cli import (HelpFormatter, available_cores, claim_output_dir, cpu_info, finite_float, release_output_dir,
                   write_json_atomic)
from ._remote import Remote, add_rpc_options, ansor_runner, from_args, report_device_losses, require_remote_target

#: Record error numbers (auto_scheduler.MeasureErrorNo) by name, for collect.json.
ERROR_NAMES = {1: "instantiation", 2: "compile_host", 3: "compile_device", 4: "runtime_device", 5: "wrong_answer",
               6: "build_timeout", 7: "run_timeout", 8: "unknown"}

#: Settings that decide the pool and the picks: an existing collection with other values is refused.
PICK_SETTINGS = ("platform", "target", "pool", "budget", "method", "seed", "sample_batch", "max_sample_factor")

_MAX_FLOAT = 1e10  # Ansor's cost of a failed measurement


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _read_json(path: str):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise SystemExit(f"tclm collect: error: cannot read {path}: {e} (remove it, or choose another --out)")


# ----------------------------------------------------------------------------------------- platform


def platform_name(model: str, mcpu: str, cores: int) -> str:
    """A short platform name from the CPU model, LLVM's CPU name and the core count:
    ('AMD EPYC', 'znver4', 2) -> 'amd-epyc-znver4-2c';
    ('Intel(R) Xeon(R) Platinum 8272CL CPU @ 2.60GHz', 'cascadelake', 4)
    -> 'intel-xeon-platinum-8272cl-cascadelake-4c'."""
    s = model.lower()
    s = re.sub(r"\((r|tm)\)", " ", s)
    s = re.sub(r"@.*$", " ", s)  # the clock
    s = re.sub(r"\b\d+-core\b", " ", s)
    s = re.sub(r"\b(cpu|processor|with radeon graphics)\b", " ", s)
    slug = re.sub(r"[^a-z0-9]+", "-", s).strip("-") or "cpu"
    mcpu_slug = re.sub(r"[^a-z0-9]+", "-", (mcpu or "").lower()).strip("-")
    parts = [slug]
    if mcpu_slug and mcpu_slug not in slug.split("-"):
        parts.append(mcpu_slug)
    parts.append(f"{cores}c")
    return "-".join(parts)


# ----------------------------------------------------------------------------------------- tasks


def task_hash(workload_key: str) -> str:
    """The short hash that names a task's record file."""
    return hashlib.sha1(workload_key.encode()).hexdigest()[:10]


def policy_seed(seed: int, workload_key: str) -> int:
    """SketchPolicy's seed for a task: a function of --seed and the task, never 0 (SketchPolicy takes a
    seed of 0 as 'draw one at random')."""
    h = hashlib.sha256(f"{seed}:{workload_key}".encode()).digest()
    return int.from_bytes(h[:4], "little") % ((1 << 30) - 1) + 1


def load_networks(names: List[str], onnx_files: List[str], inputs: List[str]):
    from .networks import onnx_network, relay_network

    nets = [relay_network(n) for n in names]
    nets += [onnx_network(path, inputs) for path in onnx_files]
    return nets


def network_tasks(net, target, hardware_params) -> List[Tuple[object, int]]:
    """(task, weight) of `net`, each task made with `hardware_params` (networks.extract_ansor_tasks)."""
    from .networks import extract_ansor_tasks

    tasks, weights = extract_ansor_tasks(net, target, hardware_params)
    return list(zip(tasks, weights))


def gather_tasks(nets, excluded_nets, target, hardware_params) -> Tuple[List[dict], dict]:
    """The tasks of `nets` deduplicated by workload key (in order of first appearance) without those
    that occur in `excluded_nets`. Returns (tasks, stats); a task is a dict: task, workload_key, desc,
    occurrences ({network: weight}). stats: tasks per network, found, excluded, kept, and the workload
    keys of every excluded network (what tools/hold_out_records.py holds out of other records)."""
    tasks: Dict[str, dict] = {}
    stats = {"tasks_per_network": {}, "excluded_tasks_per_network": {}, "excluded_workload_keys": {}}
    for net in nets:
        found = network_tasks(net, target, hardware_params)
        stats["tasks_per_network"][net.name] = len(found)
        for task, weight in found:
            key = task.workload_key
            entry = tasks.setdefault(key, {"task": task, "workload_key": key, "desc": task.desc, "occurrences": {}})
            entry["occurrences"][net.name] = entry["occurrences"].get(net.name, 0) + weight
    excluded_keys = set()
    for net in excluded_nets:
        found = network_tasks(net, target, hardware_params)
        stats["excluded_tasks_per_network"][net.name] = len(found)
        stats["excluded_workload_keys"][net.name] = [t.workload_key for t, _ in found]
        excluded_keys.update(t.workload_key for t, _ in found)
    kept = [t for k, t in tasks.items() if k not in excluded_keys]
    stats.update({"found": len(tasks), "excluded": len(tasks) - len(kept), "kept": len(kept)})
    return kept, stats


# ----------------------------------------------------------------------------------------- pool


def steps_key(input_obj) -> str:
    """A program's identity: its transform steps (the "i"[1][1] part of a record), as compact JSON."""
    return json.dumps(input_obj[1][1], separators=(",", ":"))


def sample_pool(task, size: int, seed: int, batch: int, max_factor: float):
    """Up to `size` distinct programs of `task` sampled by Ansor's SketchPolicy (random annotations of
    its sketches; RandomModel). Returns (input_jsons, stats): the MeasureInput JSON of each program
    (the "i" part of a record line) and counts: sampled, duplicates, sampling_failures, batches."""
    from tvm import auto_scheduler

    params = {"evolutionary_search_population": batch, "sample_init_min_population": 1}
    policy = auto_scheduler.SketchPolicy(task, program_cost_model=auto_scheduler.RandomModel(), params=params,
                                         seed=policy_seed(seed, task.workload_key), verbose=0)
    seen, out = set(), []
    stats = {"sampled": 0, "duplicates": 0, "sampling_failures": 0, "batches": 0}
    fruitless = 0
    while len(out) < size and stats["sampled"] < max_factor * size and fruitless < 3:
        states = policy.sample_initial_population()
        stats["batches"] += 1
        stats["sampled"] += batch
        stats["sampling_failures"] += max(0, batch - len(states))
        new = 0
        for state in states:
            text = auto_scheduler.MeasureInput(task, state).serialize()[0]
            key = steps_key(json.loads(text))
            if key in seen:
                stats["duplicates"] += 1
                continue
            seen.add(key)
            new += 1
            if len(out) < size:
                out.append((text, state))
        fruitless = 0 if new else fruitless + 1
    return out, stats


def pick(input_jsons: List[str], budget: float, method: str, seed: int) -> List[int]:
    """Indices of the ceil(budget * len) programs (at least 1) select_samples picks, in its order."""
    from . import DEFAULT_MAX_STEPS, featurize, pool_features, select_samples
    from .ansor import record_line_from_input_json

    n = len(input_jsons)
    if n == 0:
        return []
    k = min(n, max(1, math.ceil(budget * n - 1e-9)))
    if k == n:
        return list(range(n))
    x, mask = featurize([record_line_from_input_json(j) for j in input_jsons], max_steps=DEFAULT_MAX_STEPS)
    return [int(i) for i in select_samples(pool_features(x, mask), k, method=method, seed=seed)]


# ----------------------------------------------------------------------------------------- records


def read_record_file(path: str) -> Dict[str, int]:
    """{steps key: error_no} of the records in `path` ({} when missing). Lines that do not parse (the
    end of a write an interruption cut short) are dropped from the file, so that it stays readable."""
    try:
        with open(path) as f:
            lines = f.read().split("\n")
    except FileNotFoundError:
        return {}
    done, good, bad = {}, [], 0
    for line in lines:
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            key = steps_key(rec["i"])
            error_no = int(rec["r"][1])
        except (ValueError, KeyError, IndexError, TypeError):
            bad += 1
            continue
        done[key] = error_no
        good.append(line)
    if bad:
        print(f"tclm collect: {path}: dropped {bad} unreadable line(s) (an interrupted write)", file=sys.stderr)
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write("".join(line + "\n" for line in good))
        os.replace(tmp, path)
    return done


def append_records(path: str, inputs, results) -> None:
    """Appends one standard record line per (input, result) and syncs the file."""
    from tvm.auto_scheduler.measure_record import dump_record_to_string

    text = "".join(dump_record_to_string(i, r) for i, r in zip(inputs, results))
    with open(path, "a") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


class Measurer:
    """Ansor's LocalBuilder and LocalRunner with the collection's settings; with `remote`, the
    RPCRunner on the devices of the tracker's key instead of the LocalRunner."""

    def __init__(self, settings: dict, cores: int, remote: Optional[Remote] = None):
        from tvm import auto_scheduler

        self.remote = remote
        self.devices_left = True
        self.builder = auto_scheduler.LocalBuilder(timeout=settings["build_timeout"], n_parallel=cores)
        runner_settings = dict(timeout=settings["timeout"], number=settings["number"], repeat=settings["repeat"],
                               min_repeat_ms=settings["min_repeat_ms"])
        if remote is not None:
            self.runner = ansor_runner(remote, **runner_settings, cooldown=settings["cooldown"],
                                       cache_flush=settings["cache_flush"])
        else:
            self.runner = auto_scheduler.LocalRunner(**runner_settings, cooldown_interval=settings["cooldown"],
                                                     enable_cpu_cache_flush=settings["cache_flush"])

    def measure(self, inputs):
        """One MeasureResult per input; an unexpected failure of the whole batch gives every input an
        error result (error_no 8, unknown) instead of an exception.

        An interruption (SIGINT, SIGTERM) while the batch is measured lets the batch end (a second one
        stops at once) and then raises KeyboardInterrupt without returning it: Ctrl-C also reaches
        TVM's worker processes, so the batch's results are failures that are not the programs' own,
        and a resumed collection would never measure them again."""
        from tvm import auto_scheduler

        interrupted = []

        def on_signal(signum, frame):
            interrupted.append(signum)
            if len(interrupted) > 1:
                raise KeyboardInterrupt

        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            try:
                built = self.builder.build(inputs, verbose=0)
                results = list(self.runner.run(inputs, built, verbose=0))
            except Exception as e:  # noqa: BLE001 - recorded as failed measurements, never fatal
                msg = f"tclm collect: measuring failed: {type(e).__name__}: {e}"[:2000]
                results = [auto_scheduler.MeasureResult([_MAX_FLOAT], 8, msg, 0.0, time.time()) for _ in inputs]
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if interrupted:
            raise KeyboardInterrupt
        self.devices_left = report_device_losses(
            self.remote, [int(r.error_no) for r in results], lambda m: print(f"tclm collect: {m}", file=sys.stderr))
        return results


# ----------------------------------------------------------------------------------------- collection


def write_pool(path: str, pool) -> None:
    """Writes the task's pool to `path` (atomically): one Ansor record line without "r" per program,
    measured or not, the candidate format ``tclm predict`` and ``tclm transfer --candidates`` read."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("".join('{"i": ' + text + ', "v": "v0.6"}\n' for text, _ in pool))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def sample_task_pool(entry: dict, settings: dict):
    """The task's pool with the collection's settings (a function of the seed)."""
    return sample_pool(entry["task"], settings["pool"], settings["seed"], settings["sample_batch"],
                       settings["max_sample_factor"])


def collect_task(entry: dict, path: str, pool_path: str, settings: dict, measurer: Measurer, batch: int,
                 progress=None) -> dict:
    """Samples, picks and measures one task into the record file `path`, its whole pool into `pool_path`;
    returns its collect.json entry."""
    from tvm import auto_scheduler

    t0 = time.time()
    task = entry["task"]
    pool, stats = sample_task_pool(entry, settings)
    write_pool(pool_path, pool)
    picks = pick([text for text, _ in pool], settings["budget"], settings["method"], settings["seed"])
    done = read_record_file(path)
    keys = [steps_key(json.loads(pool[i][0])) for i in picks]
    todo = [i for i, key in zip(picks, keys) if key not in done]
    errors: Dict[str, int] = {}
    new = 0
    for b in range(0, len(todo), batch):
        chunk = todo[b:b + batch]
        inputs = [auto_scheduler.MeasureInput(task, pool[i][1]) for i in chunk]
        results = measurer.measure(inputs)
        append_records(path, inputs, results)
        for i, res in zip(chunk, results):
            done[steps_key(json.loads(pool[i][0]))] = int(res.error_no)
        if not measurer.devices_left:
            _fail(f"no device is left under {measurer.remote.describe()}: stopping (this batch is recorded; rerun "
                  "the same command once devices are registered again)")
        new += len(chunk)
        if progress is not None:
            progress(new, len(todo), time.time() - t0)
    for key in keys:
        if done.get(key, 0) != 0:
            name = ERROR_NAMES.get(done[key], str(done[key]))
            errors[name] = errors.get(name, 0) + 1
    failed = sum(errors.values())
    return {
        "workload_key": entry["workload_key"], "desc": entry["desc"], "occurrences": entry["occurrences"],
        "records": os.path.relpath(path, os.path.dirname(os.path.dirname(path))), "status": "done",
        "pool": len(pool), **stats, "picked": len(picks), "measured": len(picks) - failed, "failed": failed,
        "errors": errors, "new": new, "seconds": round(time.time() - t0, 3),
    }


def _totals(entries: List[dict]) -> dict:
    keys = ("pool", "sampled", "duplicates", "sampling_failures", "picked", "measured", "failed", "new", "seconds")
    tot = {k: sum(e.get(k, 0) for e in entries) for k in keys}
    tot["seconds"] = round(tot["seconds"], 3)
    tot["tasks"] = len(entries)
    tot["tasks_done"] = sum(1 for e in entries if e.get("status") == "done")
    errors: Dict[str, int] = {}
    for e in entries:
        for name, n in e.get("errors", {}).items():
            errors[name] = errors.get(name, 0) + n
    tot["errors"] = errors
    return tot


def _record_count(path: str) -> int:
    try:
        with open(path) as f:
            return sum(1 for line in f if line.strip())
    except FileNotFoundError:
        return -1


def _record_path(records_dir: str, index: int, key: str) -> str:
    """OUT/records/<index>-<hash>.json; an existing file of the task (an earlier run that numbered the
    tasks differently) keeps its name."""
    h = task_hash(key)
    if os.path.isdir(records_dir):
        for name in sorted(os.listdir(records_dir)):
            if name.endswith(f"-{h}.json"):
                return os.path.join(records_dir, name)
    return os.path.join(records_dir, f"{index:03d}-{h}.json")


def _percentile(xs: List[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(math.ceil(q * len(xs))) - 1)] if xs else float("nan")


def noise_summary(rows: List[dict]) -> dict:
    """Run-to-run noise of re-measured programs: rows of {"task", "recorded": [costs], "again": [costs]}
    (successful both times). |again/recorded - 1| of the means (median, 90th percentile), the spread of
    the repeats within one measurement (max/min - 1, median over the recorded measurements), and of the
    pairs of programs of one task, the fraction whose order the two measurements agree on."""
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    rel = [abs(mean(r["again"]) / mean(r["recorded"]) - 1) for r in rows]
    spread = [max(r["recorded"]) / min(r["recorded"]) - 1 for r in rows]
    agree = pairs = 0
    by_task: Dict[str, List[dict]] = {}
    for r in rows:
        by_task.setdefault(r["task"], []).append(r)
    for group in by_task.values():
        for i in range(len(group)):
            for j in range(i + 1, len(group)):
                a = mean(group[i]["recorded"]) - mean(group[j]["recorded"])
                b = mean(group[i]["again"]) - mean(group[j]["again"])
                pairs += 1
                agree += (a > 0) == (b > 0)
    return {"programs": len(rows), "tasks": len(by_task),
            "median_relative_difference": _percentile(rel, 0.5), "p90_relative_difference": _percentile(rel, 0.9),
            "median_repeat_spread": _percentile(spread, 0.5), "pairs": pairs,
            "pair_order_agreement": agree / pairs if pairs else float("nan")}


def remeasure(tasks: List[dict], records_dir: str, k: int, seed: int, measurer: Measurer, out_path: str) -> int:
    """--remeasure K: K successful programs (seeded) of every collected task measured again; the records are
    only read. Writes out_path (noise_summary and the rows) and prints the summary."""
    import random

    from tvm import auto_scheduler

    rng = random.Random(seed)
    rows: List[dict] = []
    failed = 0
    t0 = time.time()
    for index, entry in enumerate(tasks):
        path = _record_path(records_dir, index, entry["workload_key"])
        if _record_count(path) <= 0:
            continue
        inputs, results = auto_scheduler.RecordReader(path).read_lines()
        good = [(i, r) for i, r in zip(inputs, results) if int(r.error_no) == 0]
        if len(good) < 2:
            continue
        chosen = sorted(rng.sample(range(len(good)), min(k, len(good))))
        again = measurer.measure([auto_scheduler.MeasureInput(entry["task"], good[j][0].state) for j in chosen])
        for j, res in zip(chosen, again):
            if int(res.error_no) != 0:
                failed += 1
                continue
            rows.append({"task": task_hash(entry["workload_key"]), "record": os.path.basename(path),
                         "recorded": [float(c.value) for c in good[j][1].costs],
                         "again": [float(c.value) for c in res.costs]})
        print(f"tclm collect: re-measured {len(chosen)} programs of {os.path.basename(path)} "
              f"({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
    if not rows:
        _fail(f"--remeasure: no task in {records_dir} has two successful measurements to re-measure")
    summary = {**noise_summary(rows), "failed_again": failed, "seconds": round(time.time() - t0, 1),
               "date": _now()}
    write_json_atomic(out_path, {"summary": summary, "programs": rows})
    print(f"tclm collect: {summary['programs']} programs of {summary['tasks']} tasks measured again: "
          f"|again / recorded - 1| median {summary['median_relative_difference']:.3f}, 90th percentile "
          f"{summary['p90_relative_difference']:.3f}; repeats within a measurement spread "
          f"{summary['median_repeat_spread']:.3f} (median max/min - 1); {summary['pairs']} pairs of a task ordered "
          f"alike by both: {summary['pair_order_agreement']:.3f} -> {out_path}", file=sys.stderr, flush=True)
    return 0


# ----------------------------------------------------------------------------------------- command line


def build_parser() -> argparse.ArgumentParser:
    from .networks import NETWORKS

    p = argparse.ArgumentParser(prog="tclm collect --scheduler ansor", description=__doc__.split("\n\n")[0],
                                epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=HelpFormatter)
    p.add_argument("--scheduler", choices=["metaschedule", "ansor"], default="ansor",
                   help="ansor: this collector (TVM 0.19); metaschedule: operators into MetaSchedule databases")
    p.add_argument("--out", required=True, help="output directory (records/, collect.json, provenance.json); "
                   "an existing one is resumed")
    p.add_argument("--networks", default="", help="comma-separated network names: " + ", ".join(NETWORKS))
    p.add_argument("--onnx", action="append", default=[], metavar="FILE", help="an ONNX model to collect (repeatable)")
    p.add_argument("--input", action="append", default=[], metavar="NAME:SHAPE",
                   help="input shape of the ONNX models, e.g. data:1x3x224x224 (repeatable; default: the model's own)")
    p.add_argument("--exclude-networks", default="", help="comma-separated network names whose tasks are dropped "
                   "(e.g. the networks a model trained on this data will tune)")
    p.add_argument("--pool", type=int, default=256, help="distinct programs sampled per task (default 256)")
    p.add_argument("--budget", type=finite_float, default=0.1,
                   help="fraction of each task's pool to measure, in (0, 1]; 1 = all (default 0.1)")
    p.add_argument("--method", default="rdu", choices=["rdu", "random", "kcenter"],
                   help="which programs to measure (tclm.select_samples; default rdu)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampling and of the picks (default 0)")
    p.add_argument("--cores", type=int, default=available_cores(),
                   help="cores of the target and parallel builds (default: the cores this process may use, "
                        "%(default)s)")
    p.add_argument("--mcpu", default="native", help="LLVM CPU: native (this machine's, default) or a name such as "
                   "skylake-avx512")
    p.add_argument("--mtriple", default=None, help="LLVM target triple of the devices when they are not this "
                   "machine's kind (e.g. aarch64-linux-gnu with --rpc-key; default: this machine's)")
    p.add_argument("--platform", default=None, help="platform name in provenance.json (default: from the CPU model, "
                   "LLVM CPU and cores, e.g. amd-epyc-znver4-2c)")
    p.add_argument("--repeat", type=int, default=3, help="measurements per program (each a record cost; default 3)")
    p.add_argument("--number", type=int, default=1, help="runs averaged per measurement (default 1)")
    p.add_argument("--min-repeat-ms", type=int, default=20,
                   help="a measurement runs at least this long; more runs when needed (default 20)")
    p.add_argument("--timeout", type=int, default=10, help="run timeout per program, seconds (default 10)")
    p.add_argument("--build-timeout", type=int, default=30, help="build timeout per program, seconds (default 30)")
    p.add_argument("--cooldown", type=finite_float, default=0.0, help="seconds between two measurements (default 0)")
    p.add_argument("--cache-flush", action="store_true",
                   help="flush the CPU cache before each run (number 1, min-repeat-ms 0; default off)")
    p.add_argument("--batch", type=int, default=32,
                   help="programs built and run per batch; the record file grows per batch (default 32)")
    p.add_argument("--sample-batch", type=int, default=0,
                   help="programs Ansor draws per sampling batch (default 0 = min(--pool, 512), at least 16)")
    p.add_argument("--max-sample-factor", type=finite_float, default=16.0,
                   help="stop sampling a task after this many times --pool programs drawn (default 16)")
    p.add_argument("--limit-tasks", type=int, default=0, help="collect only the first N tasks (0 = all; for trials)")
    p.add_argument("--remeasure", type=int, default=0, metavar="K",
                   help="collect nothing: measure K programs of every task already collected again and report the "
                        "run-to-run noise in OUT/remeasure.json (default 0: collect)")
    add_rpc_options(p)
    return p


def _fail(msg: str) -> None:
    raise SystemExit(f"tclm collect: error: {msg}")


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    p = build_parser()
    a = p.parse_args(argv)
    try:
        from tvm import auto_scheduler  # noqa: F401
    except ImportError as e:
        p.error(f"this Python ({sys.executable}) has no TVM with auto_scheduler ({e}); Ansor needs TVM 0.19: run it "
                "in .venv-ansor (scripts/setup-ansor.sh makes it)")
    if not 0 < a.budget <= 1:
        p.error("--budget must be in (0, 1]")
    for name, value, low in (("--pool", a.pool, 1), ("--cores", a.cores, 1), ("--repeat", a.repeat, 1),
                             ("--number", a.number, 1), ("--min-repeat-ms", a.min_repeat_ms, 0),
                             ("--timeout", a.timeout, 1), ("--build-timeout", a.build_timeout, 1),
                             ("--batch", a.batch, 1), ("--sample-batch", a.sample_batch, 0),
                             ("--limit-tasks", a.limit_tasks, 0), ("--remeasure", a.remeasure, 0)):
        if value < low:
            p.error(f"{name} must be at least {low} (got {value})")
    if a.cooldown < 0 or a.max_sample_factor < 1:
        p.error("--cooldown must be >= 0 and --max-sample-factor >= 1")
    from .networks import NETWORKS

    networks = [n for n in a.networks.split(",") if n]
    excluded = [n for n in a.exclude_networks.split(",") if n]
    for n in networks + excluded:
        if n not in NETWORKS:
            p.error(f"unknown network '{n}' (known: {', '.join(NETWORKS)}; or give an ONNX file with --onnx)")
    if not networks and not a.onnx:
        p.error("give --networks and/or --onnx")
    if a.input and not a.onnx:
        p.error("--input applies to --onnx models")
    require_remote_target(a, p, argv, need_platform=True)
    remote = from_args(a, p)
    try:
        return collect(a, networks, excluded, argv, remote)
    except KeyboardInterrupt:
        print("tclm collect: interrupted; the batch being measured is not recorded; run the same command again "
              "to continue", file=sys.stderr)
        return 130


def collect(a, networks: List[str], excluded: List[str], argv: List[str], remote: Optional[Remote] = None) -> int:
    from .networks import without_tophub

    without_tophub()
    # Ansor's runner and the extracted tasks take the core count from the runtime's thread pool.
    os.environ.setdefault("TVM_NUM_THREADS", str(a.cores))
    claim_output_dir(a.out, "collect")
    try:
        return _collect(a, networks, excluded, argv, remote)
    finally:
        release_output_dir(a.out)


def _collect(a, networks: List[str], excluded: List[str], argv: List[str], remote: Optional[Remote]) -> int:
    import tvm
    from tvm import auto_scheduler

    from . import __version__
    from .tune_bench import llvm_target

    started = _now()
    target_json = llvm_target(a.cores, a.mcpu, a.mtriple)
    target = tvm.target.Target(target_json)
    cpu = cpu_info()
    model, flags = cpu["model"], cpu["flags"]
    platform = a.platform or platform_name(model, target_json.get("mcpu", "generic"), a.cores)
    measure_settings = {"repeat": a.repeat, "number": a.number, "min_repeat_ms": a.min_repeat_ms,
                        "timeout": a.timeout, "build_timeout": a.build_timeout, "cooldown": a.cooldown,
                        "cache_flush": a.cache_flush, "batch": a.batch, "builders": a.cores}
    settings = {"platform": platform, "target": str(target), "pool": a.pool, "budget": a.budget,
                "method": a.method, "seed": a.seed,
                "sample_batch": a.sample_batch or max(16, min(a.pool, 512)), "max_sample_factor": a.max_sample_factor,
                **measure_settings}

    prov_path = os.path.join(a.out, "provenance.json")
    report_path = os.path.join(a.out, "collect.json")
    old = _read_json(prov_path)
    if old is not None:
        differ = [k for k in PICK_SETTINGS if old.get("settings", {}).get(k) != settings[k]]
        if differ:
            _fail(f"--out '{a.out}' holds a collection with other settings ("
                  + ", ".join(f"{k}: {old['settings'].get(k)!r} there, {settings[k]!r} now" for k in differ)
                  + "); resume it with the same settings or choose another --out")
    if remote is not None:  # this machine only builds: its CPU is not the platform's
        model, flags = None, None
    provenance = {
        "platform": platform, "cpu_model": model, "cores": a.cores, "cpu_flags": flags,
        "measured_on": remote.provenance() if remote is not None else "this machine (local runner)",
        "machine": _platform.machine() if remote is None else None, "target": str(target),
        "mcpu": target_json.get("mcpu", "generic"),
        "tvm_version": tvm.__version__, "tclm_version": __version__, "scheduler": "ansor",
        "settings": settings, "networks": networks, "onnx": [os.path.abspath(f) for f in a.onnx],
        "onnx_inputs": a.input, "excluded_networks": excluded,
        "started": (old or {}).get("started", started), "finished": None,
        "runs": (old or {}).get("runs", []) + [{"started": started, "finished": None, "argv": argv}],
    }

    t_all = time.time()
    hardware = auto_scheduler.HardwareParams(num_cores=a.cores, target=target)
    try:
        nets = load_networks(networks, a.onnx, a.input)
        excluded_nets = load_networks(excluded, [], [])
    except ValueError as e:
        _fail(str(e))
    tasks, task_stats = gather_tasks(nets, excluded_nets, target, hardware)
    print(f"tclm collect: {task_stats['found']} distinct tasks in {', '.join(n.name for n in nets)}; "
          f"{task_stats['excluded']} dropped (in {', '.join(excluded) or 'no excluded network'}), "
          f"{task_stats['kept']} to collect ({time.time() - t_all:.0f} s)", file=sys.stderr, flush=True)
    if not tasks:
        _fail(f"no tasks left to collect: all {task_stats['found']} tasks of {', '.join(n.name for n in nets)} "
              f"occur in --exclude-networks {','.join(excluded)}")
    if a.limit_tasks:
        tasks = tasks[:a.limit_tasks]
    records_dir = os.path.join(a.out, "records")
    if a.remeasure:
        if old is None:
            _fail(f"--remeasure: --out '{a.out}' holds no collection (no provenance.json); collect first")
        return remeasure(tasks, records_dir, a.remeasure, a.seed, Measurer(settings, a.cores, remote),
                         os.path.join(a.out, "remeasure.json"))
    provenance["task_extraction"] = task_stats
    write_json_atomic(prov_path, provenance)

    os.makedirs(records_dir, exist_ok=True)
    pool_dir = os.path.join(a.out, "pool")
    previous = {e["workload_key"]: e for e in ((_read_json(report_path) or {}).get("tasks", []))}
    entries = {k: {**e, "new": 0} for k, e in previous.items()}  # tasks of earlier runs stay listed
    measurer = Measurer(settings, a.cores, remote)
    n = len(tasks)

    def save_report():
        listed = list(entries.values())
        write_json_atomic(report_path, {"scheduler": "ansor", "platform": platform, "networks": networks,
                                        "excluded_networks": excluded, "task_extraction": task_stats,
                                        "totals": _totals(listed), "tasks": listed})

    for index, entry in enumerate(tasks):
        key = entry["workload_key"]
        path = _record_path(records_dir, index, key)
        prev = previous.get(key)
        label = f"[{index + 1}/{n}] {entry['desc'] or key[:40]} ({task_hash(key)})"
        pool_path = os.path.join(pool_dir, os.path.basename(path))
        if prev is not None and prev.get("status") == "done" and _record_count(path) >= prev.get("picked", 0):
            entries[key] = {**prev, "occurrences": entry["occurrences"], "new": 0}
            if not os.path.exists(pool_path):  # a collection from before pools were written: sample it again
                write_pool(pool_path, sample_task_pool(entry, settings)[0])
            print(f"tclm collect: {label}: done earlier ({prev['measured']} measured, {prev['failed']} failed)",
                  file=sys.stderr, flush=True)
            save_report()
            continue

        def progress(done, todo, secs, label=label):
            if sys.stderr.isatty():
                print(f"\rtclm collect: {label}: {done}/{todo} measured, {secs:.0f} s", end="", file=sys.stderr,
                      flush=True)

        entries[key] = {"workload_key": key, "desc": entry["desc"], "status": "running"}
        result = collect_task(entry, path, pool_path, settings, measurer, a.batch, progress)
        entries[key] = result
        save_report()
        if sys.stderr.isatty():
            print("\r\033[K", end="", file=sys.stderr)
        print(f"tclm collect: {label}: pool {result['pool']}, picked {result['picked']}, measured "
              f"{result['measured']}, failed {result['failed']} ({result['new']} new), {result['seconds']:.1f} s "
              f"(elapsed {time.time() - t_all:.0f} s)", file=sys.stderr, flush=True)

    save_report()
    provenance["finished"] = provenance["runs"][-1]["finished"] = _now()
    write_json_atomic(prov_path, provenance)
    tot = _totals(list(entries.values()))
    print(f"tclm collect: {tot['tasks_done']} tasks, {tot['measured']} measured, {tot['failed']} failed "
          f"({tot['new']} new) in {time.time() - t_all:.0f} s -> {records_dir}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
