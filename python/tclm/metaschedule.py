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

``save(path)`` writes the model and what was measured (``load(path)`` continues from there, as
TVM's XGBModel keeps its data): see :meth:`TclmCostModel.save`. What both adapters share (engine,
scoring, counters, fine-tuning, the state file) is in tclm._adapter.
"""

from __future__ import annotations

import json
import os
from typing import Optional

import numpy as np

from . import TRACE_FEATURE_VERSION
from ._adapter import AdapterCore, FineTuner, write_atomic

try:  # apache-tvm >= 0.24
    from tvm.s_tir import meta_schedule as ms
except ImportError:  # TVM 0.14 .. 0.23
    from tvm import meta_schedule as ms  # type: ignore[no-redef]
try:  # apache-tvm >= 0.25
    from tvm.ir.utils import derived_object
except ImportError:
    derived_object = getattr(getattr(ms, "utils"), "derived_object")  # type: ignore[assignment]

__all__ = ["TclmCostModel", "trace_json", "build_candidate", "FAILED_RUN_SECONDS"]

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
class TclmCostModel(ms.cost_model.PyCostModel, AdapterCore):
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

    FEATURE_VERSION = TRACE_FEATURE_VERSION
    TUNER = "MetaSchedule"
    HOW_TO_TRAIN = "tclm train -d on MetaSchedule databases"
    DEFAULT_MAX_STEPS = DEFAULT_MAX_STEPS

    #: The JSON database's files in work_dir/db (MetaSchedule's JSONDatabase names).
    WORKLOAD_FILE = "database_workload.json"
    RECORD_FILE = "database_tuning_record.json"

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
        self.rng = np.random.default_rng(seed)
        tuner = FineTuner(self.work_dir, self.db_dir, min_new_records=min_new_records, max_train_share=max_train_share,
                          epochs=epochs, seed=seed, threads=threads) if retrain else None
        self._init_core(threads, max_steps, tuner)
        if model is not None:
            self._load_engine(model)
        self.database = ms.database.JSONDatabase(work_dir=self.db_dir)

    # -- PyCostModel interface ----------------------------------------------------------------
    def save(self, path: str) -> None:
        """Saves the model and the measured database, so that :meth:`load` continues from them.

        Two files, each written atomically (temporary file + rename):

        * ``path``: the current tclm weights file, as is (``tclm.Engine`` and ``tclm train --init``
          read it). Not written before the first model (cold start, never fine-tuned).
        * ``path + ".state.json"``: one JSON object (tclm._adapter.AdapterCore._save_state):
          ``format`` "tclm-cost-model-state", ``version`` 1, ``adapter`` "metaschedule",
          ``weights`` (the weights' file name and SHA-256; null without a model), ``max_steps``,
          ``counters`` (measured, failed, new_records since the last fine-tuning, trainings) and
          ``database``: ``{"workloads": [...], "records": [...]}``, one JSON value per line of the
          MetaSchedule JSON database in work_dir/db (database_workload.json and
          database_tuning_record.json, in order: a record's first field is its workload's index).
        """
        database = {"workloads": self._read_db_lines(self.WORKLOAD_FILE),
                    "records": self._read_db_lines(self.RECORD_FILE)}
        self._save_state(path, "metaschedule", database)

    def load(self, path: str) -> None:
        """Loads what :meth:`save` wrote to `path`: the model (none: back to the cold start), max_steps,
        the counters and the measured database, which replaces work_dir/db (further measurements are
        added to it and fine-tuning trains on all of it). FileNotFoundError naming a missing file,
        ValueError naming a corrupt one (nothing is changed then); called through the TVM object
        (as ``TclmCostModel(...)`` returns it), TVM's FFI hands a FileNotFoundError on as a
        RuntimeError with the same message."""
        database = self._load_state(path, "metaschedule", self._check_database)
        for name, key in ((self.WORKLOAD_FILE, "workloads"), (self.RECORD_FILE, "records")):
            text = "".join(json.dumps(v, separators=(",", ":")) + "\n" for v in database[key])
            write_atomic(os.path.join(self.db_dir, name), text.encode())
        self.database = ms.database.JSONDatabase(work_dir=self.db_dir)

    def update(self, context, candidates, results) -> None:
        """Stores the measured candidates (failed ones with FAILED_RUN_SECONDS) in work_dir/db and
        fine-tunes when min_new_records new successful measurements arrived (see max_train_share)."""
        workload = self.database.commit_workload(context.mod)
        for cand, res in zip(candidates, results):
            secs = [float(getattr(x, "value", x)) for x in (res.run_secs or [])]
            ok = res.error_msg is None and len(secs) > 0 and all(0 < s < FAILED_RUN_SECONDS for s in secs)
            if not ok:
                secs = [FAILED_RUN_SECONDS]
            self._count_measurement(ok)
            record = ms.database.TuningRecord(cand.sch.trace, workload, secs, context.target, cand.args_info)
            self.database.commit_tuning_record(record)
        self._fine_tune_if_due()

    def predict(self, context, candidates) -> np.ndarray:
        """Scores, float64, one per candidate, higher = predicted faster (see the module docstring)."""
        if self.engine is None:
            self.predicted += len(candidates)
            return self.rng.random(len(candidates))
        raw = self._raw_scores([trace_json(c.sch) for c in candidates])
        return 1.0 / (1.0 + np.exp(-np.clip(raw, -50.0, 50.0)))

    # -- internals ------------------------------------------------------------------------------
    def _read_db_lines(self, name: str) -> list:
        """The JSON values of one database file's lines (none when the file is missing)."""
        path = os.path.join(self.db_dir, name)
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]

    @staticmethod
    def _check_database(database: dict, spath: str) -> None:
        workloads, records = database.get("workloads"), database.get("records")
        if not isinstance(workloads, list) or not isinstance(records, list):
            raise ValueError(f"{spath}: the database needs the lists \"workloads\" and \"records\"")
        for i, rec in enumerate(records):
            if not (isinstance(rec, list) and len(rec) == 2 and isinstance(rec[0], int)
                    and 0 <= rec[0] < len(workloads)):
                raise ValueError(f"{spath}: database record {i} is not [workload index, record]")


def build_candidate(mod, target, _params):
    """The build function (``f_build``) of MetaSchedule's LocalBuilder in tclm tune, collect and
    tune-bench; it runs in the builder's worker processes. It does what TVM's default one does (drop
    the weight-layout-rewrite blocks, ``tvm.driver.build``) without first importing
    ``tvm.s_tir.tensor_intrin``. That import registers every tensor intrinsic from TVMScript and takes
    15-50 s, and LocalBuilder starts fresh workers for every batch, so with the default each batch of a
    network's many small tasks paid it again (and builds hit the 60 s timeout on a busy machine). The
    candidates are already scheduled (a tensorized block holds its intrinsic's body), so building them
    does not need the registry."""
    from tvm.driver import build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    return build(RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod), target=target)
