"""Tests of the tclm Python package's native core (no TVM needed).

The Engine tests need a trained model: the session fixture trains one with the ``tclm`` command-line
tool (tclm.cli, one epoch on data/records/k80, ~10 s) and they skip with a message when the tool is
not found (set TCLM_BIN, or build the checkout with scripts/build.sh). The other tests need only the
installed package.
"""

from __future__ import annotations

import csv
import gzip
import json
import math
from pathlib import Path

import numpy as np
import pytest

import tclm

from conftest import RECORDS, TRACE, n_steps, read_lines, record_lines  # noqa: E402,F401


# ---- constants


def test_constants():
    assert tclm.__version__ == "0.1.0"
    assert tclm.FEATURE_VERSION == 2
    assert tclm.TRACE_FEATURE_VERSION == 0x10001
    assert tclm.STEP_FEATURE_DIM == 55
    assert tclm.DEFAULT_MAX_STEPS == 72
    assert tclm.POOLED_FEATURE_DIM == 2 * tclm.STEP_FEATURE_DIM + 1
    assert tclm.feature_version_name(tclm.FEATURE_VERSION) == "Ansor step encoding v2"
    assert tclm.feature_version_name(tclm.TRACE_FEATURE_VERSION) == "MetaSchedule trace encoding v1"
    assert issubclass(tclm.TclmError, RuntimeError)


# ---- parse_trace


def test_parse_trace_kinds_and_split_factors():
    steps = tclm.parse_trace(TRACE)
    assert [k for k, _, _ in steps] == ["GetBlock", "GetLoops", "SamplePerfectTile", "Split"]
    for kind, ints, s in steps:
        assert isinstance(kind, str) and isinstance(s, str)
        assert all(isinstance(v, int) for v in ints)
    # ints = [n_inputs, n_outputs, value, value_known, in_postproc, list...]
    _, tile, _ = steps[2]
    assert tile[:2] == [1, 2] and tile[2] == 16 and tile[5:] == [32, 4]  # max_innermost_factor 16, decision
    _, split, _ = steps[3]
    assert split[:2] == [3, 2] and split[5:] == [32, 4]
    assert steps[1][1][1] == 1  # GetLoops: one loop


def test_parse_trace_get_sblock_and_unknown_instruction():
    steps = tclm.parse_trace('[[["GetSBlock", [], ["C", "main"], ["b0"]], ["MyNewInstruction", [], [], []]], []]')
    assert [k for k, _, _ in steps] == ["GetBlock", "Other"]
    assert steps[1][2] == "MyNewInstruction"


@pytest.mark.parametrize("bad", ["", "not json", "[1]", '{"i": 1}', "[[[1, 2]], []]"])
def test_parse_trace_errors(bad):
    with pytest.raises(ValueError, match="parse_trace: .+"):
        tclm.parse_trace(bad)


def test_parse_trace_rejects_non_str():
    with pytest.raises(TypeError):
        tclm.parse_trace(42)


# ---- featurize / pool_features


def test_featurize_shapes_and_mask():
    lines = record_lines(per_file=5)
    x, mask = tclm.featurize(lines)
    n = len(lines)
    assert x.shape == (n, tclm.DEFAULT_MAX_STEPS, tclm.STEP_FEATURE_DIM) and x.dtype == np.float32
    assert mask.shape == (n, tclm.DEFAULT_MAX_STEPS) and mask.dtype == np.float32
    want = np.array([min(n_steps(ln), tclm.DEFAULT_MAX_STEPS) for ln in lines], dtype=np.float32)
    np.testing.assert_array_equal(mask.sum(axis=1), want)
    assert set(np.unique(mask)) <= {0.0, 1.0}
    # padding rows are zero; every real step has its one-hot kind set
    assert not x[mask == 0].any()
    assert (x[mask == 1][:, :14].sum(axis=1) == 1).all()


def test_featurize_truncates_and_reads_traces():
    lines = record_lines(per_file=2)
    x, mask = tclm.featurize(lines + [TRACE], max_steps=4)
    assert x.shape == (len(lines) + 1, 4, tclm.STEP_FEATURE_DIM)
    np.testing.assert_array_equal(mask.sum(axis=1)[:-1], [min(n_steps(ln), 4) for ln in lines])
    assert mask[-1].sum() == 4  # the trace's four instructions
    # trace encoding: one-hot of the instruction kind in slots 0..31
    assert (x[-1][:, :32].sum(axis=1) == 1).all()
    x1, _ = tclm.featurize(lines[:1], max_steps=4)
    np.testing.assert_array_equal(x1[0], x[0])  # a program's features do not depend on the batch


def test_featurize_empty_and_errors():
    x, mask = tclm.featurize([])
    assert x.shape == (0, tclm.DEFAULT_MAX_STEPS, tclm.STEP_FEATURE_DIM) and mask.shape == (0, tclm.DEFAULT_MAX_STEPS)
    good = record_lines(per_file=1)[0]
    with pytest.raises(ValueError, match="line 1: "):
        tclm.featurize([good, "{not a record"])
    with pytest.raises(ValueError, match="line 0: "):
        tclm.featurize([""])
    with pytest.raises(ValueError, match="max_steps"):
        tclm.featurize([good], max_steps=0)


def test_pool_features():
    lines = record_lines(per_file=3)
    x, mask = tclm.featurize(lines)
    pooled = tclm.pool_features(x, mask)
    assert pooled.shape == (len(lines), tclm.POOLED_FEATURE_DIM) and pooled.dtype == np.float32
    F = tclm.STEP_FEATURE_DIM
    for i in range(len(lines)):
        real = x[i][mask[i] > 0]
        np.testing.assert_allclose(pooled[i, :F], real.mean(axis=0), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(pooled[i, F : 2 * F], real.max(axis=0))
        assert pooled[i, -1] == pytest.approx(math.log2(1 + len(real)))
    with pytest.raises(ValueError):
        tclm.pool_features(x, mask[:, :3])


# ---- select_samples


def two_blobs(n_each: int = 60, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.normal(0.0, 1.0, size=(n_each, 4))
    b = rng.normal(50.0, 1.0, size=(n_each, 4))
    return np.concatenate([a, b]).astype(np.float32)


@pytest.mark.parametrize("method", ["rdu", "random", "kcenter", "uncertainty", "balto"])
def test_select_samples_distinct_and_deterministic(method):
    pts = two_blobs()
    rng = np.random.default_rng(1)
    unc = rng.random(len(pts)).astype(np.float32)
    scores = rng.random(len(pts)).astype(np.float32)
    picks = tclm.select_samples(pts, 10, method, seed=3, uncertainty=unc, scores=scores)
    assert picks.dtype == np.int64 and picks.shape == (10,)
    assert len(set(picks.tolist())) == 10 and picks.min() >= 0 and picks.max() < len(pts)
    again = tclm.select_samples(pts, 10, method, seed=3, uncertainty=unc, scores=scores)
    np.testing.assert_array_equal(picks, again)
    if method == "uncertainty":
        np.testing.assert_array_equal(picks, np.argsort(-unc, kind="stable")[:10])


@pytest.mark.parametrize("method", ["rdu", "kcenter"])
def test_select_samples_covers_two_blobs(method):
    pts = two_blobs()
    for seed in range(3):
        picks = tclm.select_samples(pts, 2, method, seed=seed)
        assert sorted(int(p) // 60 for p in picks) == [0, 1], (method, seed, picks)


def test_select_samples_budget_selected_and_dtypes():
    pts = two_blobs().astype(np.float64)  # converted to float32
    assert tclm.select_samples(pts, 0).shape == (0,)
    assert len(tclm.select_samples(pts, 1000)) == len(pts)
    sel = np.arange(0, 120, 2)
    picks = tclm.select_samples(pts, 100, "random", selected=sel)
    assert len(picks) == 60 and not set(picks.tolist()) & set(sel.tolist())


def test_select_samples_errors():
    pts = two_blobs()
    with pytest.raises(ValueError, match="unknown sampling method"):
        tclm.select_samples(pts, 2, "nope")
    with pytest.raises(ValueError, match="uncertainty"):
        tclm.select_samples(pts, 2, "uncertainty")  # needs uncertainty
    with pytest.raises(ValueError, match="shape"):
        tclm.select_samples(pts, 2, uncertainty=np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="shape"):
        tclm.select_samples(pts[0], 2)
    with pytest.raises(ValueError, match="budget"):
        tclm.select_samples(pts, -1)
    bad = pts.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="finite"):
        tclm.select_samples(bad, 2)
    with pytest.raises(ValueError, match="selected"):
        tclm.select_samples(pts, 2, selected=[len(pts)])


# ---- Engine (needs a model trained by the tclm tool)


def test_engine_properties(engine, model):
    assert engine.feature_version == tclm.FEATURE_VERSION
    assert engine.feature_encoding == "Ansor step encoding v2"
    assert engine.model_kind == "mamba"
    assert engine.num_parameters > 0
    assert json.loads(engine.config)["n_features"] == tclm.STEP_FEATURE_DIM
    json.loads(engine.metadata)
    assert engine.path == str(model)
    assert "mamba" in repr(engine)
    assert engine.threads == 0 and engine.max_steps == tclm.DEFAULT_MAX_STEPS


def test_engine_settings(model):
    e = tclm.Engine(str(model))
    e.threads = 1
    e.max_steps = 8
    assert e.threads == 1 and e.max_steps == 8
    with pytest.raises(ValueError):
        e.threads = -1
    with pytest.raises(ValueError):
        e.max_steps = 0
    assert e.threads == 1 and e.max_steps == 8


def test_engine_load_errors(tmp_path):
    with pytest.raises(tclm.TclmError, match="nonexistent"):
        tclm.Engine(str(tmp_path / "nonexistent.tclm"))
    junk = tmp_path / "junk.tclm"
    junk.write_bytes(b"not a weights file at all")
    with pytest.raises(tclm.TclmError, match="junk.tclm"):
        tclm.Engine(str(junk))


def test_predict_lines_matches_cli(engine, model, tmp_path):
    lines = record_lines(per_file=40)
    inp = tmp_path / "lines.json"
    inp.write_text("\n".join(lines) + "\n")
    out = tmp_path / "scores.csv"
    tclm.cli(["predict", "-m", str(model), "-i", str(inp), "-o", str(out)])
    with out.open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(lines)
    cli_scores = np.full(len(lines), np.nan)
    for r in rows:
        cli_scores[int(r["line"]) - 1] = float(r["score"])
    scores = engine.predict_lines(lines)
    assert scores.dtype == np.float32 and scores.shape == (len(lines),)
    assert np.isfinite(scores).all()
    np.testing.assert_allclose(scores, cli_scores, rtol=1e-5, atol=1e-6)
    assert len(np.unique(scores)) > 10  # not a constant model


def test_predict_lines_batch_independent(engine):
    lines = record_lines(per_file=10)
    all_scores = engine.predict_lines(lines)
    one_by_one = np.array([engine.predict_lines([ln])[0] for ln in lines[::7]], dtype=np.float32)
    np.testing.assert_array_equal(all_scores[::7], one_by_one)
    x, mask = tclm.featurize(lines)
    np.testing.assert_array_equal(engine.predict_features(x, mask), all_scores)
    assert engine.predict_lines([]).shape == (0,)


def test_predict_lines_bad_lines_and_traces(engine):
    good = record_lines(per_file=1)[:2]
    lines = [good[0], "{this is not json", "", TRACE, good[1]]
    scores, errors = engine.predict_lines_with_errors(lines)
    assert scores.shape == (5,) and len(errors) == 5
    assert np.isfinite(scores[[0, 4]]).all() and errors[0] == "" and errors[4] == ""
    assert np.isnan(scores[[1, 2, 3]]).all()
    assert errors[1] and errors[2]
    assert "MetaSchedule trace" in errors[3] and "Ansor step encoding v2" in errors[3]
    plain = engine.predict_lines(lines)
    np.testing.assert_array_equal(np.isnan(plain), np.isnan(scores))
    np.testing.assert_array_equal(plain[[0, 4]], scores[[0, 4]])


def test_predict_features_errors(engine):
    with pytest.raises(ValueError):
        engine.predict_features(np.zeros((2, 4, 3), np.float32), np.zeros((2, 4), np.float32))
    with pytest.raises(ValueError):
        engine.predict_features(np.zeros((2, 4, tclm.STEP_FEATURE_DIM), np.float32), np.zeros((2, 5), np.float32))


def test_predict_max_steps_truncates(model):
    long_lines = [ln for ln in record_lines(per_file=20) if n_steps(ln) > 6][:20]
    assert long_lines
    e = tclm.Engine(str(model))
    e.max_steps = 6
    x, mask = tclm.featurize(long_lines, max_steps=6)
    np.testing.assert_array_equal(e.predict_lines(long_lines), e.predict_features(x, mask))


# ---- cli


def test_cli_errors(monkeypatch, tmp_path):
    monkeypatch.setenv("TCLM_BIN", str(tmp_path / "no-such-tclm"))
    with pytest.raises(FileNotFoundError, match="TCLM_BIN"):
        tclm.cli(["--help"])
    with pytest.raises(TypeError):
        tclm.cli("train")


def test_cli_runs_tool(model):  # the model fixture skips when there is no tool
    res = tclm.cli(["--help"])
    assert res.returncode == 0 and "train" in res.stdout
    with pytest.raises(tclm.CliError, match="nonexistent") as info:
        tclm.cli(["predict", "-m", "/nonexistent/m.tclm", "-i", str(model)])
    assert info.value.returncode == 1
    res = tclm.cli(["predict", "-m", "/nonexistent/m.tclm", "-i", str(model)], check=False)
    assert res.returncode == 1
