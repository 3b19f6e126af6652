"""Measuring on remote devices through TVM's RPC tracker, for both schedulers.

``tclm collect``, ``tclm tune`` and ``tclm tune-bench`` take ``--rpc-key KEY``: candidates are then
built here and measured by the scheduler's own RPC runner (Ansor's ``RPCRunner``, MetaSchedule's
``RPCRunner``) on every device the tracker has under KEY, as many at once as there are devices
(``--rpc-parallel``). The tracker is ``--rpc-tracker HOST:PORT``, or ``$TVM_TRACKER_HOST`` and
``$TVM_TRACKER_PORT`` (the variables TVM itself reads). Devices are started the usual way::

    python -m tvm.exec.rpc_tracker --host 0.0.0.0 --port 9190
    python -m tvm.exec.rpc_server --tracker HOST:9190 --key KEY     # on every device

Nothing waits forever: a candidate that gets no device within ``--rpc-wait`` seconds, or whose device
stops answering, ends as a run timeout (recorded as a failed measurement, like any other), and the
commands say how many candidates the devices lost. Ansor's own RPC runner in TVM 0.19 has no such
bound (its worker pool waits for the tracker without a timeout), so tclm installs its runner function
under Ansor's name with the bound added (``ansor_runner``); MetaSchedule's runner
has it already (its connection timeout).
"""
from __future__ import annotations

import argparse
import os
import socket
import time
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

from ._cli import finite_float


@dataclass
class Remote:
    """Where candidates are measured: the tracker, the device key and how to use them."""
    host: str
    port: int
    key: str
    priority: int = 1
    parallel: int = 1
    wait: float = 60.0
    devices: List[str] = field(default_factory=list)  # "host:port" of each server under the key at the start

    def describe(self) -> str:
        return f"key '{self.key}' at tracker {self.host}:{self.port}"

    def provenance(self) -> dict:
        return {"tracker": f"{self.host}:{self.port}", "key": self.key, "devices": self.devices,
                "parallel": self.parallel, "priority": self.priority, "wait_seconds": self.wait}


def add_rpc_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("remote measurement (TVM RPC tracker)")
    g.add_argument("--rpc-key", help="measure on the devices registered under this key at the tracker (default: "
                   "here, with the local runner)")
    g.add_argument("--rpc-tracker", metavar="HOST:PORT",
                   help="the RPC tracker (default: $TVM_TRACKER_HOST:$TVM_TRACKER_PORT)")
    g.add_argument("--rpc-parallel", type=int, default=0,
                   help="candidates measured at once (default 0: the number of devices under the key at the start)")
    g.add_argument("--rpc-priority", type=int, default=1, help="priority of the requests at the tracker (default 1)")
    g.add_argument("--rpc-wait", type=finite_float, default=60.0,
                   help="seconds a candidate may wait for a free device, on top of its run timeout; then it is "
                        "recorded as a run timeout (default 60)")


def parse_tracker(text: str) -> Tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected HOST:PORT, e.g. 127.0.0.1:9190 (got '{text}')")
    return host, int(port)


def _connect(host: str, port: int, timeout: float = 5.0):
    """A connection to the tracker; a tracker that does not answer is an error at once (TVM's own connect
    retries for 60 s)."""
    from tvm import rpc

    with socket.create_connection((host, port), timeout=timeout):
        pass
    return rpc.connect_tracker(host, port)


def tracker_devices(host: str, port: int, key: str) -> Tuple[List[str], List[str]]:
    """The servers registered under `key` ("host:port" each) and every key the tracker knows, now."""
    summary = _connect(host, port).summary()
    return ([f"{s['addr'][0]}:{s['addr'][1]}" for s in summary.get("server_info", [])
             if s.get("key") == f"server:{key}"], sorted(summary.get("queue_info", {})))


def from_args(a, p: argparse.ArgumentParser) -> Optional[Remote]:
    """The Remote the options ask for (None: measure here). Refuses bad options with p.error (exit 2)
    and an unreachable tracker or a key without devices with SystemExit (exit 1), before any work."""
    tracker = a.rpc_tracker
    if not a.rpc_key:
        if tracker:
            p.error("--rpc-tracker needs --rpc-key (the key the devices registered under)")
        if a.rpc_parallel:
            p.error("--rpc-parallel needs --rpc-key")
        return None
    if not tracker:
        env_host, env_port = os.environ.get("TVM_TRACKER_HOST"), os.environ.get("TVM_TRACKER_PORT")
        if not (env_host and env_port):
            p.error("--rpc-key: no tracker: give --rpc-tracker HOST:PORT or set TVM_TRACKER_HOST and TVM_TRACKER_PORT")
        tracker = f"{env_host}:{env_port}"
    try:
        host, port = parse_tracker(tracker)
    except ValueError as e:
        p.error(f"--rpc-tracker: {e}")
    if a.rpc_parallel < 0:
        p.error(f"--rpc-parallel must be at least 0 (got {a.rpc_parallel})")
    if a.rpc_wait <= 0:
        p.error(f"--rpc-wait must be positive (got {a.rpc_wait:g})")
    try:
        devices, keys = tracker_devices(host, port, a.rpc_key)
    except (OSError, RuntimeError) as e:
        raise SystemExit(f"{p.prog}: error: cannot reach the RPC tracker at {host}:{port} ({e})") from None
    if not devices:
        raise SystemExit(f"{p.prog}: error: no device is registered under key '{a.rpc_key}' at tracker {host}:{port}"
                         f" (keys there: {', '.join(keys) or 'none'}); start one with python -m tvm.exec.rpc_server"
                         f" --tracker {host}:{port} --key {a.rpc_key}")
    return Remote(host, port, a.rpc_key, a.rpc_priority, a.rpc_parallel or len(devices), a.rpc_wait, devices)


def devices_now(remote: Remote) -> Optional[int]:
    """How many devices the tracker has under the key now (None: the tracker does not answer)."""
    try:
        return len(tracker_devices(remote.host, remote.port, remote.key)[0])
    except (OSError, RuntimeError):
        return None


def _given(argv: List[str], opt: str) -> bool:
    return any(x == opt or x.startswith(opt + "=") for x in argv)


def require_remote_target(a, p: argparse.ArgumentParser, argv: List[str], need_platform: bool) -> None:
    """With --rpc-key the programs run on the devices, not here: this machine's CPU must not decide
    the target (and the platform name) by default."""
    if not getattr(a, "rpc_key", None):
        return
    missing = [opt for opt, ok in (("--mcpu", a.mcpu != "native"), ("--cores", _given(argv, "--cores")),
                                   ("--platform", not need_platform or bool(getattr(a, "platform", None))))
               if not ok]
    if missing:
        p.error(f"--rpc-key: the candidates run on the remote devices, so give their {', '.join(missing)} "
                "(e.g. --mcpu cortex-a72 --mtriple aarch64-linux-gnu --cores 4 --platform rpi4-4c; this machine's "
                "CPU is not theirs)")


# -- Ansor ---------------------------------------------------------------------------------------

_ansor_wait = [60.0]


def _bounded_rpc_run(inputs, build_results, key, host, port, priority=1, n_parallel=1, timeout=10, number=3,
                     repeat=1, min_repeat_ms=0, cooldown_interval=0.0, enable_cpu_cache_flush=False, verbose=1,
                     device=0):
    """Ansor's "auto_scheduler.rpc_runner.run" with a bound on every candidate: its worker process is
    stopped after the run timeout plus the wait for a device, and the candidate is a run timeout."""
    from tvm.auto_scheduler import measure as m
    from tvm.contrib.popen_pool import PopenPoolExecutor, StatusKind

    limit = float(timeout) + _ansor_wait[0]
    pool = PopenPoolExecutor(max_workers=int(n_parallel), timeout=limit)
    jobs = [(inp.serialize(), res, m.prepare_runner_args(inp, res), key, host, port, priority, timeout, number,
             repeat, min_repeat_ms, cooldown_interval, enable_cpu_cache_flush, verbose, device)
            for inp, res in zip(inputs, build_results)]
    out = []
    for res, done in zip(build_results, pool.map_with_error_catching(m._rpc_run_worker, jobs)):
        if done.status == StatusKind.COMPLETE:
            out.append(m.MeasureResult(*done.value))
            continue
        why = (f"no result from a device under key '{key}' at {host}:{port} within {limit:g} s (run timeout + "
               "--rpc-wait)" if done.status == StatusKind.TIMEOUT else f"the RPC worker failed: {done.value}")
        out.append(m.MeasureResult((m.MAX_FLOAT,), m.MeasureErrorNo.RUN_TIMEOUT, why[:2000],
                                   res.time_cost + limit, time.time()))
    return out


def ansor_runner(remote: Remote, *, timeout: int, number: int, repeat: int, min_repeat_ms: int,
                 cooldown: float = 0.0, cache_flush: bool = False):
    """Ansor's RPCRunner on the remote devices, with every candidate bounded (see the module doc)."""
    import tvm
    from tvm import auto_scheduler

    from tvm.auto_scheduler import _ffi_api

    _ansor_wait[0] = remote.wait
    tvm.register_func("auto_scheduler.rpc_runner.run", _bounded_rpc_run, override=True)
    # RPCRunner's Python constructor first asks the tracker for a device in a thread it joins for
    # `timeout` seconds and raises when none came (with a busy or stopped device: a failed start, and a
    # thread left waiting). from_args checked the key already; build the runner object directly.
    runner = auto_scheduler.RPCRunner.__new__(auto_scheduler.RPCRunner)
    runner.__init_handle_by_constructor__(_ffi_api.RPCRunner, remote.key, remote.host, remote.port, remote.priority,
                                          remote.parallel, timeout, number, repeat, min_repeat_ms, cooldown,
                                          cache_flush, 0)
    return runner


#: Ansor's error numbers that a lost or unanswering device produces (MeasureErrorNo).
ANSOR_DEVICE_ERRORS = {3: "compile_device", 4: "runtime_device", 7: "run_timeout"}


def report_device_losses(remote: Optional[Remote], error_numbers: List[int], say) -> bool:
    """After a batch on the remote devices: says how many candidates failed on the device side and how
    many devices are left. False when no device is left under the key (the caller stops)."""
    if remote is None:
        return True
    lost = sum(1 for e in error_numbers if int(e) in ANSOR_DEVICE_ERRORS)
    if not lost:
        return True
    now = devices_now(remote)
    say(f"{lost} of {len(error_numbers)} candidates failed on the remote devices ({remote.describe()}; "
        + ("the tracker does not answer" if now is None else f"{now} of {len(remote.devices)} devices registered now")
        + "); they are recorded as failed measurements")
    return bool(now)


# -- MetaSchedule ----------------------------------------------------------------------------------

def ms_runner(remote: Remote, *, timeout: float, evaluator_config):
    """MetaSchedule's RPCRunner on the remote devices; its connection timeout bounds every candidate."""
    from tvm.s_tir import meta_schedule as ms

    cfg = ms.runner.RPCConfig(tracker_host=remote.host, tracker_port=remote.port, tracker_key=remote.key,
                              session_priority=remote.priority, session_timeout_sec=int(timeout + remote.wait))
    return ms.runner.RPCRunner(rpc_config=cfg, evaluator_config=evaluator_config, max_workers=remote.parallel)


# -- the tuned network on a device ------------------------------------------------------------------

def connect_device(remote: Remote, timeout: float = 600.0):
    """An RPC connection to one device under the key (the tracker's queue decides which)."""
    return _connect(remote.host, remote.port).request(remote.key, priority=remote.priority,
                                                      session_timeout=int(timeout))


def load_on_device(sess, lib, workdir: str, name: str = "net.tar"):
    """Uploads a built module (as a tar of objects, linked by the device's own compiler: no cross
    linker needed here) and loads it on the connected device."""
    path = os.path.join(workdir, name)
    lib.export_library(path)
    sess.upload(path)
    return sess.load_module(name)
