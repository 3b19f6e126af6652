"""The command-line helpers of the Python package (tclm._cli) and the atomic writer of the adapters:
the same rules as the tclm tool's options and outputs (docs/reliability.md)."""
import argparse
import os
import subprocess
import sys
import threading

import pytest

from tclm._adapter import write_atomic
from tclm._cli import (HelpFormatter, add_tune_options, available_cores, claim_output_dir, finite_float,
                       write_csv_atomic, write_json_atomic)


@pytest.mark.parametrize("text", ["nan", "NaN", "inf", "-inf", "1e999", "Infinity"])
def test_float_options_refuse_non_finite_values(text):
    with pytest.raises(argparse.ArgumentTypeError, match="finite"):
        finite_float(text)


def test_float_options_take_numbers():
    assert finite_float("0.25") == 0.25
    with pytest.raises(argparse.ArgumentTypeError):
        finite_float("abc")


def test_help_says_each_default_once():
    p = argparse.ArgumentParser(formatter_class=HelpFormatter)
    p.add_argument("--seed", type=int, default=0, help="seed")
    p.add_argument("--pool", type=int, default=256, help="pool per task")
    p.add_argument("--cores", type=int, default=8, help="cores (default: all of them)")
    p.add_argument("--flag", action="store_true", help="a switch")
    p.add_argument("--model", default=None, help="a file")
    text = " ".join(p.format_help().split())
    assert "seed (default: 0)" in text  # 0 is said, though it equals False
    assert "pool per task (default: 256)" in text
    assert text.count("default") == 3  # --cores says its own; the switch and --model have none to say


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux and at least 2 CPUs to narrow the affinity")
def test_cores_default_is_the_cpus_this_process_may_use():
    # Under taskset or a cgroup's cpuset, os.cpu_count() still counts the whole machine; collecting and
    # tuning on a narrowed set must default to the same, smaller core count (the target's num-cores).
    from tclm import _collect_ansor

    allowed = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {min(allowed)})
        assert available_cores() == 1
        tune = argparse.ArgumentParser()
        add_tune_options(tune, min_new_records=64)
        assert tune.parse_args([]).cores == 1
        assert _collect_ansor.build_parser().parse_args(["--out", "x"]).cores == 1
    finally:
        os.sched_setaffinity(0, allowed)
    assert available_cores() == len(allowed)


def test_a_failed_report_write_leaves_the_old_file(tmp_path):
    # A resumed tclm tune rewrites curve.csv, the run's only record of its wall-time curve: a write that
    # fails half-way must leave the old file whole, and no temporary file behind.
    curve = tmp_path / "curve.csv"
    write_csv_atomic(str(curve), ["trials", "estimated_ms"], [{"trials": 8, "estimated_ms": 14.2}])
    old = curve.read_bytes()
    with pytest.raises(ValueError):
        write_csv_atomic(str(curve), ["trials"], [{"trials": 16}, {"trials": 24, "not_a_field": 1}])
    with pytest.raises(TypeError):
        write_json_atomic(str(curve), {"x": object()})
    assert curve.read_bytes() == old == b"trials,estimated_ms\r\n8,14.2\r\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["curve.csv"]


def test_write_atomic_keeps_a_symbolic_link_and_writes_its_target(tmp_path):
    target = tmp_path / "target.bin"
    target.write_bytes(b"old")
    link = tmp_path / "link.bin"
    link.symlink_to(target)
    write_atomic(str(link), b"new")
    assert link.is_symlink() and target.read_bytes() == b"new"


def test_write_atomic_writes_into_a_fifo(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
    reader.start()
    write_atomic(str(fifo), b"bytes")
    reader.join(30)
    assert got == [b"bytes"] and fifo.is_fifo()


def test_a_second_run_into_a_locked_output_directory_is_refused(tmp_path):
    out = tmp_path / "out"
    code = ("import sys, time; from tclm._cli import claim_output_dir; claim_output_dir(sys.argv[1], 'collect'); "
            "print('locked', flush=True); time.sleep(60)")
    holder = subprocess.Popen([sys.executable, "-c", code, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(SystemExit, match="in use by another tclm run"):
            claim_output_dir(str(out), "collect")
    finally:
        holder.kill()
        holder.wait()
    claim_output_dir(str(out), "collect")  # free again once the holder is gone
