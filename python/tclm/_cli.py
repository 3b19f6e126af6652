"""What the command-line modules (tclm.collect, tclm.tune_bench) share: float options that refuse
NaN and infinities, and the lock on an output directory (the same rules as the tclm tool's own
options, docs/reliability.md)."""
from __future__ import annotations

import argparse
import math
import os

try:
    import fcntl
except ImportError:  # not POSIX: no lock
    fcntl = None


def finite_float(text: str) -> float:
    """argparse type of every float option: a finite number ("nan", "inf", "1e999" are refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid float value: '{text}'") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number (got '{text}')")
    return value


_held = []  # the open lock files: a lock lasts until the process exits


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
