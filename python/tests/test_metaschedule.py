"""End-to-end: MetaSchedule (apache-tvm from PyPI) tunes a small matmul with tclm as its cost model.

Skipped, with the reason, when TVM or the tclm package cannot be imported. The budget is tiny (16
measured candidates): the test checks that the tuner ran with tclm's predict/update, that the
database holds real measurements, that tclm fine-tuned on them and that the best schedule builds and
computes the right result; it asserts nothing about speed.
"""

import json
import os

import numpy as np
import pytest

tvm = pytest.importorskip("tvm", reason="apache-tvm is not installed (scripts/setup-python.sh installs it)")
tclm = pytest.importorskip("tclm", reason="the tclm Python package is not installed (pip install ./python)")

from tclm.metaschedule import TclmCostModel, trace_json  # noqa: E402

try:
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.testing import te_workload
except ImportError:  # pragma: no cover - older TVM
    pytest.skip("this test targets apache-tvm 0.24+ (tvm.s_tir.meta_schedule)", allow_module_level=True)
from tvm import te  # noqa: E402
from tvm.target import Target  # noqa: E402


def _have_cli():
    try:
        return tclm.cli(["--version"], check=False).returncode == 0
    except Exception:  # noqa: BLE001
        return False


@pytest.mark.skipif(not _have_cli(), reason="the tclm command-line tool (training) is not found; set TCLM_BIN")
def test_tune_matmul_with_tclm(tmp_path):
    n = 64
    mod = te.create_prim_func(te_workload.matmul(n, n, n))
    target = Target({"kind": "llvm", "num-cores": 2})
    model = TclmCostModel(model=None, work_dir=str(tmp_path / "tclm"), min_new_records=8, max_train_share=1.0,
                          epochs=3, seed=0)
    db = ms.tune_tir(
        mod, target, str(tmp_path / "tune"), max_trials_global=16, num_trials_per_iter=8, cost_model=model,
        strategy=ms.search_strategy.EvolutionarySearch(population_size=64, init_min_unmeasured=16,
                                                       genetic_num_iters=1),
        runner=ms.runner.LocalRunner(timeout_sec=20, evaluator_config=ms.runner.EvaluatorConfig(
            number=1, repeat=1, min_repeat_ms=0)),
        builder=ms.builder.LocalBuilder(max_workers=2, timeout_sec=60), num_tuning_cores=2, seed=0)

    stats = model.stats()
    assert stats["measured"] >= 8, stats
    assert stats["predicted"] > 0, stats
    # Every candidate TVM generated was read by tclm's trace parser (none ranked last for being unreadable).
    assert stats["unreadable"] == 0, stats
    # tclm fine-tuned on what was measured (>= 8 successful measurements) and scores with that model.
    assert stats["trainings"] >= 1, (stats, model.log)
    assert model.engine is not None and model.engine.feature_encoding.startswith("MetaSchedule")

    # tclm's own database is a standard MetaSchedule database that tclm's reader reads back.
    with open(tmp_path / "tclm" / "db" / "database_tuning_record.json") as f:
        lines = [json.loads(x) for x in f if x.strip()]
    assert len(lines) == stats["measured"]
    ok = [rec for rec in lines if rec[1][1] and all(0 < s < 1e9 for s in rec[1][1])]
    assert len(ok) == stats["measured"] - stats["failed"]

    # The engine scores the candidates' traces: finite, and not all equal.
    traces = [json.dumps(rec[1][0]) for rec in lines]
    scores = model.engine.predict_lines(traces)
    assert np.all(np.isfinite(scores)) and np.ptp(scores) > 0

    # The best schedule is a valid, measured program: it builds and computes C = A @ B (te_workload.matmul).
    sch = ms.tir_integration.compile_tir(db, mod, target)
    assert sch is not None
    rt = tvm.compile(sch.mod, target=target)
    dev = tvm.cpu()
    a = np.random.default_rng(0).random((n, n), dtype=np.float32)
    b = np.random.default_rng(1).random((n, n), dtype=np.float32)
    c = np.zeros((n, n), dtype=np.float32)
    ta, tb, tc = (tvm.runtime.tensor(x, dev) for x in (a, b, c))
    rt(ta, tb, tc)
    np.testing.assert_allclose(tc.numpy(), a @ b, rtol=1e-4, atol=1e-4)
    assert trace_json(sch).startswith("[[")


def test_collect_measures_the_rdu_picks_and_resumes(tmp_path):
    from tclm.collect import main as collect_main

    out = tmp_path / "collect"
    args = ["--out", str(out), "--workloads", "matmul-128", "--pool", "12", "--budget", "0.25", "--cores", "2",
            "--timeout", "30"]
    assert collect_main(args) == 0
    report = json.loads((out / "collect.json").read_text())[0]
    # ceil(0.25 * pool) picks, all measured now; the pool has distinct traces only.
    assert report["pool"] >= 8, report
    assert report["picked"] == -(-report["pool"] // 4)
    assert report["measured"] == report["picked"] and report["already_measured"] == 0
    db = out / "matmul-128"
    with open(db / "database_tuning_record.json") as f:
        recs = [json.loads(x) for x in f if x.strip()]
    assert len(recs) == report["picked"]
    good = [r for r in recs if all(0 < s < 1e9 for s in r[1][1])]
    assert len(good) == report["picked"] - report["failed"]
    # tclm reads the database it wrote (one task, the measured programs).
    if _have_cli():
        info = json.loads(tclm.cli(["info", "-d", f"local={db}", "--json", "-"], check=True).stdout)
        assert info["platforms"][0]["programs"] == len(good) and info["platforms"][0]["tasks"] == 1, info
        assert info["skipped_lines"] == 0, info
    # A second run with the same seed finds its picks in the database: nothing is measured again.
    assert collect_main(args) == 0
    again = json.loads((out / "collect.json").read_text())[0]
    assert again["already_measured"] == report["picked"] and again["measured"] == 0


def test_cost_model_refuses_an_ansor_model(model, tmp_path):
    # The conftest model is trained on Ansor records: every trace would score NaN, so it is refused.
    with pytest.raises(ValueError, match="Ansor step encoding"):
        TclmCostModel(model=str(model), work_dir=str(tmp_path / "w"))


def _measured_candidates(n):
    """n distinct candidates of a 128^3 matmul (MetaSchedule's own design spaces, post-processed), with
    made-up run times (candidate i: (i + 1) ms; every fifth one a failed build), and their context."""
    from tclm.collect import candidate_pool
    from tclm.tune_bench import make_workload

    mod = tvm.IRModule({"main": make_workload("matmul-128")})
    target = Target({"kind": "llvm", "num-cores": 2})
    pool, _ = candidate_pool(mod, target, n, seed=0)
    assert len(pool) == n
    ctx = ms.TuneContext(mod=mod, target=target, task_name="save-load")
    cands = [ms.MeasureCandidate(s, ms.arg_info.ArgInfo.from_prim_func(s.mod["main"])) for s in pool]
    results = [ms.runner.RunnerResult(run_secs=None, error_msg="build failed") if i % 5 == 4
               else ms.runner.RunnerResult(run_secs=[(i + 1) * 1e-3], error_msg=None) for i in range(n)]
    return ctx, cands, results


def _db_records(database):
    """(workload JSON, record JSON, trace JSON) of every record of a MetaSchedule database, as text."""
    return [(str(r.workload.as_json()), str(r.as_json()), trace_json(r.as_measure_candidate().sch))
            for r in database.get_all_tuning_records()]


def test_save_load_keeps_the_measured_database(tmp_path):
    """save() writes the weights and the measured database; load() into a fresh model (another
    work_dir) gives the same database, counters and scores, and later measurements are added to it."""
    ctx, cands, results = _measured_candidates(10)
    a = TclmCostModel(model=None, work_dir=str(tmp_path / "a"), min_new_records=6, max_train_share=1.0, epochs=1,
                      seed=0)
    a.update(ctx, cands[:8], results[:8])
    assert a.stats()["measured"] == 8 and a.stats()["failed"] == 1
    if _have_cli():  # 7 successful measurements >= 6: a.update fine-tuned a first model on them
        assert a.engine is not None, a.log
    path = str(tmp_path / "saved.tclm")
    a.save(path)
    assert os.path.exists(path + ".state.json")
    assert os.path.exists(path) == (a.engine is not None)

    b = TclmCostModel(model=None, work_dir=str(tmp_path / "b"), min_new_records=6, max_train_share=1.0, epochs=1,
                      seed=1)
    b.load(path)
    # What b reads is what a wrote (both read from their db/ files: an object TVM rebuilds from JSON
    # may print differently from the one it was made from).
    saved = _db_records(ms.database.JSONDatabase(work_dir=a.db_dir))
    assert len(saved) == 8 and _db_records(b.database) == saved
    for k in ("measured", "failed", "trainings"):
        assert b.stats()[k] == a.stats()[k], k
    assert b.tuner.new_records == a.tuner.new_records and b.max_steps == a.max_steps
    if a.engine is not None:
        np.testing.assert_array_equal(b.predict(ctx, cands), a.predict(ctx, cands))
        assert np.ptp(b.predict(ctx, cands)) > 0
    # The loaded database goes on: the next measurements join the saved ones.
    b.update(ctx, cands[8:], results[8:])
    after = _db_records(b.database)
    assert len(after) == 10 and set(saved) <= set(after) and b.stats()["measured"] == 10

    # A missing or corrupt state file is refused with its name, and leaves the model as it was. (load
    # runs through TVM's FFI, which hands a FileNotFoundError on as a RuntimeError with its message.)
    c = TclmCostModel(model=None, work_dir=str(tmp_path / "c"))
    with pytest.raises((FileNotFoundError, RuntimeError), match="nothing.tclm.state.json: no saved state"):
        c.load(str(tmp_path / "nothing.tclm"))
    with open(path + ".state.json", "r+") as f:
        text = f.read()
        f.seek(0)
        f.write(text.replace('"records":[[', '"records":[["x",', 1))
    with pytest.raises(ValueError, match=r"saved\.tclm\.state\.json: database record 0"):
        c.load(path)
    assert c.stats()["measured"] == 0 and _db_records(c.database) == []
