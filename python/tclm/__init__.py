"""tclm: a learned Mamba cost model for TVM tensor programs (Python bindings).

The native part (tclm._tclm) is tclm's libtorch-free C++ core: the inference engine, the Ansor record
and MetaSchedule trace parsers, the featurizer and the active sampler. Training needs libtorch and is
done by the ``tclm`` command-line tool, which :func:`cli` runs.

Main entry points (docs/python.md has examples):

* :class:`Engine` -- load a trained model (.tclm) and score programs: ``Engine(path).predict_lines(lines)``.
* :func:`parse_trace` -- a MetaSchedule trace (JSON text) -> list of (kind, ints, str) steps.
* :func:`featurize` -- record / trace lines -> (x [n, L, STEP_FEATURE_DIM], mask [n, L]) float32.
* :func:`pool_features` -- featurized programs -> float32 [n, POOLED_FEATURE_DIM] sampler points.
* :func:`select_samples` -- which programs to measure next (rdu, random, uncertainty, kcenter, balto).
* :func:`cli` -- run the ``tclm`` tool (``tclm.cli(["train", "-d", "k80=data", "-o", "out"])``).

Errors: a model file that cannot be loaded raises :class:`TclmError` (a RuntimeError) with tclm's
message; bad arguments raise ValueError; :func:`cli` raises :class:`CliError` (a
subprocess.CalledProcessError) on a non-zero exit and FileNotFoundError when no tool is found.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Sequence

from ._tclm import (  # noqa: F401  (re-exported)
    DEFAULT_MAX_STEPS,
    FEATURE_VERSION,
    POOLED_FEATURE_DIM,
    SAMPLE_METHODS,
    STEP_FEATURE_DIM,
    TRACE_FEATURE_VERSION,
    Engine,
    TclmError,
    feature_version_name,
    featurize,
    parse_trace,
    pool_features,
    select_samples,
)

try:
    from . import _build_info
except ImportError:  # imported from a source tree that was not built by CMake
    _build_info = None

__version__ = _build_info.VERSION if _build_info is not None else "0.1.0"

__all__ = [
    "DEFAULT_MAX_STEPS",
    "FEATURE_VERSION",
    "POOLED_FEATURE_DIM",
    "SAMPLE_METHODS",
    "STEP_FEATURE_DIM",
    "TRACE_FEATURE_VERSION",
    "CliError",
    "Engine",
    "TclmError",
    "__version__",
    "cli",
    "feature_version_name",
    "featurize",
    "find_cli",
    "parse_trace",
    "pool_features",
    "select_samples",
]


class CliError(subprocess.CalledProcessError):
    """The ``tclm`` tool exited with a non-zero status; str() includes the end of its stderr."""

    def __str__(self) -> str:
        text = super().__str__()
        err = self.stderr
        if isinstance(err, bytes):
            err = err.decode(errors="replace")
        if err:
            tail = err.strip().splitlines()[-20:]
            text += "\n" + "\n".join(tail)
        return text


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_cli() -> str:
    """Path of the ``tclm`` command-line tool.

    Looked up, in order: the environment variable ``TCLM_BIN`` (must name an executable file), ``tclm``
    on PATH, then ``<checkout>/build/tclm`` of the checkout the package was built from (recorded at
    build time in ``tclm._build_info.SOURCE_DIR``). Raises FileNotFoundError saying what was tried.
    """
    env = os.environ.get("TCLM_BIN")
    if env:
        if _executable(Path(env)):
            return env
        raise FileNotFoundError(f"TCLM_BIN={env!r} is not an executable file (the tclm command-line tool)")
    tried = ["TCLM_BIN (unset)", "tclm on PATH"]
    on_path = shutil.which("tclm")
    if on_path:
        return on_path
    if _build_info is not None and _build_info.SOURCE_DIR:
        candidate = Path(_build_info.SOURCE_DIR) / "build" / "tclm"
        if _executable(candidate):
            return str(candidate)
        tried.append(str(candidate))
    raise FileNotFoundError(
        "the tclm command-line tool was not found (tried " + ", ".join(tried) + "); build it with "
        "scripts/build.sh in a tclm checkout (it needs libtorch) and set TCLM_BIN to build/tclm or put it on PATH"
    )


def cli(args: Sequence[str], check: bool = True, capture_output: bool = True, **kwargs) -> subprocess.CompletedProcess:
    """Runs the ``tclm`` command-line tool (:func:`find_cli`) with ``args``; returns the CompletedProcess.

    E.g. ``tclm.cli(["train", "-d", "k80=data/records/k80", "--epochs", "1", "-o", "out/k80"])`` trains a
    model whose ``out/k80/best.tclm`` :class:`Engine` loads. Output is captured as text by default
    (``result.stdout``, ``result.stderr``); pass ``capture_output=False`` to let it print. Other keyword
    arguments go to subprocess.run (``cwd``, ``env``, ``timeout``, ...).
    Raises FileNotFoundError when no tool is found, and :class:`CliError` (a
    subprocess.CalledProcessError whose message ends with the tool's stderr) when ``check`` is true
    and the tool exits with a non-zero status (1: bad input or failure; 2: usage; 3: internal error).
    """
    if isinstance(args, (str, bytes)):
        raise TypeError("tclm.cli: args must be a list of arguments, not one string")
    cmd = [find_cli(), *map(str, args)]
    kwargs.setdefault("text", True)
    result = subprocess.run(cmd, check=False, capture_output=capture_output, **kwargs)
    if check and result.returncode != 0:
        raise CliError(result.returncode, cmd, output=result.stdout, stderr=result.stderr)
    return result
