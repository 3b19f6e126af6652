"""End-to-end: ``tclm tune --scheduler metaschedule`` (tclm._tune_ms) tunes the ``tiny`` Relax network
(4 tasks) with MetaSchedule, compiles it with the best schedules and measures its latency.

One module-scoped run with random scores makes a MetaSchedule database, and ``tclm train`` makes a
trace-encoding model from it (the conftest model is an Ansor one, which MetaSchedule refuses). The
tclm run continues a copy of that database with the model, so that the test also covers a resumed
run: the candidates already in the database are not measured again, and a rerun of the finished
command measures and compiles nothing. Budgets are tiny (13 + 8 measurements); the test asserts
nothing about speed. Skipped, with the reason, without apache-tvm's MetaSchedule or the tclm tool.
"""

import csv
import json
import math
import os
import shutil

import numpy as np
import pytest

tvm = pytest.importorskip("tvm", reason="apache-tvm is not installed (scripts/setup-python.sh installs it)")
tclm = pytest.importorskip("tclm", reason="the tclm Python package is not installed (pip install ./python)")
try:
    from tvm.s_tir import meta_schedule as ms
except ImportError:  # pragma: no cover - older TVM
    pytest.skip("this test targets apache-tvm 0.24+ (tvm.s_tir.meta_schedule)", allow_module_level=True)

from tclm import _tune_ms  # noqa: E402
from tclm.relax_networks import parse_input_spec, random_inputs, relax_network  # noqa: E402

FAST = ["--network", "tiny", "--per-iter", "4", "--population", "32", "--cores", "2", "--latency-repeat", "3",
        "--latency-min-repeat-ms", "20", "--min-repeat-ms", "20"]


def _have_cli():
    try:
        return tclm.cli(["--version"], check=False).returncode == 0
    except Exception:  # noqa: BLE001
        return False


def _records(out):
    with open(os.path.join(out, "database_tuning_record.json")) as f:
        return [json.loads(x) for x in f if x.strip()]


def _curve(out):
    with open(os.path.join(out, "curve.csv")) as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def random_run(tmp_path_factory):
    """A finished run with random scores (13 measurements: one batch per task)."""
    out = str(tmp_path_factory.mktemp("tune-random"))
    assert _tune_ms.main(FAST + ["--cost-model", "random", "--trials", "12", "--out", out]) == 0
    return out


@pytest.fixture(scope="module")
def trace_model(random_run, tmp_path_factory):
    """A tclm model of the MetaSchedule trace encoding, trained on the random run's database."""
    if not _have_cli():
        pytest.skip("the tclm command-line tool (training) is not found; set TCLM_BIN")
    out = tmp_path_factory.mktemp("trace-model")
    tclm.cli(["train", "-d", f"local={random_run}", "--test-fraction", "0", "--valid-fraction", "0", "--epochs", "2",
              "--threads", "2", "--seed", "0", "-o", str(out), "--quiet"])
    path = out / "best.tclm"
    assert path.is_file()
    assert tclm.Engine(str(path)).feature_version == tclm.TRACE_FEATURE_VERSION
    return str(path)


def _reference(x):
    """tiny's output in numpy from its weights (relax_network's seed 0)."""
    net = relax_network("tiny")
    w = net.params["conv_weight"].numpy().astype(np.float64)
    fc = net.params["fc_weight"].numpy().astype(np.float64)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    conv = np.zeros((1, 16, 16, 16))
    for dy in range(3):
        for dx in range(3):
            conv += np.einsum("nchw,oc->nohw", xp[:, :, dy:dy + 16, dx:dx + 16], w[:, :, dy, dx])
    pooled = np.maximum(conv, 0).mean(axis=(2, 3))
    return pooled @ fc.T


def test_random_run_outputs(random_run):
    recs = _records(random_run)
    assert len(recs) >= 12
    ok = [r for r in recs if r[1][1] and all(0 < s < 1e9 for s in r[1][1])]
    assert len(ok) >= len(recs) - 2, "most candidates should build and run"
    report = json.loads(open(os.path.join(random_run, "tune.json")).read())
    assert report["network"] == "tiny" and len(report["tasks"]) == 4
    assert all(t["weight"] == 1 and t["trials"] >= 1 for t in report["tasks"])
    assert report["tvm_version"] and report["cpu"]["logical_cpus"] >= 1


@pytest.mark.skipif(not _have_cli(), reason="the tclm command-line tool (training) is not found; set TCLM_BIN")
def test_tune_tiny_with_tclm_and_resume(random_run, trace_model, tmp_path):
    out = str(tmp_path / "tune-tclm")
    os.makedirs(out)
    # Continue the random run's database: the 13 records are there, 8 more trials are measured.
    for name in _tune_ms.DB_FILES:
        shutil.copy(os.path.join(random_run, name), out)
    before = _records(out)
    args = FAST + ["--cost-model", "tclm", "--model", trace_model, "--trials", str(len(before) + 8), "--out", out,
                   "--seed", "1"]
    assert _tune_ms.main(args) == 0

    recs = _records(out)
    assert len(before) + 8 <= len(recs) <= len(before) + 8 + 4
    assert recs[:len(before)] == before
    # No program was measured twice: every record's scheduled module is distinct within its workload.
    db = ms.database.JSONDatabase(work_dir=out)
    hashes = {}
    shash = _tune_ms._structural()[0]
    for rec in db.get_all_tuning_records():
        key = (int(shash(rec.workload.mod)), int(shash(rec.as_measure_candidate().sch.mod)))
        hashes[key] = hashes.get(key, 0) + 1
    assert max(hashes.values()) == 1, "a candidate already in the database was measured again"

    # curve.csv: trials grow, the estimate (once every task has a measurement) never increases.
    rows = _curve(out)
    assert rows and int(rows[-1]["trials"]) == len(recs)
    assert [int(r["trials"]) for r in rows] == sorted(int(r["trials"]) for r in rows)
    est = [float(r["estimated_latency_seconds"]) for r in rows if r["estimated_latency_seconds"]]
    assert est and all(b <= a for a, b in zip(est, est[1:]))
    assert all(math.isfinite(e) and e > 0 for e in est)

    lat = json.loads(open(os.path.join(out, "latency.json")).read())
    for k in ("mean_seconds", "std_seconds", "min_seconds", "median_seconds", "max_seconds"):
        assert math.isfinite(lat[k]) and lat[k] >= 0, k
    assert lat["mean_seconds"] > 0 and lat["min_seconds"] > 0 and len(lat["repeats_seconds"]) == 3
    assert lat["database_records"] == len(recs) and lat["output_shape"] == [1, 10]
    report = json.loads(open(os.path.join(out, "tune.json")).read())
    assert report["cost_model"] == "tclm" and report["model"]["sha256"]
    assert report["runs"][-1]["trials_before"] == len(before)
    assert report["runs"][-1]["cost_model_stats"]["predicted"] > 0
    assert report["runs"][-1]["cost_model_stats"]["unreadable"] == 0

    # The network compiled with the database's best schedules computes what numpy computes.
    net = relax_network("tiny")
    target = tvm.target.Target({"kind": "llvm", "num-cores": 2})
    ex = ms.relax_integration.compile_relax(db, net.mod, target, net.params)
    vm = tvm.relax.VirtualMachine(ex, tvm.cpu())
    x = random_inputs(net, 3)["data"]
    got = vm["main"](tvm.runtime.tensor(x, tvm.cpu())).numpy()
    np.testing.assert_allclose(got, _reference(x), rtol=1e-4, atol=1e-5)

    # The same command again: nothing is measured, the latency is not measured again.
    curve_before, lat_text = _curve(out), open(os.path.join(out, "latency.json")).read()
    assert _tune_ms.main(args) == 0
    assert len(_records(out)) == len(recs)
    assert _curve(out) == curve_before
    assert open(os.path.join(out, "latency.json")).read() == lat_text
    report = json.loads(open(os.path.join(out, "tune.json")).read())
    assert report["runs"][-1]["measured"] == 0 and report["runs"][-1]["wall"]["compile_seconds"] == 0


def test_errors(model, tmp_path, capsys):
    out = str(tmp_path / "o")

    def fails(args, match):
        with pytest.raises(SystemExit) as e:
            _tune_ms.main(args + ["--out", out])
        assert e.value.code == 2
        assert match in capsys.readouterr().err

    fails(["--network", "resnet-1000"], "unknown network 'resnet-1000'")
    fails(["--network", "tiny", "--model", str(tmp_path / "none.tclm")], "none.tclm: no such file")
    fails(["--onnx", str(tmp_path / "m.onnx"), "--input", "data:1xAx3"], "expected NAME:SHAPE")
    fails(["--network", "tiny", "--input", "data:1x3"], "--input goes with --onnx")
    fails([], "give --network NAME or --onnx FILE")
    # The conftest model is an Ansor one: refused, saying so.
    fails(["--network", "tiny", "--model", str(model)], "an Ansor model: use it with --scheduler ansor")
    assert not os.path.exists(os.path.join(out, "database_tuning_record.json"))


def test_parse_input_spec():
    assert parse_input_spec("data:1x3x224x224") == ("data", (1, 3, 224, 224))
    assert parse_input_spec("input.1:1,3,8,8") == ("input.1", (1, 3, 8, 8))
    for bad in ("data", "data:", ":1x3", "data:1x0", "data:axb"):
        with pytest.raises(ValueError, match="NAME:SHAPE"):
            parse_input_spec(bad)


def test_networks_build():
    """resnet-18 and mobilenet are well-formed Relax modules with the documented shapes (no tuning)."""
    for name, n_weights in (("resnet-18", 42), ("mobilenet", 56)):
        net = relax_network(name)
        assert net.inputs == {"data": ((1, 3, 224, 224), "float32")}
        assert len(net.params) == n_weights
        tvm.relax.analysis.well_formed(net.mod)


def test_onnx_network(tmp_path):
    onnx = pytest.importorskip("onnx", reason="onnx is not installed in this venv")
    from onnx import TensorProto, helper, numpy_helper

    from tclm.relax_networks import onnx_network

    w = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["input.1", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])],
        "g", [helper.make_tensor_value_info("input.1", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 8, 8])], initializer=[numpy_helper.from_array(w, "w")])
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    # A dynamic batch needs --input; the Relax parameter takes a sanitized name.
    with pytest.raises(ValueError, match="dynamic shape"):
        onnx_network(path, [])
    with pytest.raises(ValueError, match="has no such input.*input.1"):
        onnx_network(path, ["data:1x3x8x8"])
    net = onnx_network(path, ["input.1:2x3x8x8"])
    assert net.name == "m" and net.params == {}
    assert list(net.inputs.values()) == [((2, 3, 8, 8), "float32")]
    target = tvm.target.Target({"kind": "llvm", "num-cores": 2})
    tasks = ms.relax_integration.extract_tasks(_tune_ms.fuse(net, target), target)
    assert len(tasks) >= 1
