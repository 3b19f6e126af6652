"""What both tuner adapters share (tclm._adapter.AdapterCore), without TVM: scoring with unreadable
candidates ranked last, the measurement counters, and saving / loading a model with its measured
records (the state file of TclmCostModel.save). A minimal adapter stands in for the TVM glue; its
"database" is a list of record lines, as the real adapters' databases are lists of JSON lines."""

import json
import os

import numpy as np
import pytest

import tclm
from tclm._adapter import STATE_FORMAT, AdapterCore, FineTuner, state_path

from conftest import record_lines


class LinesAdapter(AdapterCore):
    """An adapter whose candidates are Ansor record lines and whose database is a list of them."""

    FEATURE_VERSION = tclm.FEATURE_VERSION
    TUNER = "the test tuner"
    HOW_TO_TRAIN = "tclm train -d on Ansor records"
    DEFAULT_MAX_STEPS = 72

    def __init__(self, model=None, work_dir=None, max_steps=None):
        tuner = FineTuner(str(work_dir), str(work_dir), min_new_records=4) if work_dir is not None else None
        self._init_core(1, max_steps, tuner)
        if model is not None:
            self._load_engine(str(model))
        self.records = []

    def measured_lines(self, lines, ok):
        for line, good in zip(lines, ok):
            self._count_measurement(good)
            self.records.append(json.loads(line))

    def save(self, path):
        self._save_state(str(path), "lines", {"records": self.records})

    def load(self, path):
        def check(database, spath):
            if not isinstance(database.get("records"), list):
                raise ValueError(f"{spath}: no record list")

        self.records = self._load_state(str(path), "lines", check)["records"]


def _filled(model, tmp_path):
    a = LinesAdapter(model, tmp_path / "work-a", max_steps=40)
    lines = record_lines(per_file=4, max_files=3)
    a.measured_lines(lines, [i % 3 != 0 for i in range(len(lines))])
    return a, lines


def test_save_then_load_gives_the_same_database_counters_and_scores(model, tmp_path):
    a, lines = _filled(model, tmp_path)
    assert a.measured == len(lines) and a.failed == (len(lines) + 2) // 3
    assert a.tuner.new_records == a.measured - a.failed
    path = tmp_path / "saved" / "m.tclm"
    path.parent.mkdir()
    a.save(path)
    # The weights are a plain copy of the model (Engine reads them); nothing temporary is left behind.
    assert path.read_bytes() == model.read_bytes()
    assert sorted(os.listdir(path.parent)) == ["m.tclm", "m.tclm.state.json"]
    state = json.loads(open(state_path(str(path))).read())
    assert state["format"] == STATE_FORMAT and state["version"] == 1 and state["max_steps"] == 40

    b = LinesAdapter(work_dir=tmp_path / "work-b")  # a fresh object, cold, with the default max_steps
    b.load(path)
    assert b.records == a.records
    assert (b.measured, b.failed, b.tuner.new_records, b.tuner.trainings) == \
           (a.measured, a.failed, a.tuner.new_records, a.tuner.trainings)
    assert b.max_steps == 40 and b.engine.max_steps == 40 and b.model_path == str(path)
    # Same weights, same steps kept: the very same scores.
    np.testing.assert_array_equal(b._raw_scores(lines), a._raw_scores(lines))


def test_cold_start_saves_the_database_only(tmp_path):
    a = LinesAdapter(work_dir=tmp_path / "w")
    a.measured_lines(record_lines(per_file=2, max_files=1), [True, False])
    path = tmp_path / "cold.tclm"
    a.save(path)
    assert not path.exists() and os.path.exists(state_path(str(path)))
    b = LinesAdapter(work_dir=tmp_path / "w2")
    b.load(path)
    assert b.engine is None and b.model_path is None and b.records == a.records
    assert (b.measured, b.failed, b.tuner.new_records) == (2, 1, 1)


def test_missing_or_corrupt_files_are_refused_with_their_name(model, tmp_path):
    a, _ = _filled(model, tmp_path)
    path = tmp_path / "m.tclm"
    spath = state_path(str(path))
    fresh = LinesAdapter()
    with pytest.raises(FileNotFoundError, match="m.tclm.state.json: no saved state"):
        fresh.load(path)
    a.save(path)
    good_state = open(spath, "rb").read()

    with open(spath, "wb") as f:  # cut short, as a crash while writing would without the rename
        f.write(good_state[: len(good_state) // 2])
    with pytest.raises(ValueError, match=r"m\.tclm\.state\.json: not a tclm cost-model state file"):
        fresh.load(path)
    with open(spath, "w") as f:
        json.dump({"format": "something else"}, f)
    with pytest.raises(ValueError, match="not a tclm cost-model state file"):
        fresh.load(path)
    with open(spath, "w") as f:
        json.dump({**json.loads(good_state), "adapter": "metaschedule"}, f)
    with pytest.raises(ValueError, match="saved by the 'metaschedule' adapter"):
        fresh.load(path)
    with open(spath, "w") as f:
        json.dump({**json.loads(good_state), "database": {"records": "x"}}, f)
    with pytest.raises(ValueError, match="no record list"):
        fresh.load(path)

    with open(spath, "wb") as f:
        f.write(good_state)
    with open(path, "ab") as f:  # other weights than the saved ones
        f.write(b"\0")
    with pytest.raises(ValueError, match="SHA-256 differs"):
        fresh.load(path)
    os.unlink(path)
    with pytest.raises(FileNotFoundError, match="m.tclm: the weights file"):
        fresh.load(path)
    # A refused load changed nothing.
    assert fresh.engine is None and fresh.records == [] and fresh.measured == 0 and fresh.max_steps is None


def test_unreadable_candidates_rank_last_and_are_counted(engine, model, capsys):
    a = LinesAdapter(model)
    lines = record_lines(per_file=3, max_files=2)
    raw = a._raw_scores(lines + ["not a record"])
    assert raw.dtype == np.float64 and np.all(np.isfinite(raw))
    assert raw[-1] < raw[:-1].min()
    assert a.unreadable == 1 and a.predicted == len(lines) + 1
    assert "1 of" in capsys.readouterr().err
    np.testing.assert_array_equal(raw[:-1], engine.predict_lines(lines).astype(np.float64))


def test_a_model_of_the_other_encoding_is_refused(tmp_path, model):
    class TraceAdapter(LinesAdapter):
        FEATURE_VERSION = tclm.TRACE_FEATURE_VERSION

    with pytest.raises(ValueError, match="the test tuner needs one trained on"):
        TraceAdapter(model)
