"""End-to-end: `tclm tune` (tclm._tune_ansor) tunes the 3-task `tiny` network with Ansor's task scheduler
and the conftest tclm model, compiles it with the best schedules and measures it; a rerun resumes; and
`tclm tune-bench --network` (tclm._network_bench) compares two cost models on it.

Runs in the venv of scripts/setup-ansor.sh (TVM 0.19 with auto_scheduler); skipped, with the reason,
anywhere else. Few trials and small search settings: this checks the plumbing (logs, curves, resume,
compiled network correct, reports), not tuning quality.
"""

import csv
import json
import math
import os
import statistics
import signal
import sys

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
auto_scheduler = pytest.importorskip("tvm.auto_scheduler", reason="this TVM has no auto_scheduler (needs <= 0.19)")

from tclm import _network_bench, _tune_ansor, tune_bench  # noqa: E402
from tclm.networks import relay_network  # noqa: E402

#: Small, fast search and measurement settings for every run here.
FAST = ["--population", "32", "--search-param", "evolutionary_search_num_iters=1",
        "--search-param", "sample_init_min_population=8", "--min-repeat-ms", "5", "--latency-repeat", "3",
        "--latency-min-repeat-ms", "20", "--cores", "2", "--mcpu", "generic", "--train-epochs", "5"]


@pytest.fixture(autouse=True)
def _threads(monkeypatch):
    # What main() sets by default (setdefault); keeps it out of the other tests in this process.
    monkeypatch.setenv("TVM_NUM_THREADS", "2")


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_tune_tiny_network_end_to_end_and_resume(model, tmp_path):
    out = tmp_path / "tune"
    base = ["--network", "tiny", "--model", str(model), "--out", str(out), "--per-round", "3",
            "--min-new-records", "3"] + FAST
    # First run: 9 trials, tuning only.
    assert _tune_ansor.main(base + ["--trials", "9", "--no-compile"]) == 0
    log = out / "tuning.json"
    first = list(auto_scheduler.load_records(str(log)))
    assert 9 <= len(first) < 12
    assert not (out / "latency.json").exists()
    # A second run continues the same log up to 12 trials, then compiles, measures and verifies.
    assert _tune_ansor.main(base + ["--trials", "12", "--verify"]) == 0
    records = list(auto_scheduler.load_records(str(log)))
    assert len(records) >= 12 and [str(i.state) for i, _ in records[:len(first)]] == \
        [str(i.state) for i, _ in first]
    summary = json.loads((out / "tune.json").read_text())
    assert summary["network"] == "tiny" and len(summary["tasks"]) == 3 and summary["cost_model"] == "tclm"
    assert summary["trials"] == len(records) and len(summary["runs"]) == 2
    assert summary["machine"]["tvm_version"] == tvm.__version__ and summary["machine"]["cpu_cores"] >= 1
    s1, s2 = summary["runs"]
    assert s1["trials_before"] == 0 and s2["trials_before"] == len(first) and s2["trials_after"] == len(records)
    for s in (s1, s2):
        assert s["measure_build_seconds"] > 0 and s["measure_run_seconds"] > 0 and s["tune_seconds"] > 0
        assert s["tclm_unreadable"] == 0 and s["ended"] == "finished"
        # 3 a round: Ansor's eps_greedy (0.05) would measure no random program; one of the 3 is random.
        assert int(s["search_params"]["eps_greedy"] * s["per_round"]) == 1
        # What tclm set (FAST's two and these), not the defaults SketchPolicy fills in.
        assert set(s["search_params"]) == {"eps_greedy", "evolutionary_search_population",
                                           "evolutionary_search_num_iters", "sample_init_min_population"}
    # Fine-tuned online (every 3 new measurements), the second run from the first one's last model.
    assert s1["tclm_trainings"] >= 1 and s2["start_model"].endswith(f"model-{s1['tclm_trainings']}/best.tclm")
    # The log's best per task gives the final estimate. (Some candidates of tiny's dense task fail to
    # build in TVM 0.19, layout rewrite: a few trials may find no valid one for it.)
    best = _tune_ansor.best_by_task(str(log), _tasks(summary))
    assert sum(b is not None for b in best) >= 2 and all(b is None or b > 0 for b in best)
    curve = read_csv(out / "curve.csv")
    trials = [int(r["trials"]) for r in curve]
    assert trials == sorted(trials) and trials[-1] == len(records)
    assert [int(r["round"]) for r in curve] == list(range(1, len(curve) + 1))
    walls = [float(r["wall_seconds"]) for r in curve]
    assert walls == sorted(walls)
    est = [float(r["estimated_ms"]) for r in curve if r["estimated_ms"]]
    # Non-increasing up to the CSV's 6 significant digits: the resumed run re-reads the latencies from
    # the log, whose numbers differ from the first run's in the last digits.
    assert all(b <= a * (1 + 1e-5) for a, b in zip(est, est[1:])), est
    # The curve starts once every task has a measurement or was given up (none here: 4 rounds at most).
    assert all(r["tasks_given_up"] == "0" for r in curve)
    assert all(bool(r["estimated_ms"]) == (int(r["tasks_with_schedule"]) == 3) for r in curve)
    weights = [t["weight"] for t in summary["tasks"]]
    if all(b is not None for b in best):
        assert est[-1] == pytest.approx(sum(w * b for w, b in zip(weights, best)) * 1e3, rel=1e-4)
    lat = json.loads((out / "latency.json").read_text())
    for k in ("mean_ms", "std_ms", "min_ms", "median_ms"):
        assert math.isfinite(lat[k]) and lat[k] >= 0, (k, lat)
    assert lat["mean_ms"] > 0 and lat["min_ms"] > 0 and len(lat["repeats_ms"]) == 3
    assert lat["trials"] == len(records)
    assert lat["tasks_without_schedule"] == [k for k, b in enumerate(best) if b is None]
    assert lat["verify"]["ok"], lat["verify"]

    # The compiled network computes what the default-schedule build computes.
    net = relay_network("tiny")
    target = tvm.target.Target(lat["settings"]["target"])
    inputs = _tune_ansor.random_inputs(net, seed=3)
    _, tuned = _tune_ansor.run_network(_tune_ansor.compile_network(net, target, str(log)), inputs)
    _, plain = _tune_ansor.run_network(_tune_ansor.compile_network(net, target, None), inputs)
    assert len(tuned) == len(plain) == 1 and tuned[0].shape == (1, 10)
    np.testing.assert_allclose(tuned[0], plain[0], rtol=1e-4, atol=1e-5)

    # Rerunning the same command adds no trials and does not compile or measure again.
    stamp = (out / "latency.json").stat().st_mtime_ns
    assert _tune_ansor.main(base + ["--trials", "12", "--verify"]) == 0
    assert len(list(auto_scheduler.load_records(str(log)))) == len(records)
    assert (out / "latency.json").stat().st_mtime_ns == stamp
    again = json.loads((out / "tune.json").read_text())
    assert len(again["runs"]) == 2 and len(read_csv(out / "curve.csv")) == len(curve)
    # Another cost model into the same --out is refused.
    with pytest.raises(SystemExit):
        _tune_ansor.main(["--network", "tiny", "--cost-model", "random", "--out", str(out), "--trials", "12"] + FAST)


def test_compiling_a_network_never_asks_tophub(monkeypatch):
    """A process that compiles a tuned network without having extracted its tasks first (tune-bench's
    latency batch) must not fetch TopHub's AutoTVM configurations: offline it would retry the download,
    and online it could build the untuned operators unlike the run's own compile."""
    from tvm.autotvm import tophub

    monkeypatch.setenv("TOPHUB_LOCATION", "unset below")    # so that the test's end restores the user's value
    monkeypatch.delenv("TOPHUB_LOCATION")
    asked = []
    monkeypatch.setattr(tophub, "check_backend", lambda location, backend: asked.append(backend) or False)
    net = relay_network("tiny")
    _tune_ansor.compile_network(net, tvm.target.Target("llvm"), None)
    assert asked == []
    assert os.environ["TOPHUB_LOCATION"] == "NONE"


@pytest.mark.parametrize("per_round, overrides, random_per_round", [
    (8, [], 1),     # int(0.05 x 8) = 0 random programs with Ansor's eps_greedy: raised to one
    (3, [], 1),
    (19, [], 1),    # the largest round where 0.05 x per_round < 1
    (20, [], 1),    # 0.05 x 20 = 1: Ansor's own value already measures one
    (64, [], 3),    # Ansor's own default setting (0.05 x 64) is left as it is
    (8, ["eps_greedy=0"], 0),    # a user's setting wins
    (8, ["eps_greedy=0.5"], 4),
])
def test_every_round_measures_a_random_program_unless_told_otherwise(per_round, overrides, random_per_round):
    params = _tune_ansor.search_params(512, per_round, overrides)
    assert params["evolutionary_search_population"] == 512
    assert int(params["eps_greedy"] * per_round) == random_per_round
    assert all(type(v) is type(auto_scheduler.SketchPolicy.DEFAULT_PARAMS[k]) for k, v in params.items())


def _tasks(summary):
    """Stand-ins for the tasks in best_by_task: only their workload keys are read."""
    class T:
        def __init__(self, key):
            self.workload_key = key
    return [T(t["workload_key"]) for t in summary["tasks"]]


@pytest.mark.parametrize("args, message", [
    (["--network", "no-such-net", "--cost-model", "random"], "unknown network 'no-such-net'"),
    (["--network", "tiny"], "--cost-model tclm needs --model"),
    (["--network", "tiny", "--model", "/nonexistent/m.tclm"], "does not exist"),
    (["--network", "tiny", "--cost-model", "xgb-pre"], "needs --pretrain-records"),
    (["--network", "tiny", "--cost-model", "random", "--input", "data:1x8"], "--input goes with --onnx"),
    (["--onnx", "/nonexistent/m.onnx", "--cost-model", "random"], "does not exist"),
    (["--network", "tiny", "--cost-model", "random", "--search-param", "nope=1"], "unknown SketchPolicy parameter"),
])
def test_tune_refuses_bad_input(args, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        _tune_ansor.main(args + ["--out", str(tmp_path / "o")])
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_tune_refuses_bad_input_spec(tmp_path, capsys):
    onnx_file = tmp_path / "m.onnx"
    onnx_file.write_bytes(b"not read: the spec is refused first")
    with pytest.raises(SystemExit):
        _tune_ansor.main(["--onnx", str(onnx_file), "--input", "data=1x3x224x224", "--cost-model", "random",
                          "--out", str(tmp_path / "o")])
    assert "expected NAME:SHAPE" in capsys.readouterr().err


def test_tune_bench_network_two_models(tmp_path, capsys):
    pytest.importorskip("xgboost", reason="Ansor's XGBModel needs xgboost (python/requirements-ansor.txt)")
    out = tmp_path / "bench"
    args = ["--scheduler", "ansor", "--network", "tiny", "--models", "xgb,random", "--seeds", "1", "--trials", "9",
            "--out", str(out), "--per-round", "3"] + FAST
    assert tune_bench.main(args) == 0
    curves = read_csv(out / "curves.csv")
    assert {r["model"] for r in curves} == {"xgb", "random"}
    complete = {}
    for m in ("xgb", "random"):
        rows = [r for r in curves if r["model"] == m]
        lat = json.loads((out / "runs" / f"tiny-{m}-s0" / "latency.json").read_text())
        assert int(rows[-1]["trials"]) >= 9 and lat["trials"] == int(rows[-1]["trials"])
        # The estimate exists once every task has a schedule or was given up (no candidate ran).
        complete[m] = not lat["tasks_without_schedule"]
        last = rows[-1]
        assert bool(last["estimated_ms"]) == (int(last["tasks_with_schedule"]) + int(last["tasks_given_up"]) == 3)
        assert complete[m] == (int(last["tasks_with_schedule"]) == 3), (m, rows, lat)
    summary = {r["model"]: r for r in read_csv(out / "summary.csv")}
    assert set(summary) == {"xgb", "random"}
    assert summary["xgb"]["trials_to_xgb_pre"] == "-"  # no xgb-pre run
    # Once both runs are finished, their networks are measured again in one batch of 3 rounds (the
    # default), the runs interleaved: every run's round 1 before any round 2. The measured column is
    # each run's median.
    latency = read_csv(out / "latency.csv")
    assert [(r["batch"], r["round"], r["model"]) for r in latency] == [
        ("1", "1", "random"), ("1", "1", "xgb"), ("1", "2", "xgb"), ("1", "2", "random"), ("1", "3", "random"),
        ("1", "3", "xgb")]
    for m, r in summary.items():
        lat = json.loads((out / "runs" / f"tiny-{m}-s0" / "latency.json").read_text())
        mine = [float(x["mean_ms"]) for x in latency if x["model"] == m]
        assert all(x["trials"] == str(lat["trials"]) for x in latency if x["model"] == m)
        assert all(float(x["min_ms"]) <= float(x["mean_ms"]) for x in latency)
        assert float(r["measured_ms"]) == pytest.approx(statistics.median(mine), rel=1e-3)
    if complete["xgb"]:
        # xgb's own curve reaches its final estimate: at its last trial at the latest, a ratio of 1.
        assert summary["xgb"]["trials_to_xgb"].isdigit() and summary["xgb"]["x_trials_vs_xgb"] == "1.00"
        assert float(summary["xgb"]["final_estimated_ms"]) > 0
    md = (out / "summary.md").read_text()
    assert "| xgb |" in md and "| random |" in md and "TVM " + tvm.__version__ in md and "tiny (3 tasks)" in md
    # Where each run's time went: its tune.json's figures, one row per run, none of them died.
    times = {r["model"]: r for r in read_csv(out / "time.csv")}
    assert set(times) == {"xgb", "random"} and "where the tuning time went" in md
    for m, r in times.items():
        t = json.loads((out / "runs" / f"tiny-{m}-s0" / "tune.json").read_text())["time"]
        assert int(r["tune_seconds"]) == round(t["tune_seconds"]) > 0 and float(r["measure_build_seconds"]) > 0
        assert r["processes"] == "1" and r["died"] == "0" and int(r["trials"]) >= 9
    try:
        import matplotlib  # noqa: F401
        assert (out / "curves.png").stat().st_size > 0
    except ImportError:
        assert not (out / "curves.png").exists()
    assert "measured latency per run" in md and "(at least 3 rounds, the runs interleaved" in md
    # A rerun finds both runs finished and their rounds measured: it tunes and measures nothing. One
    # more round measures that round only.
    capsys.readouterr()
    assert tune_bench.main(args) == 0
    err = capsys.readouterr().err
    assert err.count("done earlier") == 2 and "latency batch" not in err
    assert read_csv(out / "latency.csv") == latency
    assert tune_bench.main(args + ["--latency-rounds", "4"]) == 0
    again = read_csv(out / "latency.csv")
    assert again[:6] == latency and [(r["round"], r["model"]) for r in again[6:]] == [("4", "xgb"), ("4", "random")]
    # Fewer rounds asked for later, or one of the runs alone: nothing is measured, nothing dropped.
    assert tune_bench.main(args + ["--latency-rounds", "2"]) == 0
    assert read_csv(out / "latency.csv") == again
    summary = {r["model"]: r for r in read_csv(out / "summary.csv")}
    for m in ("xgb", "random"):
        mine = [float(x["mean_ms"]) for x in again if x["model"] == m]
        assert float(summary[m]["measured_ms"]) == pytest.approx(statistics.median(mine), rel=1e-3)
    assert tune_bench.main([x if x != "xgb,random" else "xgb" for x in args]) == 0
    assert read_csv(out / "latency.csv") == again
    assert "--latency-rounds must not be negative" in _refused(["--scheduler", "ansor", "--network", "tiny",
                                                                "--latency-rounds", "-1"], capsys)
    # Network tuning is Ansor's; an unknown model is refused.
    with pytest.raises(SystemExit):
        _network_bench.main(["--network", "tiny", "--models", "xgb", "--out", str(tmp_path / "x")])
    with pytest.raises(SystemExit):
        _network_bench.main(["--scheduler", "ansor", "--network", "tiny", "--models", "nope",
                             "--out", str(tmp_path / "x")])


def test_tune_bench_network_seeds_per_model(tmp_path, monkeypatch, capsys):
    """MODEL:N gives that model its own number of seeds; seed 0 of every model runs first, so that a
    benchmark stopped part-way still compares every model. The runs themselves are recorded, not tuned."""
    calls = []

    def fake_tune(args, resumes, name):
        assert args[:2] == ["--scheduler", "ansor"] and resumes == 10  # the default --resume-after-crash
        calls.append((args[args.index("--cost-model") + 1], int(args[args.index("--seed") + 1])))
        return 0

    monkeypatch.setattr(_network_bench, "run_tune", fake_tune)
    assert _network_bench.main(["--scheduler", "ansor", "--network", "tiny", "--models", "xgb,random:1",
                                "--seeds", "3", "--trials", "9", "--out", str(tmp_path / "b")]) == 0
    assert calls == [("xgb", 0), ("random", 0), ("xgb", 1), ("xgb", 2)]
    assert "seeds: xgb 3, random 1" in (tmp_path / "b" / "summary.md").read_text()
    for bad in ("xgb:0", "xgb:two", "xgb,xgb:2"):
        with pytest.raises(SystemExit):
            _network_bench.main(["--scheduler", "ansor", "--network", "tiny", "--models", bad,
                                 "--out", str(tmp_path / "x")])
        assert "--models" in capsys.readouterr().err


def test_a_run_that_aborts_is_resumed_and_one_that_keeps_aborting_stops(tmp_path, capsys):
    # The child stands for `tclm tune`: it aborts (SIGABRT, as TVM's assertions do) the first `n` times it
    # starts, counting its starts in a file, then exits 0. A plain error (exit 1) is returned at once.
    count = tmp_path / "starts"
    child = [sys.executable, "-c",
             "import os, sys; p, n = sys.argv[1], int(sys.argv[2]); "
             "k = int(open(p).read()) + 1 if os.path.exists(p) else 1; open(p, 'w').write(str(k)); "
             "os.abort() if k <= n else sys.exit(0 if n >= 0 else 1)"]
    assert _network_bench.run_tune([str(count), "2"], 3, "r", command=child) == 0
    assert count.read_text() == "3" and "died of SIGABRT; resuming it from its log (2 of 3)" in capsys.readouterr().err
    count.unlink()
    assert _network_bench.run_tune([str(count), "9"], 1, "r", command=child) == 128 + signal.SIGABRT
    assert count.read_text() == "2" and "died of SIGABRT 2 times; stopping" in capsys.readouterr().err
    count.unlink()
    assert _network_bench.run_tune([str(count), "-1"], 3, "r", command=child) == 1
    assert count.read_text() == "1"


def test_a_run_killed_inside_tvm_keeps_its_time_in_tune_json(tmp_path):
    # `tclm tune` as its own process, killed (SIGKILL: nothing of it runs after) once it has finished
    # two rounds: tune.json must still hold that run with its trials and time up to its last round;
    # every later process adds its own entry, and "time" is the sum of them all.
    import os
    import subprocess
    import time

    out = tmp_path / "tune"
    cmd = [sys.executable, "-m", "tclm.tune", "--scheduler", "ansor", "--network", "tiny", "--cost-model", "random",
           "--per-round", "3", "--trials", "30", "--no-compile", "--out", str(out)] + FAST

    def entries():
        try:
            return json.loads((out / "tune.json").read_text()).get("runs") or []
        except (OSError, ValueError):  # not written yet (it is replaced atomically, never half-written)
            return []

    def kill_when(ready, why):
        child = subprocess.Popen(cmd, env={**os.environ, "TVM_NUM_THREADS": "2"})
        try:
            deadline = time.time() + 600
            while not ready(entries()):
                assert child.poll() is None and time.time() < deadline, why
                time.sleep(0.05)
            child.kill()
        finally:
            child.wait()

    kill_when(lambda runs: runs and runs[-1]["trials_after"] >= 6, "tclm tune ended before its second round")
    (died,) = entries()
    curve = read_csv(out / "curve.csv")
    records = list(auto_scheduler.load_records(str(out / "tuning.json")))
    # The entry of the last round finished before the kill (the second, or a later one).
    assert died["ended"] == "died" and died["trials_before"] == 0
    assert 6 <= died["trials_after"] <= len(records) and died["trials_after"] in [int(r["trials"]) for r in curve]
    assert died["measure_build_seconds"] > 0 and died["measure_run_seconds"] > 0
    assert died["tune_seconds"] >= died["measure_build_seconds"] + died["measure_run_seconds"]

    # A second process killed as soon as it has started tuning, likely before its first round ends:
    # it has its entry all the same, so a benchmark counts every process that died.
    kill_when(lambda runs: len(runs) == 2, "tclm tune ended before it started tuning")
    first, second = entries()
    assert first == died and second["ended"] == "died" and second["trials_before"] == len(records)

    assert subprocess.run(cmd, env={**os.environ, "TVM_NUM_THREADS": "2"}).returncode == 0
    summary = json.loads((out / "tune.json").read_text())
    assert summary["runs"][:2] == [first, second] and len(summary["runs"]) == 3
    third = summary["runs"][2]
    assert third["ended"] == "finished" and third["trials_after"] == summary["trials"] >= 30
    for key in ("tune_seconds", "measure_build_seconds"):
        assert summary["time"][key] == pytest.approx(sum(r[key] for r in summary["runs"]))


def _refused(args, capsys):
    with pytest.raises(SystemExit):
        _network_bench.main(args)
    return capsys.readouterr().err


def test_measured_latency_is_each_runs_median_of_its_rounds(tmp_path):
    """Per run the median of its interleaved rounds, per model the mean over seeds ± the std over
    seeds; a one-seed model's spread is the std over its rounds; a run without rounds keeps its own
    measurement (latency.json)."""
    def run(name, own_ms):
        d = tmp_path / name
        d.mkdir()
        (d / "curve.csv").write_text("round,trials,wall_seconds,estimated_ms\n1,10,100,30\n")
        (d / "latency.json").write_text(json.dumps({"trials": 10, "mean_ms": own_ms, "std_ms": 0.5}))
        return str(d)

    runs = {("n", "xgb", 0): run("x0", 99.0), ("n", "xgb", 1): run("x1", 99.0), ("n", "tclm", 0): run("t0", 99.0),
            ("n", "random", 0): run("r0", 40.0)}
    rounds = {("n", "xgb", 0): [20.0, 30.0, 22.0], ("n", "xgb", 1): [24.0], ("n", "tclm", 0): [10.0, 12.0]}
    rows = {r["model"]: r for r in _network_bench.summarize(runs, ["tclm", "xgb", "random"], rounds)}
    assert rows["xgb"]["measured_ms"] == "23" and rows["xgb"]["measured_spread_ms"] == "1.4"  # medians 22, 24
    assert rows["tclm"]["measured_ms"] == "11" and rows["tclm"]["measured_spread_ms"] == "1.4"  # std(10, 12)
    assert rows["random"]["measured_ms"] == "40" and rows["random"]["measured_spread_ms"] == "0.5"
    md = _network_bench.latency_markdown(runs, rounds)
    assert "| xgb | 0 | 99.00 | 20.00 | 30.00 | 22.00 | 22.00 |" in md and "| random | 0 | 40.00 | - | - | - | - |" in md


def test_latency_batches_report_runs_measured_side_by_side():
    """The runs compared are reported from the latest batch that measured them all, topped up to the
    rounds asked for; a run no batch holds with the others (a model added later) means a new batch of
    them all, interleaved, never old rounds of some runs beside new rounds of another."""
    x, t, r = ("n", "xgb", 0), ("n", "tclm", 0), ("n", "random", 0)

    def rows(batch, runs, rounds):
        return [{"network": "n", "model": k[1], "seed": str(k[2]), "batch": str(batch), "round": str(i)}
                for i in rounds for k in runs]

    old = rows(1, [x, t], [1, 2, 3])
    assert _network_bench.plan_latency(old, [x, t], 3) == (1, [])
    assert _network_bench.plan_latency(old, [x], 2) == (1, [])
    # Round 4 starts from the second run (round r from the r-th, cyclically).
    assert _network_bench.plan_latency(old, [t, x], 4) == (1, [(4, x), (4, t)])
    assert _network_bench.plan_latency(old, [x, t, r], 2) == (2, [(1, r), (1, t), (1, x), (2, t), (2, x), (2, r)])
    # A later batch with them all is the one reported, and resumed where it stopped.
    both = old + rows(2, [x, t, r], [1]) + rows(2, [r], [2])
    assert _network_bench.plan_latency(both, [x, t, r], 2) == (2, [(2, t), (2, x)])
    assert _network_bench.plan_latency(both, [x, t], 3) == (2, [(2, x), (2, t), (3, t), (3, x)])
    assert _network_bench.plan_latency([], [x], 1) == (1, [(1, x)])


def test_a_latency_file_of_other_columns_is_refused_and_kept(tmp_path):
    bad = tmp_path / "latency.csv"
    bad.write_text("network,model,seed,round,mean_ms\nn,xgb,0,1,20\n")
    with pytest.raises(SystemExit, match="latency.csv: columns .* move the file away"):
        _network_bench.measure_latency_rounds({("n", "xgb", 0): str(tmp_path)}, [], 3, str(bad))
    assert bad.read_text() == "network,model,seed,round,mean_ms\nn,xgb,0,1,20\n"


def test_summary_pairs_each_run_with_the_xgb_run_of_its_seed(tmp_path):
    """Two xgb seeds with different finals: each is reached by its own run at its last round (ratio
    1), a tclm seed is measured against the xgb run of its seed, and a one-seed model against seed 0.
    (A median of the two xgb finals would be reached by one xgb run only: no figure at all.)"""
    def run(name, rows):  # rows: (trials, seconds, estimated ms or None)
        d = tmp_path / name
        d.mkdir()
        with open(d / "curve.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["round", "trials", "wall_seconds", "estimated_ms"])
            for i, (t, sec, est) in enumerate(rows):
                w.writerow([i + 1, t, sec, "" if est is None else est])
        return str(d)

    runs = {("n", "xgb", 0): run("x0", [(10, 100, None), (20, 200, 30.0), (40, 400, 20.0)]),
            ("n", "xgb", 1): run("x1", [(10, 100, None), (20, 200, 40.0), (40, 400, 30.0)]),
            ("n", "tclm", 0): run("t0", [(10, 50, None), (20, 100, 19.0), (40, 200, 15.0)]),  # 20 by trial 20
            ("n", "tclm", 1): run("t1", [(10, 50, None), (20, 100, 35.0), (40, 200, 25.0)]),  # 30 by trial 40
            ("n", "random", 0): run("r0", [(10, 80, None), (20, 160, 50.0), (40, 320, 45.0)])}
    rows = {r["model"]: r for r in _network_bench.summarize(runs, ["tclm", "xgb", "random"])}
    assert rows["xgb"]["trials_to_xgb"] == "40" and rows["xgb"]["x_trials_vs_xgb"] == "1.00"
    # tclm: seed 0 reaches 20 at trial 20 (2x), seed 1 reaches 30 at trial 40 (1x): median 30 trials, 1.5x.
    assert rows["tclm"]["trials_to_xgb"] == "30" and rows["tclm"]["x_trials_vs_xgb"] == "1.50"
    assert rows["tclm"]["seconds_to_xgb"] == "150" and rows["tclm"]["x_time_vs_xgb"] == "3.00"
    assert rows["random"]["trials_to_xgb"] == "-" and rows["random"]["x_trials_vs_xgb"] == "-"
    assert rows["tclm"]["trials_to_xgb_pre"] == "-"  # no xgb-pre run


def test_xgb_pre_pretrains_on_another_networks_collection(tmp_path, monkeypatch, capsys):
    """xgb-pre on a `tclm collect --scheduler ansor` collection of another network: the collection's
    networks (provenance.json) are extracted, so that every record is featurized and the successful
    ones trained on; records without a collection are only usable for the tuned network's tasks."""
    pytest.importorskip("xgboost", reason="Ansor's XGBModel needs xgboost (python/requirements-ansor.txt)")
    from tvm.auto_scheduler.workload_registry import WORKLOAD_FUNC_REGISTRY

    from tclm import collect

    coll = tmp_path / "collect"
    assert collect.main(["--scheduler", "ansor", "--networks", "tiny", "--pool", "8", "--budget", "0.25",
                         "--cores", "2", "--out", str(coll)]) == 0
    report = json.loads((coll / "collect.json").read_text())
    picked, measured = report["totals"]["picked"], report["totals"]["measured"]
    assert measured >= 1
    keys = {i.task.workload_key for f in (coll / "records").iterdir() for i, _ in auto_scheduler.load_records(str(f))}

    def forget():
        """As in a fresh process: the collection's workloads are not registered."""
        for k in keys:
            for name in (k, json.loads(k)[0]):
                if name in WORKLOAD_FUNC_REGISTRY:
                    monkeypatch.delitem(WORKLOAD_FUNC_REGISTRY, name)
        assert not any(_tune_ansor.known_workload(k) for k in keys)

    # Another network: tiny with batch 2 (other shapes: none of its tasks is in the collection).
    forget()
    out = tmp_path / "tune"
    capsys.readouterr()
    assert _tune_ansor.main(["--network", "tiny", "--batch", "2", "--cost-model", "xgb-pre", "--pretrain-records",
                             str(coll / "records"), "--out", str(out), "--trials", "3", "--per-round", "1",
                             "--no-compile"] + FAST) == 0
    err = capsys.readouterr().err
    summary = json.loads((out / "tune.json").read_text())
    assert not keys & {t["workload_key"] for t in summary["tasks"]}
    (s,) = summary["runs"]
    assert (s["pretrain_files"], s["pretrain_records"], s["pretrain_records_usable"]) == (3, picked, picked), s
    assert s["pretrain_records_unmatched"] == 0 and s["pretrain_unmatched_reasons"] == {}
    (c,) = s["pretrain_collections"]
    assert c["extracted"] == {"tiny": 3} and c["failed"] == {} and c["cores"] == 2
    assert c["target"] == json.loads((coll / "provenance.json").read_text())["target"]
    # XGBModel featurized every record and trained on the successful ones (failures weigh nothing).
    assert s["pretrain_records_trained"] == measured and s["pretrain_records_without_features"] == 0
    assert s["pretrain_records_failed_measurement"] == picked - measured
    assert s["pretrain_tasks_trained"] == sum(1 for t in report["tasks"] if t["measured"])
    assert f"XGBModel trained on {measured} successfully measured records" in err
    assert summary["trials"] >= 3

    # The collection's OUT works too (its reports and its pool/ of unmeasured candidates are not read as
    # records), and a record file of it.
    for path in (coll, sorted((coll / "records").iterdir())[0]):
        forget()
        inputs, _, info = _tune_ansor.pretrain_records(str(path))
        assert info["pretrain_records_unmatched"] == 0 and len(inputs) == info["pretrain_records"] >= 1, info
        assert info["pretrain_files"] == (3 if path == coll else 1)
    assert len(list((coll / "pool").iterdir())) == 3
    # Records without a collection: only the tuned network's tasks' records could be used; said.
    loose = tmp_path / "loose"
    loose.mkdir()
    for f in (coll / "records").iterdir():
        (loose / f.name).write_text(f.read_text())
    forget()
    capsys.readouterr()
    inputs, _, info = _tune_ansor.pretrain_records(str(loose))
    _tune_ansor._say_pretrain(info)
    assert inputs == [] and info["pretrain_unmatched_reasons"] == {"not_from_a_collection": picked}
    assert "only the network's own tasks' records can be used" in capsys.readouterr().err
