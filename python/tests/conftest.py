"""Fixtures shared by the Python tests: real record lines of the embedded data and a model trained on
them with the tclm command-line tool (one epoch on data/records/k80, ~10 s; the tests that need it
skip with a message when the tool is not found: set TCLM_BIN or build the checkout)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import tclm

REPO = Path(__file__).resolve().parents[2]
RECORDS = REPO / "data" / "records"

TRACE = (
    '[[["GetBlock", [], ["C", "main"], ["b0"]], ["GetLoops", ["b0"], [], ["l1"]], '
    '["SamplePerfectTile", ["l1"], [2, 16], ["v2", "v3"]], '
    '["Split", ["l1", "v2", "v3"], [1, 0], ["l4", "l5"]]], [[2, [32, 4]]]]'
)


def read_lines(path: Path) -> list[str]:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return [ln for ln in data.decode().splitlines() if ln.strip() and not ln.startswith("#")]


def record_lines(per_file: int = 40, max_files: int = 12) -> list[str]:
    """Real Ansor record lines from several workloads and platforms of the embedded data."""
    files = sorted(p for p in RECORDS.rglob("*") if p.is_file() and not p.name.endswith((".md", ".txt")))
    if not files:
        pytest.skip(f"no record files under {RECORDS}")
    step = max(1, len(files) // max_files)
    lines: list[str] = []
    for f in files[::step][:max_files]:
        lines += read_lines(f)[:per_file]
    return lines


def n_steps(line: str) -> int:
    return len(json.loads(line)["i"][1][1])


@pytest.fixture(scope="session")
def model(tmp_path_factory) -> Path:
    try:
        tclm.find_cli()
    except FileNotFoundError as e:
        pytest.skip(f"needs the tclm command-line tool to train a model: {e}")
    out = tmp_path_factory.mktemp("model")
    tclm.cli(["train", "-d", f"k80={RECORDS / 'k80'}", "--epochs", "1", "--quiet", "--threads", "2", "-o", str(out)])
    path = out / "best.tclm"
    assert path.is_file()
    return path


@pytest.fixture(scope="session")
def engine(model: Path) -> tclm.Engine:
    return tclm.Engine(str(model))


