"""Measuring through TVM's RPC tracker (tclm._remote): a tracker and two RPC servers on 127.0.0.1,
started as users start them (``python -m tvm.exec.rpc_tracker`` / ``rpc_server --tracker --key``),
and tclm's collections measuring on them.

* Ansor (TVM 0.19): a collection of the tiny network's first task on both devices (each server's log
  shows that it served), then a device that stops answering (SIGSTOP): its candidates end as run
  timeouts within --timeout + --rpc-wait, recorded as failures, and the command finishes.
* MetaSchedule (apache-tvm): an operator collection on the same kind of devices.
* Bad options are refused before any work.

Each part is skipped with the reason where its TVM is missing.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

tvm = pytest.importorskip("tvm")
rpc = pytest.importorskip("tvm.rpc")
pytest.importorskip("tornado", reason="TVM's RPC tracker needs tornado (python/requirements-*.txt install it)")

from tclm import _remote, collect  # noqa: E402

KEY = "tclm-test"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Devices:
    """A tracker and `n` servers under KEY; logs in `dir`."""

    def __init__(self, tmp_path, n):
        self.port = _free_port()
        self.dir = tmp_path
        self.procs = []
        self.logs = []
        self._start("tracker", ["tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port", str(self.port),
                                "--port-end", str(self.port + 1)])
        self._wait(lambda: self._listening())
        for i in range(n):
            p = _free_port()
            self._start(f"server{i}", ["tvm.exec.rpc_server", "--host", "127.0.0.1", "--port", str(p),
                                       "--port-end", str(p + 1), "--tracker", f"127.0.0.1:{self.port}",
                                       "--key", KEY])
        self._wait(lambda: len(_remote.tracker_devices("127.0.0.1", self.port, KEY)[0]) == n)
        self.servers = self.procs[1:]

    def _start(self, name, args):
        log = open(self.dir / f"{name}.log", "w")
        # Own process group: the server's serving loop runs in a child process (TVM's PopenWorker).
        self.procs.append(subprocess.Popen([sys.executable, "-m"] + args, stdout=log, stderr=subprocess.STDOUT,
                                           start_new_session=True))
        self.logs.append(self.dir / f"{name}.log")

    def _listening(self):
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def _wait(self, cond, seconds=60):
        t0 = time.time()
        while time.time() - t0 < seconds:
            for p, log in zip(self.procs, self.logs):
                if p.poll() is not None:
                    self.stop()
                    raise AssertionError(f"{log.name} exited with {p.returncode}:\n{log.read_text()[-3000:]}")
            try:
                if cond():
                    return
            except (OSError, RuntimeError):
                pass
            time.sleep(0.5)
        self.stop()
        raise AssertionError("the RPC tracker/servers did not come up within 60 s")

    def served(self, i):
        """Connections server i served (its log's "start serving" lines)."""
        return (self.dir / f"server{i}.log").read_text().count("start serving")

    def tracker(self):
        return f"127.0.0.1:{self.port}"

    def stop(self):
        for p in reversed(self.procs):
            try:
                os.killpg(p.pid, signal.SIGCONT)
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)


@pytest.fixture
def two_devices(tmp_path):
    d = Devices(tmp_path, 2)
    yield d
    d.stop()


def _host_cpu():
    from tvm.target import codegen

    return codegen.llvm_get_system_cpu()


def _ansor():
    return pytest.importorskip("tvm.auto_scheduler", reason="this TVM has no auto_scheduler (needs <= 0.19)")


def _ansor_args(out, tracker, *extra):
    return ["--scheduler", "ansor", "--networks", "tiny", "--limit-tasks", "1", "--out", str(out),
            "--rpc-tracker", tracker, "--rpc-key", KEY, "--platform", "loopback", "--mcpu", _host_cpu(),
            "--cores", "1", "--repeat", "1", "--min-repeat-ms", "1"] + list(extra)


def test_ansor_collection_measures_on_both_devices(two_devices, tmp_path):
    auto_scheduler = _ansor()
    out = tmp_path / "c"
    assert collect.main(_ansor_args(out, two_devices.tracker(), "--pool", "8", "--budget", "1", "--batch", "8")) == 0
    report = json.loads((out / "collect.json").read_text())
    (task,) = report["tasks"]
    # Some random programs of this task fail to instantiate (a build-side error, here as locally); none
    # fails on the devices.
    assert task["picked"] == 8 and task["measured"] >= 2, task
    assert not set(task["errors"]) & set(_remote.ANSOR_DEVICE_ERRORS.values()), task
    records = list(auto_scheduler.load_records(str(out / task["records"])))
    assert len(records) == 8
    assert sum(1 for _, r in records if r.error_no == 0 and 0 < min(r.costs) < 1) == task["measured"]
    # Both devices measured (two at once: --rpc-parallel defaults to the devices under the key).
    assert two_devices.served(0) >= 1 and two_devices.served(1) >= 1
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["measured_on"]["key"] == KEY and len(prov["measured_on"]["devices"]) == 2
    assert prov["measured_on"]["parallel"] == 2
    assert prov["cpu_model"] is None and prov["platform"] == "loopback"  # this machine only built


def test_ansor_device_that_stops_answering_ends_in_recorded_timeouts(two_devices, tmp_path, capsys):
    auto_scheduler = _ansor()
    for p in two_devices.servers:
        os.killpg(p.pid, signal.SIGSTOP)  # still registered at the tracker, answers nothing
    out = tmp_path / "lost"
    t0 = time.time()
    assert collect.main(_ansor_args(out, two_devices.tracker(), "--pool", "8", "--budget", "0.5", "--timeout", "1",
                                    "--rpc-wait", "2")) == 0
    # 4 candidates, 2 at once, each stopped after 1 + 2 s (plus starting the workers): no hang.
    assert time.time() - t0 < 120
    (task,) = json.loads((out / "collect.json").read_text())["tasks"]
    # Every candidate that built is a run timeout (some random programs fail to instantiate, as locally).
    timeouts = task["errors"].get("run_timeout", 0)
    assert task["picked"] == 4 and task["measured"] == 0 and task["failed"] == 4, task
    assert timeouts >= 1 and set(task["errors"]) <= {"run_timeout", "instantiation"}, task
    records = list(auto_scheduler.load_records(str(out / task["records"])))
    assert sum(1 for _, r in records if int(r.error_no) == 7) == timeouts  # MeasureErrorNo.RUN_TIMEOUT
    err = capsys.readouterr().err
    assert f"{timeouts} of " in err and "candidates failed on the remote devices" in err
    assert "2 of 2 devices registered now" in err


def test_ansor_network_tuned_and_timed_on_rpc_devices(two_devices, tmp_path):
    """tclm tune --rpc-key: candidates measured on the devices, and the compiled network uploaded to
    one of them (a tar the device links) and timed there."""
    _ansor()
    from tclm import _tune_ansor

    out = tmp_path / "t"
    args = ["--network", "tiny", "--cost-model", "random", "--trials", "6", "--per-round", "2", "--out", str(out),
            "--population", "16", "--search-param", "evolutionary_search_num_iters=1",
            "--search-param", "sample_init_min_population=8", "--min-repeat-ms", "5", "--latency-repeat", "2",
            "--latency-min-repeat-ms", "10", "--cores", "1", "--mcpu", _host_cpu(),
            "--rpc-tracker", two_devices.tracker(), "--rpc-key", KEY]
    assert _tune_ansor.main(args) == 0
    lat = json.loads((out / "latency.json").read_text())
    assert lat["settings"]["device"]["key"] == KEY and lat["mean_ms"] > 0
    assert json.loads((out / "tune.json").read_text())["measured_on"]["devices"] == lat["settings"]["device"]["devices"]
    # Every candidate that built ran on a device, and the network too: one connection each.
    ran = sum(1 for line in (out / "tuning.json").read_text().splitlines()
              if json.loads(line)["r"][1] not in (1, 2, 6))  # instantiation / host compile error, build timeout
    assert ran >= 1 and two_devices.served(0) + two_devices.served(1) >= ran + 1


def test_metaschedule_network_tuned_and_timed_on_rpc_devices(two_devices, tmp_path):
    pytest.importorskip("tvm.s_tir.meta_schedule", reason="this TVM has no MetaSchedule (apache-tvm >= 0.22)")
    from tclm import _tune_ms

    out = tmp_path / "t"
    args = ["--network", "tiny", "--cost-model", "random", "--trials", "6", "--per-iter", "2", "--population", "16",
            "--out", str(out), "--min-repeat-ms", "5", "--latency-repeat", "2", "--latency-min-repeat-ms", "10",
            "--cores", "1", "--mcpu", _host_cpu(), "--rpc-tracker", two_devices.tracker(), "--rpc-key", KEY]
    assert _tune_ms.main(args) == 0
    lat = json.loads((out / "latency.json").read_text())
    assert lat["settings"]["device"]["key"] == KEY and lat["mean_seconds"] > 0
    assert two_devices.served(0) + two_devices.served(1) >= 2


def test_metaschedule_collection_on_rpc_devices(two_devices, tmp_path):
    pytest.importorskip("tvm.s_tir.meta_schedule", reason="this TVM has no MetaSchedule (apache-tvm >= 0.22)")
    out = tmp_path / "ms"
    assert collect.main(["--out", str(out), "--workloads", "matmul-128", "--pool", "8", "--budget", "0.5",
                         "--rpc-tracker", two_devices.tracker(), "--rpc-key", KEY, "--mcpu", _host_cpu(),
                         "--cores", "1"]) == 0
    (stats,) = json.loads((out / "collect.json").read_text())
    assert stats["measured"] == 4 and stats["failed"] == 0, stats
    assert stats["measured_on"]["key"] == KEY
    assert two_devices.served(0) + two_devices.served(1) >= 1


def _base_args(out):
    """A collection with whichever scheduler this TVM has (the options are checked the same way)."""
    try:
        import tvm.s_tir.meta_schedule  # noqa: F401
        return ["--out", str(out), "--mcpu", "generic", "--cores", "1"]
    except ImportError:
        _ansor()
        return ["--scheduler", "ansor", "--networks", "tiny", "--out", str(out), "--mcpu", "generic", "--cores", "1",
                "--platform", "loopback"]


@pytest.mark.parametrize("extra, code, message", [
    (["--rpc-key", "nobody", "--rpc-tracker", "TRACKER"], None, "no device is registered under key 'nobody'"),
    (["--rpc-key", KEY, "--rpc-tracker", "UNREACHABLE"], None, "cannot reach the RPC tracker"),
    (["--rpc-key", KEY, "--rpc-tracker", "127.0.0.1"], 2, "expected HOST:PORT"),
    (["--rpc-tracker", "TRACKER"], 2, "--rpc-tracker needs --rpc-key"),
    (["--rpc-key", KEY, "--rpc-tracker", "TRACKER", "--rpc-wait", "0"], 2, "--rpc-wait must be positive"),
])
def test_bad_rpc_options_are_refused_before_any_work(two_devices, tmp_path, capsys, extra, code, message):
    subst = {"TRACKER": two_devices.tracker(), "UNREACHABLE": f"127.0.0.1:{_free_port()}"}
    args = _base_args(tmp_path / "x") + [subst.get(x, x) for x in extra]
    with pytest.raises(SystemExit) as e:
        collect.main(args)
    if code is None:  # refused with a message (exit status 1)
        assert message in str(e.value.code)
    else:  # an option error (argparse, exit status 2)
        assert e.value.code == code and message in capsys.readouterr().err
    assert not (tmp_path / "x" / "collect.json").exists()


def test_remote_needs_the_devices_target(two_devices, tmp_path, capsys):
    _ansor()
    with pytest.raises(SystemExit) as e:
        collect.main(["--scheduler", "ansor", "--networks", "tiny", "--out", str(tmp_path / "x"),
                      "--rpc-tracker", two_devices.tracker(), "--rpc-key", KEY])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--mcpu, --cores, --platform" in err and "this machine's CPU is not theirs" in err
