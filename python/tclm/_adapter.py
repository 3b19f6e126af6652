"""What the tuner adapters (tclm.metaschedule, tclm.ansor) share; each adapter module is only the
glue to its tuner's API.

:class:`AdapterCore` is the common part of both cost models: opening a model of the right feature
encoding, scoring a batch of candidates (given as the lines tclm's engine reads) with unreadable
candidates ranked last and counted, counting the measurements, fine-tuning online and the counters
of ``stats()``, and saving / loading the model with what was measured (:meth:`AdapterCore._save_state`,
:meth:`AdapterCore._load_state`).

Online fine-tuning (:class:`FineTuner`): both adapters keep what the tuner measured in a standard
record store (a MetaSchedule JSON database, an Ansor log file) and, once enough new successful
measurements arrived, fine-tune the current model on that store with ``tclm train --init``
(libtorch, in the tclm tool), then reload the engine. A fine-tuning is skipped while the training
time so far exceeds ``max_train_share`` of the wall time since the tuner was created, so that
training never dominates tuning.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from . import Engine, cli, feature_version_name

#: ``"format"`` of the state file that :meth:`AdapterCore._save_state` writes, and its version.
STATE_FORMAT = "tclm-cost-model-state"
STATE_VERSION = 1

#: Raw scores of unreadable candidates (NaN from the engine) become this: below any real score.
UNREADABLE_RAW_SCORE = -50.0


def state_path(path: str) -> str:
    """The state file that goes with a saved model ``path``: ``path + ".state.json"``."""
    return path + ".state.json"


def open_engine(path: str, feature_version: int, tuner: str, how_to_train: str, threads: int) -> Engine:
    """The engine of the weights file `path`; ValueError naming both encodings when the model was
    trained on another feature encoding than `feature_version` (what `tuner` reads)."""
    engine = Engine(path)
    if engine.feature_version != feature_version:
        raise ValueError(f"{path}: a model trained on {engine.feature_encoding}; {tuner} needs one trained on "
                         f"{feature_version_name(feature_version)} ({how_to_train})")
    engine.threads = threads
    return engine


def trained_max_steps(engine: Engine) -> Optional[int]:
    """The max_steps a model was trained with (tclm train writes it into the weights' metadata), or None."""
    try:
        value = json.loads(engine.metadata).get("extra", {}).get("max_steps")
        return int(value) if value else None
    except (ValueError, TypeError, AttributeError):
        return None


def write_atomic(path: str, data: bytes) -> None:
    """Writes `data` to `path` through a temporary file in the same directory and a rename, so that
    `path` is either the old file or the whole new one. A symbolic link is followed (its target is
    replaced, the link stays); a character device or a FIFO is written in place, never replaced."""
    if os.path.islink(path):
        path = os.path.realpath(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
        with open(path, "wb") as f:
            f.write(data)
        return
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class FineTuner:
    """Decides when to fine-tune and runs ``tclm train --init`` on a record store.

    Parameters
    ----------
    work_dir : str
        Fine-tuned models go to ``work_dir/model-N/best.tclm``.
    data : str
        The record store ``tclm train -d local=DATA`` reads (a MetaSchedule database directory or an
        Ansor log file).
    min_new_records : int
        Fine-tune once at least this many new successful measurements arrived since the last time.
    max_train_share : float
        Skip while training seconds > max_train_share x wall seconds since creation.
    epochs, seed, threads, max_steps : the ``tclm train`` options of every fine-tuning (patience
        max(3, epochs // 3), early stopping on the measured tasks, nothing held out).
    """

    def __init__(self, work_dir: str, data: str, min_new_records: int = 32, max_train_share: float = 0.25,
                 epochs: int = 100, seed: int = 0, threads: int = 0, max_steps: Optional[int] = None):
        self.work_dir = work_dir
        self.data = data
        self.min_new_records = min_new_records
        self.max_train_share = max_train_share
        self.epochs = epochs
        self.seed = seed
        self.threads = threads
        self.max_steps = max_steps
        self.created = time.time()
        self.train_seconds = 0.0
        self.trainings = 0
        self.new_records = 0
        self.log: List[dict] = []
        self._warned = False

    def due(self) -> bool:
        """Enough new measurements and the training share still under max_train_share."""
        if self.new_records < self.min_new_records:
            return False
        return self.train_seconds <= self.max_train_share * (time.time() - self.created)

    def run(self, model_path: Optional[str]) -> Optional[str]:
        """Fine-tunes model_path (None: trains from scratch) on the store; returns the new model's path,
        or None when training failed (said once on stderr, the whole message kept in ``log``)."""
        t0 = time.time()
        out = os.path.join(self.work_dir, f"model-{self.trainings + 1}")
        args = ["train", "-d", f"local={self.data}", "--test-fraction", "0", "--valid-fraction", "0",
                "--epochs", str(self.epochs), "--patience", str(max(3, self.epochs // 3)), "--seed", str(self.seed),
                "--threads", str(self.threads), "-o", out, "--quiet"]
        if self.max_steps:
            args += ["--max-steps", str(self.max_steps)]
        if model_path is not None:
            args += ["--init", model_path]
        try:
            result = cli(args, check=False)
        except OSError as e:  # the tclm tool is missing or cannot run: a failed training, not a failed search
            result = subprocess.CompletedProcess(args, 127, "", f"cannot run the tclm tool: {e}")
        seconds = time.time() - t0
        self.train_seconds += seconds
        entry = {"new_records": self.new_records, "seconds": seconds, "returncode": result.returncode}
        self.log.append(entry)
        if result.returncode == 0:
            self.trainings += 1
            self.new_records = 0
            return os.path.join(out, "best.tclm")
        entry["error"] = (result.stderr or "")[-2000:]
        if not self._warned:
            self._warned = True
            last = (result.stderr or "").strip().splitlines()[-1:] or ["(no output)"]
            print(f"tclm: fine-tuning failed (exit {result.returncode}): {last[0]}; tuning continues with the "
                  f"previous model", file=sys.stderr)
        return None


class AdapterCore:
    """The part of a tclm cost model that does not depend on the tuner's API (a mixin of
    TclmCostModel and TclmAnsorModel, next to their TVM base class).

    A subclass sets the class attributes ``FEATURE_VERSION`` (the encoding its candidates are in),
    ``TUNER`` (its name in messages), ``HOW_TO_TRAIN`` (how to get such a model, for the error of a
    model of the other encoding) and ``DEFAULT_MAX_STEPS``, calls :meth:`_init_core` in its
    constructor, and turns its tuner's candidates into engine lines (:meth:`_raw_scores`) and
    measurements into :meth:`_count_measurement` calls followed by :meth:`_fine_tune_if_due`.

    Attributes: ``engine`` (None before a model), ``model_path``, ``max_steps`` (steps kept per
    candidate: None until a model is loaded means the model's own, from its metadata, else
    ``DEFAULT_MAX_STEPS``), ``tuner`` (a :class:`FineTuner`, None without online fine-tuning) and
    the counters of :meth:`stats`.
    """

    FEATURE_VERSION: int
    TUNER: str
    HOW_TO_TRAIN: str
    DEFAULT_MAX_STEPS: int

    def _init_core(self, threads: int, max_steps: Optional[int], tuner: Optional[FineTuner]) -> None:
        self.threads = threads
        self.max_steps = max_steps
        self.tuner = tuner
        self.engine: Optional[Engine] = None
        self.model_path: Optional[str] = None
        self.measured = 0
        self.failed = 0
        self.predicted = 0
        self.unreadable = 0  # candidates the engine could not read (ranked last)
        self.predict_seconds = 0.0
        self._warned_unreadable = False

    # -- engine ---------------------------------------------------------------------------------
    def _load_engine(self, path: str) -> None:
        """Opens the weights file `path` (ValueError for a model of the other encoding); max_steps None
        becomes the model's own (its metadata), else DEFAULT_MAX_STEPS."""
        engine = open_engine(path, self.FEATURE_VERSION, self.TUNER, self.HOW_TO_TRAIN, self.threads)
        if self.max_steps is None:
            self.max_steps = trained_max_steps(engine) or self.DEFAULT_MAX_STEPS
        engine.max_steps = self.max_steps
        self.engine = engine
        self.model_path = path

    def _raw_scores(self, lines: Sequence[str]) -> np.ndarray:
        """The engine's raw scores of `lines` as float64, higher = predicted faster; a line the engine
        cannot read scores UNREADABLE_RAW_SCORE (ranked last), is counted in ``unreadable`` and said
        once on stderr (a change of TVM's program format must not go unnoticed). Needs an engine."""
        if self.engine is None:
            raise RuntimeError(f"{type(self).__name__}: no model to score with")
        t0 = time.time()
        raw, errors = self.engine.predict_lines_with_errors(list(lines))
        bad = [e for e in errors if e]
        if bad:
            self.unreadable += len(bad)
            if not self._warned_unreadable:
                self._warned_unreadable = True
                print(f"tclm: {len(bad)} of {len(lines)} candidates could not be read and are ranked last "
                      f"(first: {bad[0]})", file=sys.stderr)
        self.predicted += len(lines)
        self.predict_seconds += time.time() - t0
        return np.nan_to_num(np.asarray(raw, dtype=np.float64), nan=UNREADABLE_RAW_SCORE,
                             posinf=-UNREADABLE_RAW_SCORE, neginf=UNREADABLE_RAW_SCORE)

    # -- measurements and fine-tuning -------------------------------------------------------------
    def _count_measurement(self, ok: bool) -> None:
        """One measured candidate; a successful one counts towards the next fine-tuning."""
        self.measured += 1
        if not ok:
            self.failed += 1
        elif self.tuner is not None:
            self.tuner.new_records += 1

    def _fine_tune_if_due(self) -> None:
        """Fine-tunes on the record store when the tuner says it is due, and scores with the new model
        from then on (a failed training keeps the previous one)."""
        if self.tuner is None or not self.tuner.due():
            return
        self.tuner.max_steps = self.max_steps or self.DEFAULT_MAX_STEPS
        new_model = self.tuner.run(self.model_path)
        if new_model is not None:
            self._load_engine(new_model)

    @property
    def log(self) -> List[dict]:
        """One entry per fine-tuning: new records, seconds, return code (and the error when it failed)."""
        return self.tuner.log if self.tuner is not None else []

    def stats(self) -> dict:
        """Counters for reports: measured, failed, trainings, train seconds, predicted, unreadable
        candidates, predict seconds, model."""
        return {"measured": self.measured, "failed": self.failed,
                "trainings": self.tuner.trainings if self.tuner is not None else 0,
                "train_seconds": self.tuner.train_seconds if self.tuner is not None else 0.0,
                "predicted": self.predicted, "unreadable": self.unreadable,
                "predict_seconds": self.predict_seconds, "model": self.model_path}

    # -- save / load ------------------------------------------------------------------------------
    def _save_state(self, path: str, adapter: str, database: Dict[str, Any]) -> None:
        """Writes the model to `path` and its state to ``state_path(path)``, each atomically (a
        temporary file and a rename; the weights first, so that a state file never names weights
        that are not there).

        `path`: a copy of the current weights file (a plain .tclm that Engine and ``tclm`` read);
        not written before the first model (cold start). The state file is one JSON object::

            {"format": "tclm-cost-model-state", "version": 1, "adapter": ADAPTER,
             "weights": {"file": BASENAME, "sha256": HEX} or null (no model yet),
             "max_steps": N or null,
             "counters": {"measured": N, "failed": N, "new_records": N, "trainings": N},
             "database": {...}}   # the adapter's measured records (see its save())
        """
        weights = None
        if self.model_path is not None:
            with open(self.model_path, "rb") as f:
                data = f.read()
            if os.path.abspath(self.model_path) != os.path.abspath(path):
                write_atomic(path, data)
            weights = {"file": os.path.basename(path), "sha256": _sha256(data)}
        state = {
            "format": STATE_FORMAT, "version": STATE_VERSION, "adapter": adapter, "weights": weights,
            "max_steps": self.max_steps,
            "counters": {"measured": self.measured, "failed": self.failed,
                         "new_records": self.tuner.new_records if self.tuner is not None else 0,
                         "trainings": self.tuner.trainings if self.tuner is not None else 0},
            "database": database,
        }
        write_atomic(state_path(path), (json.dumps(state, separators=(",", ":")) + "\n").encode())

    def _load_state(self, path: str, adapter: str,
                    check_database: Optional[Callable[[Dict[str, Any], str], None]] = None) -> Dict[str, Any]:
        """Reads what :meth:`_save_state` wrote for `path` and checks it: FileNotFoundError naming a
        missing file; ValueError naming the file for a corrupt or foreign one, weights that are not the
        ones saved, or a database `check_database(database, state_file)` refuses. Only then loads the
        weights (none: back to no model), max_steps and the counters. Returns the state's "database"
        for the adapter to restore."""
        spath = state_path(path)
        if not os.path.exists(spath):
            raise FileNotFoundError(f"{spath}: no saved state for the model {path} (written by {type(self).__name__}"
                                    f".save; to start from a plain weights file, pass it as the model instead)")
        try:
            with open(spath, "rb") as f:
                state = json.loads(f.read().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"{spath}: not a tclm cost-model state file ({e})") from None
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            raise ValueError(f"{spath}: not a tclm cost-model state file (no \"format\": \"{STATE_FORMAT}\")")
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"{spath}: state version {state.get('version')!r}; this tclm reads version "
                             f"{STATE_VERSION}")
        if state.get("adapter") != adapter:
            raise ValueError(f"{spath}: saved by the {state.get('adapter')!r} adapter, not {adapter!r}")
        counters, database = state.get("counters"), state.get("database")
        max_steps, weights = state.get("max_steps"), state.get("weights")
        if (not isinstance(counters, dict) or not isinstance(database, dict)
                or not all(isinstance(counters.get(k), int) and counters[k] >= 0
                           for k in ("measured", "failed", "new_records", "trainings"))
                or not (max_steps is None or (isinstance(max_steps, int) and max_steps > 0))
                or not (weights is None or (isinstance(weights, dict) and isinstance(weights.get("sha256"), str)))):
            raise ValueError(f"{spath}: malformed state (counters, max_steps, weights or database)")
        if weights is not None:
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                raise FileNotFoundError(f"{path}: the weights file that {spath} goes with is missing") from None
            if _sha256(data) != weights["sha256"]:
                raise ValueError(f"{path}: not the weights file {spath} was saved with (SHA-256 differs)")
        if check_database is not None:
            check_database(database, spath)
        previous = self.max_steps
        self.max_steps = max_steps
        if weights is not None:
            try:
                self._load_engine(path)
            except Exception:
                self.max_steps = previous
                raise
        else:
            self.engine, self.model_path = None, None
        self.measured, self.failed = counters["measured"], counters["failed"]
        if self.tuner is not None:
            self.tuner.new_records, self.tuner.trainings = counters["new_records"], counters["trainings"]
        return database
