"""``tclm collect --scheduler ansor``: Ansor's sketch sampler, RDU picks and Ansor's local builder and
runner on the ``tiny`` network (3 small tasks), into standard Ansor record files.

Runs in the separate venv of scripts/setup-ansor.sh (TVM 0.19 with auto_scheduler); skipped, with the
reason, anywhere else. One collection of a 16-program pool per task with budget 0.25 (4 measurements
per task, ~40 s on 2 busy cores), then resumes of it: with collect.json (every task skipped), and
without it and with a record line cut short (the pools and picks are sampled again, the same ones:
only the cut program is measured again).
"""

import json
import math

import pytest

tvm = pytest.importorskip("tvm")
auto_scheduler = pytest.importorskip("tvm.auto_scheduler", reason="this TVM has no auto_scheduler (needs <= 0.19)")

import tclm  # noqa: E402
from tclm import _collect_ansor, collect  # noqa: E402
from tclm._cli import cpu_info  # noqa: E402

POOL, BUDGET = 16, 0.25
ARGS = ["--scheduler", "ansor", "--networks", "tiny", "--pool", str(POOL), "--budget", str(BUDGET), "--cores", "2"]


def _report(out):
    return json.loads((out / "collect.json").read_text())


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    """One collection of `tiny` (shared by the tests below; the resume test changes it last)."""
    out = tmp_path_factory.mktemp("collect-ansor") / "c"
    assert collect.main(ARGS + ["--out", str(out)]) == 0
    return out


def test_counts_add_up_and_records_are_standard(collected):
    out = collected
    report = _report(out)
    tasks = report["tasks"]
    assert len(tasks) == 3 and report["task_extraction"]["kept"] == 3
    files = sorted((out / "records").iterdir())
    assert len(files) == 3
    for t in tasks:
        assert t["status"] == "done", t
        assert 1 <= t["pool"] <= POOL
        assert t["picked"] == max(1, math.ceil(BUDGET * t["pool"]))
        assert t["measured"] + t["failed"] == t["picked"] == t["new"]
        assert sum(t["errors"].values()) == t["failed"]
        assert t["sampled"] >= t["pool"] + t["duplicates"]
        assert t["occurrences"] == {"tiny": 1}
        # TVM reads the file: one record per pick, this task's programs, failures with their error_no.
        records = list(auto_scheduler.load_records(str(out / t["records"])))
        assert len(records) == t["picked"]
        assert sum(1 for _, r in records if r.error_no == 0) == t["measured"]
        for inp, res in records:
            assert inp.task.workload_key == t["workload_key"]
            assert "-mcpu=" in str(inp.task.target) and "-num-cores=2" in str(inp.task.target)
            if res.error_no == 0:
                assert all(0 < float(c.value) < 1 for c in res.costs)
    totals = report["totals"]
    for k in ("pool", "picked", "measured", "failed", "new"):
        assert totals[k] == sum(t[k] for t in tasks), k
    assert totals["measured"] >= 1  # most of tiny's programs build and run

    prov = json.loads((out / "provenance.json").read_text())
    for k in ("platform", "cpu_model", "cores", "cpu_flags", "target", "tvm_version", "tclm_version", "settings",
              "networks", "excluded_networks", "started", "finished"):
        assert k in prov, k
    assert prov["cores"] == 2 and prov["platform"].endswith("-2c") and prov["networks"] == ["tiny"]
    assert prov["tclm_version"] == tclm.__version__ and prov["finished"] is not None
    s = prov["settings"]
    assert (s["pool"], s["budget"], s["method"], s["seed"]) == (POOL, BUDGET, "rdu", 0)
    for k in ("repeat", "number", "min_repeat_ms", "timeout", "build_timeout"):
        assert isinstance(s[k], int), k

    # tclm reads every line: records = picks, programs = the successful ones, nothing skipped.
    try:
        tclm.find_cli()
    except FileNotFoundError as e:
        pytest.skip(f"no tclm command-line tool to read the records with: {e}")
    info = json.loads(tclm.cli(["info", "-d", f"tiny={out / 'records'}", "--json", "-"]).stdout)
    assert info["skipped_lines"] == 0 and info["records"] == totals["picked"], info
    (plat,) = info["platforms"]
    # tclm's tasks are those with a successful measurement (all picks of tiny's dense task may fail in
    # Ansor's layout rewrite; they are errors, kept out).
    with_programs = sum(1 for t in tasks if t["measured"] > 0)
    assert plat["programs"] == totals["measured"] and plat["tasks"] == with_programs, plat
    assert plat["errors"] == totals["failed"], plat


def _steps(line):
    return json.dumps(json.loads(line)["i"][1][1])


def test_the_pool_holds_every_candidate_once_and_the_picks(collected):
    # OUT/pool: per task, the whole pool the picks were chosen from, one line without "r" per program
    # (the candidates of tclm transfer --candidates), under the record file's name.
    out = collected
    for t in _report(out)["tasks"]:
        name = t["records"].split("/")[-1]
        lines = (out / "pool" / name).read_text().splitlines()
        assert len(lines) == t["pool"], name
        assert all("r" not in json.loads(line) for line in lines)
        pool = {_steps(line) for line in lines}
        assert len(pool) == t["pool"], "every program once"
        picked = {_steps(line) for line in (out / t["records"]).read_text().splitlines()}
        assert len(picked) == t["picked"] and picked <= pool


def test_settings_of_another_collection_are_refused(collected, capsys):
    with pytest.raises(SystemExit, match="other settings.*seed"):
        collect.main(ARGS + ["--out", str(collected), "--seed", "7"])


def test_exclude_networks_leaves_no_tasks(tmp_path):
    with pytest.raises(SystemExit, match="no tasks left to collect.*tiny"):
        collect.main(ARGS + ["--out", str(tmp_path / "x"), "--exclude-networks", "tiny"])
    assert not (tmp_path / "x" / "collect.json").exists()


def test_the_excluded_networks_workload_keys_are_recorded(collected):
    # What tools/hold_out_records.py holds out of other records: every task of every excluded network,
    # as extracted for the collection's target (here tiny against itself: its 3 tasks, all dropped).
    target = tvm.target.Target(json.loads((collected / "provenance.json").read_text())["target"])
    hw = auto_scheduler.HardwareParams(num_cores=2, target=target)
    nets = _collect_ansor.load_networks(["tiny"], [], [])
    kept, stats = _collect_ansor.gather_tasks(nets, nets, target, hw)
    assert kept == [] and stats["excluded"] == 3
    keys = stats["excluded_workload_keys"]["tiny"]
    assert sorted(keys) == sorted(t["workload_key"] for t in _report(collected)["tasks"])
    assert "excluded_workload_keys" in _report(collected)["task_extraction"]  # written by every collection


def test_remeasure_reads_the_records_and_reports_the_noise(collected, capsys):
    out = collected
    lines = {f.name: f.read_text() for f in (out / "records").iterdir()}
    prov = (out / "provenance.json").read_text()
    assert collect.main(ARGS + ["--out", str(out), "--remeasure", "2"]) == 0
    assert "measured again" in capsys.readouterr().err
    # Nothing of the collection changes (the resume test below also finds the provenance's 2 runs).
    assert {f.name: f.read_text() for f in (out / "records").iterdir()} == lines
    assert (out / "provenance.json").read_text() == prov
    noise = json.loads((out / "remeasure.json").read_text())
    rows, summary = noise["programs"], noise["summary"]
    assert 1 <= len(rows) <= 2 * len(lines) and summary["programs"] == len(rows)
    for r in rows:  # the recorded costs are a successful record's of that file
        recorded = [[float(c.value) for c in res.costs] for _, res in auto_scheduler.load_records(
            str(out / "records" / r["record"])) if res.error_no == 0]
        assert r["recorded"] in recorded
        assert len(r["again"]) == 3 and all(0 < c < 1 for c in r["again"])
    assert 0 <= summary["median_relative_difference"] <= summary["p90_relative_difference"]


def test_noise_summary_of_known_measurements():
    rows = [{"task": "a", "recorded": [1.0, 1.0, 1.2], "again": [1.1, 1.1, 1.1]},
            {"task": "a", "recorded": [2.0, 2.0, 2.0], "again": [1.0, 1.0, 1.0]},
            {"task": "a", "recorded": [3.0, 3.0, 3.0], "again": [3.0, 3.0, 3.0]},
            {"task": "b", "recorded": [1.0, 1.0, 1.0], "again": [1.2, 1.2, 1.2]}]
    s = _collect_ansor.noise_summary(rows)
    # |again/recorded - 1|: 1.1/1.0667 - 1 = 0.03125, 0.5, 0, 0.2 -> median (2nd of 4 sorted) 0.03125,
    # 90th percentile (4th) 0.5; repeat spreads 0.2, 0, 0, 0 -> median 0; task a's 3 pairs: (1,2) flips
    # (1.07 < 2 but 1.1 > 1), (1,3) and (2,3) agree; task b has no pair.
    assert s["programs"] == 4 and s["tasks"] == 2 and s["pairs"] == 3
    assert abs(s["median_relative_difference"] - (1.1 / (3.2 / 3) - 1)) < 1e-12
    assert s["p90_relative_difference"] == 0.5 and s["median_repeat_spread"] == 0
    assert abs(s["pair_order_agreement"] - 2 / 3) < 1e-12


def test_resume_measures_nothing_new(collected, capsys):
    out = collected
    before = _report(out)
    lines = {f.name: f.read_text() for f in (out / "records").iterdir()}
    pools = {f.name: f.read_text() for f in (out / "pool").iterdir()}
    # With collect.json: every task is done and skipped without measuring; a pool file that is missing
    # (a collection from before pools were written) is sampled again, the same one.
    (out / "pool" / sorted(pools)[0]).unlink()
    capsys.readouterr()
    assert collect.main(ARGS + ["--out", str(out)]) == 0
    assert capsys.readouterr().err.count("done earlier") == 3
    assert {f.name: f.read_text() for f in (out / "pool").iterdir()} == pools
    after = _report(out)
    assert after["totals"]["new"] == 0
    assert after["totals"]["measured"] == before["totals"]["measured"]
    assert {f.name: f.read_text() for f in (out / "records").iterdir()} == lines
    prov = json.loads((out / "provenance.json").read_text())
    assert len(prov["runs"]) == 2

    # Without collect.json, and the last record of one file cut in half (an interrupted write): the
    # pools and picks are sampled again (the same ones: a function of the seed), the half line is
    # dropped and only that program is measured again.
    (out / "collect.json").unlink()
    name = sorted(lines)[1]
    text = lines[name]
    cut = text[:text.rstrip("\n").rfind("\n") + 1] + text.rstrip("\n").rsplit("\n", 1)[-1][:40]
    (out / "records" / name).write_text(cut)
    assert collect.main(ARGS + ["--out", str(out)]) == 0
    again = _report(out)
    assert again["totals"]["new"] == 1, again["totals"]
    assert again["totals"]["picked"] == before["totals"]["picked"]
    assert again["totals"]["measured"] + again["totals"]["failed"] == before["totals"]["picked"]
    for f in (out / "records").iterdir():
        records = list(auto_scheduler.load_records(str(f)))
        assert len(records) == len(lines[f.name].splitlines()), f.name
        if f.name != name:
            assert f.read_text() == lines[f.name]


def test_help_lists_the_ansor_options(capsys):
    with pytest.raises(SystemExit) as e:
        collect.main(["--scheduler", "ansor", "--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    for opt in ("--networks", "--onnx", "--exclude-networks", "--pool", "--budget", "--repeat", "--min-repeat-ms",
                "--timeout", "--platform", "(default 256)", "(default 20)"):
        assert opt in text, opt
    with pytest.raises(SystemExit):
        collect.main(["--help"])  # the MetaSchedule collector's help names the scheduler option
    assert "--scheduler" in capsys.readouterr().out


def test_platform_name_and_cpu_flags(tmp_path):
    assert _collect_ansor.platform_name("AMD EPYC", "znver4", 2) == "amd-epyc-znver4-2c"
    assert (_collect_ansor.platform_name("Intel(R) Xeon(R) Platinum 8272CL CPU @ 2.60GHz", "cascadelake", 4)
            == "intel-xeon-platinum-8272cl-cascadelake-4c")
    assert _collect_ansor.platform_name("AMD EPYC 7763 64-Core Processor", "znver3", 8) == "amd-epyc-7763-znver3-8c"
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse4_2 avx avx2 fma avx512f avx512bw\n\n"
                       "processor\t: 1\nmodel name\t: AMD EPYC\nflags\t\t: fpu\n")
    flags = ["sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw"]
    info = cpu_info(str(cpuinfo))
    assert (info["model"], info["flags"], info["logical_cpus"]) == ("AMD EPYC", flags, 2)


def test_policy_seed_is_never_zero_and_depends_on_the_task():
    seeds = {_collect_ansor.policy_seed(s, k) for s in range(50) for k in ("a", "b")}
    assert 0 not in seeds and len(seeds) == 100


def test_an_interrupted_batch_is_not_recorded_as_failures():
    """SIGINT while the batch is measured (Ctrl-C also reaches TVM's workers, whose runs then fail):
    measure() lets the batch end and raises KeyboardInterrupt instead of returning the batch as failures
    (error_no 8), which a resumed collection would never measure again."""
    import os
    import signal

    settings = dict(build_timeout=30, timeout=10, number=1, repeat=3, min_repeat_ms=20, cooldown=0.0,
                    cache_flush=False)
    m = _collect_ansor.Measurer(settings, cores=1)

    class Builder:
        def build(self, inputs, verbose=0):
            return [None] * len(inputs)

    class InterruptedRunner:
        def run(self, inputs, built, verbose=0):
            try:  # TVM runs the measurement in a Python callback, which swallows what is raised in it
                os.kill(os.getpid(), signal.SIGINT)
                for _ in range(1000):
                    pass
            except BaseException:  # noqa: BLE001
                pass
            raise RuntimeError("the workers were interrupted")

    class FailingRunner:
        def run(self, inputs, built, verbose=0):
            raise RuntimeError("a batch-wide failure")

    m.builder = Builder()
    m.runner = InterruptedRunner()
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        m.measure([object(), object()])
    assert signal.getsignal(signal.SIGINT) is before
    # Without an interruption a batch-wide failure is still recorded, as unknown errors (error_no 8).
    m.runner = FailingRunner()
    results = m.measure([object(), object()])
    assert [int(r.error_no) for r in results] == [8, 8]
    assert "a batch-wide failure" in str(results[0].error_msg)
