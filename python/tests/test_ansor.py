"""The Ansor adapter (tclm.ansor) against recorded inputs, without a TVM that has auto_scheduler.

TclmAnsorModel.predict turns each candidate state into ``MeasureInput(task, state).serialize()[0]``
(the record's "i" part) and scores ``record_line_from_input_json`` of it. Here the "i" parts come
from real records of the embedded data, so the scores must equal the engine's scores of the
original record lines exactly (the costs in "r" are never read), and be positive and in the same
order (Ansor uses them as heap keys and, clamped at 0, as selection weights). The end-to-end Ansor
run lives in test_ansor_tune.py (it needs TVM 0.19, scripts/setup-ansor.sh).
"""

import json

import numpy as np

from tclm.ansor import record_line_from_input_json, score_input_jsons, scores_from_raw

from conftest import record_lines


def test_scores_of_recorded_inputs_equal_the_records_scores(engine):
    lines = record_lines(per_file=20)
    inputs = [json.dumps(json.loads(ln)["i"]) for ln in lines]
    raw_records = engine.predict_lines(lines)
    raw_inputs = engine.predict_lines([record_line_from_input_json(i) for i in inputs])
    assert np.all(np.isfinite(raw_records))
    np.testing.assert_array_equal(raw_inputs, raw_records)
    scores = np.asarray(score_input_jsons(engine, inputs))
    assert np.all(scores > 0) and np.all(scores < 1)
    # same order as the raw scores (ties only where the raw scores tie after the logistic's rounding)
    order_raw = np.argsort(raw_records, kind="stable")
    assert np.all(np.diff(scores[order_raw]) >= 0)


def test_unreadable_inputs_rank_last():
    s = scores_from_raw(np.array([np.nan, -3.0, 0.0, 2.0, np.inf], dtype=np.float32))
    assert s[0] == s.min() and s[0] > 0
    assert list(np.argsort(s[1:4])) == [0, 1, 2]
    assert s.dtype == np.float32
