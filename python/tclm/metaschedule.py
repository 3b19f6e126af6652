"""tclm as a MetaSchedule cost model.

MetaSchedule (apache-tvm 0.24+: ``tvm.s_tir.meta_schedule``; TVM 0.14-0.23: ``tvm.meta_schedule``)
asks its cost model to score whole populations of candidate schedules (``predict``) and reports
every measured batch back (``update``). :class:`TclmCostModel` scores a candidate from its trace
(the sequence of schedule instructions with their sampled decisions, ``Trace::AsJSON``) through
tclm's libtorch-free inference engine, and keeps what was measured in a MetaSchedule JSON database
of its own, from which it fine-tunes the model (``tclm train --init``) when enough new measurements
have arrived, throttled so that training stays a bounded share of the tuning time.

Usage (apache-tvm 0.26)::

    from tvm.s_tir import meta_schedule as ms
    from tclm.metaschedule import TclmCostModel
    model = TclmCostModel(model="local.tclm", work_dir="tclm-work")   # or model=None: cold start
    db = ms.tune_tir(mod, target, work_dir, max_trials_global=256, cost_model=model)

Scores: the engine's raw score s (higher = faster, any real) is returned as 1 / (1 + exp(-s)),
float64. MetaSchedule clamps negative predictions to 0 (``PredictNormalizedScore``), which would
tie every candidate of a negative raw score; the logistic keeps the order and the values
comparable between calls. Without a model (cold start, before the first training) scores are
uniform random numbers from ``seed``, as TVM's untrained XGBoost model gives.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import List, Optional

import numpy as np

from . import TRACE_FEATURE_VERSION, Engine
from ._adapter import FineTuner, open_engine

try:  # apache-tvm >= 0.24
    from tvm.s_tir import meta_schedule as ms
except ImportError:  # TVM 0.14 .. 0.23
    from tvm import meta_schedule as ms  # type: ignore[no-redef]
try:  # apache-tvm >= 0.25
    from tvm.ir.utils import derived_object
except ImportError:
    derived_object = getattr(getattr(ms, "utils"), "derived_object")  # type: ignore[assignment]

__all__ = ["TclmCostModel", "trace_json", "FAILED_RUN_SECONDS"]

#: What MetaSchedule commits as the run time of a failed build or run; tclm counts such records as
#: errors (never as training targets).
FAILED_RUN_SECONDS = 1e10

#: Trace instructions kept per candidate when featurizing (MetaSchedule traces of one operator have
#: some 30-120 instructions, post-processing included).
DEFAULT_MAX_STEPS = 160


def _plain(obj):
    """json.dumps fallback for the TVM objects Trace.as_json leaves in place (IntImm, FloatImm, String)."""
    if hasattr(obj, "value"):
        return obj.value
    return str(obj)


def trace_json(schedule) -> str:
    """The schedule's trace as one JSON line, post-processing included (the layout of a
    database_tuning_record.json trace; what tclm's trace encoding reads)."""
    return json.dumps(schedule.trace.as_json(remove_postproc=False), default=_plain, separators=(",", ":"))


@derived_object
class TclmCostModel(ms.cost_model.PyCostModel):
    """A MetaSchedule cost model backed by tclm.

    Parameters
    ----------
    model : str or None
        A tclm weights file trained on MetaSchedule traces (``tclm train -d DIR`` on a MetaSchedule
        database); None starts cold (random scores until the first fine-tuning).
    work_dir : str
        Where the measured records (``db/``, a MetaSchedule JSON database) and the fine-tuned models
        (``model-N/best.tclm``) go. Created if missing.
    retrain : bool
        Fine-tune on the measured records during tuning (False: the model is fixed).
    min_new_records : int
        Fine-tune once at least this many new successful measurements arrived since the last time.
    max_train_share : float
        Skip a fine-tuning while the training time so far exceeds this share of the wall time since
        the model was created (so that training never dominates tuning).
    epochs : int
        Epochs of each fine-tuning (``tclm train --epochs``; early stopping on the measured tasks).
    seed : int
        Seed of the cold-start scores and of training.
    threads : int
        Engine threads per predict call (0 = all cores).
    max_steps : int or None
        Trace instructions kept per candidate; None: what the model was trained with (stored in its
        metadata by tclm train), else DEFAULT_MAX_STEPS. Raises ValueError for a model trained on
        Ansor records (another encoding).
    """

    def __init__(
        self,
        model: Optional[str] = None,
        work_dir: str = "tclm-work",
        retrain: bool = True,
        min_new_records: int = 32,
        max_train_share: float = 0.25,
        epochs: int = 100,
        seed: int = 0,
        threads: int = 0,
        max_steps: Optional[int] = None,
    ):
        super().__init__()
        self.work_dir = os.path.abspath(work_dir)
        self.db_dir = os.path.join(self.work_dir, "db")
        os.makedirs(self.db_dir, exist_ok=True)
        self.retrain = retrain
        self.seed = seed
        self.threads = threads
        self.max_steps = max_steps  # None: the model's own (tclm train stores it), else DEFAULT_MAX_STEPS
        self.rng = np.random.default_rng(seed)
        self.model_path: Optional[str] = None
        self.engine: Optional[Engine] = None
        if model is not None:
            self._load_engine(model)
        self.database = ms.database.JSONDatabase(work_dir=self.db_dir)
        self.tuner = FineTuner(self.work_dir, self.db_dir, min_new_records=min_new_records,
                               max_train_share=max_train_share, epochs=epochs, seed=seed, threads=threads)
        self.measured = 0
        self.failed = 0
        self.predicted = 0
        self.unreadable = 0  # candidates whose trace could not be read (ranked last)
        self._warned_unreadable = False
        self.predict_seconds = 0.0

    @property
    def log(self) -> List[dict]:
        """One entry per fine-tuning: new records, seconds, return code (and the error when it failed)."""
        return self.tuner.log

    # -- PyCostModel interface ----------------------------------------------------------------
    def load(self, path: str) -> None:
        """Loads a tclm weights file (replaces the current model)."""
        self._load_engine(path)

    def save(self, path: str) -> None:
        """Copies the current tclm weights file to `path` (nothing to save before the first model)."""
        if self.model_path is None:
            raise RuntimeError("TclmCostModel.save: no model yet (cold start, never fine-tuned)")
        tmp = path + ".tmp"
        with open(self.model_path, "rb") as src, open(tmp, "wb") as dst:
            dst.write(src.read())
        os.replace(tmp, path)

    def update(self, context, candidates, results) -> None:
        """Stores the measured candidates (failed ones with FAILED_RUN_SECONDS) in work_dir/db and
        fine-tunes when min_new_records new successful measurements arrived (see max_train_share)."""
        workload = self.database.commit_workload(context.mod)
        for cand, res in zip(candidates, results):
            secs = [float(getattr(x, "value", x)) for x in (res.run_secs or [])]
            ok = res.error_msg is None and len(secs) > 0 and all(0 < s < FAILED_RUN_SECONDS for s in secs)
            if not ok:
                secs = [FAILED_RUN_SECONDS]
                self.failed += 1
            else:
                self.tuner.new_records += 1
            self.measured += 1
            record = ms.database.TuningRecord(cand.sch.trace, workload, secs, context.target, cand.args_info)
            self.database.commit_tuning_record(record)
        if self.retrain and self.tuner.due():
            self.tuner.max_steps = self.max_steps or DEFAULT_MAX_STEPS
            new_model = self.tuner.run(self.model_path)
            if new_model is not None:
                self._load_engine(new_model)

    def predict(self, context, candidates) -> np.ndarray:
        """Scores, float64, one per candidate, higher = predicted faster (see the module docstring)."""
        t0 = time.time()
        n = len(candidates)
        if self.engine is None:
            scores = self.rng.random(n)
        else:
            raw, errors = self.engine.predict_lines_with_errors([trace_json(c.sch) for c in candidates])
            raw = raw.astype(np.float64)
            bad = [e for e in errors if e]
            if bad:  # ranked last; said once, counted in stats(): a TVM trace change must not go unnoticed
                self.unreadable += len(bad)
                if not self._warned_unreadable:
                    self._warned_unreadable = True
                    print(f"tclm: {len(bad)} of {n} candidates could not be read and are ranked last "
                          f"(first: {bad[0]})", file=sys.stderr)
            raw = np.nan_to_num(raw, nan=-50.0, posinf=50.0, neginf=-50.0)  # an unreadable trace ranks last
            scores = 1.0 / (1.0 + np.exp(-np.clip(raw, -50.0, 50.0)))
        self.predicted += n
        self.predict_seconds += time.time() - t0
        return scores

    # -- internals ------------------------------------------------------------------------------
    def _load_engine(self, path: str) -> None:
        engine = open_engine(path, TRACE_FEATURE_VERSION, "MetaSchedule", "tclm train -d on MetaSchedule databases",
                             self.threads)
        if self.max_steps is None:
            self.max_steps = _trained_max_steps(engine) or DEFAULT_MAX_STEPS
        engine.max_steps = self.max_steps
        self.engine = engine
        self.model_path = path

    def stats(self) -> dict:
        """Counters for reports: measured, failed, trainings, unreadable candidates, train/predict seconds,
        predicted."""
        return {"measured": self.measured, "failed": self.failed, "trainings": self.tuner.trainings,
                "unreadable": self.unreadable,
                "train_seconds": self.tuner.train_seconds, "predicted": self.predicted,
                "predict_seconds": self.predict_seconds, "model": self.model_path}



def _trained_max_steps(engine: Engine) -> Optional[int]:
    """The max_steps a model was trained with (tclm train writes it into the weights' metadata)."""
    try:
        value = json.loads(engine.metadata).get("extra", {}).get("max_steps")
        return int(value) if value else None
    except (ValueError, TypeError, AttributeError):
        return None
