"""bench/round_speed.py on the CPU with the real engine (demo, vector_add): a round of two
entries measured, the second reusing the first's references; and a round stopped by the
time limit, which still prints what it measured and reaps what the stopped grader left."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grader.paths import REPO

pytestmark = pytest.mark.docker


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "bench/round_speed.py", "--suite", "demo",
                           "--problem", "vector_add", *args], capture_output=True, text=True,
                          cwd=REPO, check=False, timeout=300)


def test_a_round_measured_first_and_later_entries(engine, runtime,  # type: ignore[no-untyped-def]
                                                 tmp_path: Path) -> None:
    res = _bench("-n", "2", "-o", str(tmp_path / "r"), "--json", str(tmp_path / "f.json"))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    got = json.loads((tmp_path / "f.json").read_text())
    first, later = got["entries"]
    assert [e["status"] for e in got["entries"]] == ["graded", "graded"]
    assert (first["refs_computed"], first["refs_reused"]) == (1, 0)
    assert (later["refs_computed"], later["refs_reused"]) == (0, 1)
    assert first["parts"]["ref_container"] > 0 and later["parts"]["ref_container"] == 0
    assert "first entry (triton)" in res.stdout and "later entries (1)" in res.stdout
    assert "not judged for this run" in res.stdout


def test_the_time_limit_stops_the_round_and_prints_what_it_has(  # type: ignore[no-untyped-def]
        engine, runtime, tmp_path: Path) -> None:
    res = _bench("-n", "2", "-o", str(tmp_path / "r"), "--time-limit", "4")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "stopped at the time limit (4 s)" in res.stdout
    assert "| torch-fallback | not started |" in res.stdout
    # SIGINT first (the grader's own clean-up), then what a dead grader left reaped
    assert "stopped; left by the round and removed:" in res.stdout
