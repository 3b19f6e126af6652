"""What the command-line modules (tclm.collect, tclm.tune, tclm.tune_bench) share: one --help format,
float options that refuse NaN and infinities, the lock on an output directory (the same rules as the
tclm tool's own options, docs/reliability.md), reports (JSON, CSV, Markdown, PNG) written atomically,
and what this machine's CPU is."""
from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import platform
from typing import Optional

try:
    import fcntl
except ImportError:  # not POSIX: no lock
    fcntl = None


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Every tclm command's --help: the description as written, and "(default: X)" after each option
    whose default is worth saying (not None, False or []) and whose help does not already say it."""

    def _get_help_string(self, action):
        default = action.default  # 0 is a default worth saying; False (a flag left off) is not
        if (default is None or default is False or default == [] or default is argparse.SUPPRESS
                or "(default" in (action.help or "")):
            return action.help
        return super()._get_help_string(action)


def finite_float(text: str) -> float:
    """argparse type of every float option: a finite number ("nan", "inf", "1e999" are refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid float value: '{text}'") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number (got '{text}')")
    return value


_held = []  # the open lock files: a lock lasts until the process exits or release_output_dir


def claim_output_dir(path: str, command: str) -> None:
    """Creates `path` and takes an exclusive lock on path/.lock; raises SystemExit with a message when
    another run holds it (two runs into one directory would overwrite each other's files)."""
    os.makedirs(path, exist_ok=True)
    if fcntl is None:
        return
    f = open(os.path.join(path, ".lock"), "a+")
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip()
        f.close()
        raise SystemExit(f"tclm {command}: error: --out '{path}' is in use by another tclm run"
                         + (f" ({holder})" if holder else "") + "; wait for it to finish or choose another --out")
    f.seek(0)
    f.truncate()
    f.write(f"pid {os.getpid()}, tclm {command}\n")
    f.flush()
    _held.append(f)


def release_output_dir(path: str) -> None:
    """Ends this process's lock on `path` (claim_output_dir holds it until the process exits
    otherwise), so that one process can run several commands into one directory one after another
    (a resume in the same process, tclm tune-bench's runs, tests)."""
    lock = os.path.abspath(os.path.join(path, ".lock"))
    for f in list(_held):
        if os.path.abspath(f.name) == lock:
            _held.remove(f)
            f.close()


def write_text_atomic(path: str, text: str) -> None:
    """Writes `text` to `path` through a temporary file, fsync and a rename: a reader never sees half a
    file, and an interrupted write leaves the old one (a resumed run reads its curve.csv back)."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", newline="") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_json_atomic(path: str, obj) -> None:
    """`obj` as indented JSON, written as write_text_atomic does."""
    write_text_atomic(path, json.dumps(obj, indent=1) + "\n")


def write_csv_atomic(path: str, fields, rows) -> None:
    """Rows (dicts) under a header of `fields`, written as write_text_atomic does."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fields)
    w.writeheader()
    w.writerows(rows)
    write_text_atomic(path, buf.getvalue())


def save_figure_atomic(fig, path: str, **kwargs) -> None:
    """A matplotlib figure saved as write_text_atomic writes text (the format from `path`'s suffix)."""
    tmp = f"{path}.tmp{os.getpid()}"
    fig.savefig(tmp, format=os.path.splitext(path)[1].lstrip(".") or None, **kwargs)
    os.replace(tmp, path)


def read_json(path: str) -> Optional[dict]:
    """The JSON in `path`; None when the file is missing or unreadable (a run's own state files: the
    run then redoes what the file would have saved)."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


#: CPU flags of /proc/cpuinfo that decide what code LLVM generates (provenance files list the present ones).
CPU_FLAGS_OF_INTEREST = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512dq", "avx512cd", "avx512bw",
                         "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16",
                         "amx_int8", "asimd", "sve", "sve2")


def cpu_info(cpuinfo_path: str = "/proc/cpuinfo") -> dict:
    """This machine's CPU from /proc/cpuinfo: ``model`` (the first "model name"; else
    platform.processor() / machine()), ``flags`` (the CPU_FLAGS_OF_INTEREST it has), ``logical_cpus``
    and ``physical_cores`` (distinct physical id / core id pairs; None when not listed)."""
    model, flags, procs, cores, phys = "", None, 0, set(), "0"
    try:
        with open(cpuinfo_path) as f:
            for line in f:
                key, _, value = line.partition(":")
                key, value = key.strip().lower(), value.strip()
                if key == "processor":
                    procs += 1
                elif key == "model name" and not model:
                    model = value
                elif key in ("flags", "features") and flags is None:
                    flags = set(value.split())
                elif key == "physical id":
                    phys = value
                elif key == "core id":
                    cores.add((phys, value))
    except OSError:
        pass
    return {"model": model or platform.processor() or platform.machine() or "unknown-cpu",
            "flags": [f for f in CPU_FLAGS_OF_INTEREST if f in (flags or ())],
            "logical_cpus": procs or os.cpu_count() or 1, "physical_cores": len(cores) or None}


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity: `taskset`, a cgroup's cpuset), the default
    `--cores` of every command that builds and measures here."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def add_tune_options(p: argparse.ArgumentParser, min_new_records: int) -> None:
    """The options `tclm tune` has with either scheduler: the machine, how candidates are measured, the
    tclm model's online fine-tuning (`min_new_records`: the scheduler's adapter default) and how the
    tuned network's latency is measured."""
    p.add_argument("--cores", type=int, default=available_cores(),
                   help="target num-cores, builder workers and the runtime's threads (TVM_NUM_THREADS unless set)")
    p.add_argument("--mcpu", default="native", help="LLVM CPU: native (this machine's) or a name such as generic")
    p.add_argument("--mtriple", default=None, help="LLVM target triple of the devices when they are not this "
                   "machine's kind (e.g. aarch64-linux-gnu with --rpc-key; default: this machine's)")
    p.add_argument("--min-repeat-ms", type=int, default=100,
                   help="measuring a candidate: one measurement of at least 3 runs, more until it lasts this long")
    p.add_argument("--build-timeout", type=int, default=60, help="seconds per candidate build")
    p.add_argument("--run-timeout", type=int, default=30, help="seconds per candidate run")
    p.add_argument("--no-retrain", action="store_true", help="tclm: keep the model fixed (no online fine-tuning)")
    p.add_argument("--min-new-records", type=int, default=min_new_records,
                   help="tclm: fine-tune once this many new successful measurements arrived")
    p.add_argument("--max-train-share", type=finite_float, default=0.25,
                   help="tclm: skip a fine-tuning while training took more than this share of the wall time")
    p.add_argument("--train-epochs", type=int, default=100, help="tclm: epochs of each fine-tuning")
    p.add_argument("--latency-repeat", type=int, default=10, help="network latency: time_evaluator repeats")
    p.add_argument("--latency-min-repeat-ms", type=int, default=500,
                   help="network latency: each repeat runs the network for at least this long")
    from ._remote import add_rpc_options  # noqa: PLC0415 - _remote imports this module

    add_rpc_options(p)
