"""bench/round_speed.py on the CPU with the real engine (demo, vector_add): a round of two
entries measured, the second reusing the first's references; and a round stopped by the
time limit or on request, which still prints what it measured and reaps what the stopped
grader left."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
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


def _hung_entry(tmp_path: Path) -> Path:
    """A submission whose kernel file never finishes importing: the round stays on it."""
    folder = tmp_path / "hung"
    shutil.copytree(REPO / "examples" / "triton", folder)
    kernel = folder / "kernels" / "vector_add.py"
    # At the end: before the file's `from __future__` import the sleep would be a syntax
    # error, and the entry a compile_error graded in seconds, not a hang (the round then
    # raced the test's signal, and a fast host graded the second entry too).
    kernel.write_text(kernel.read_text() + "\n\nimport time\n\ntime.sleep(3600)\n")
    return folder


def test_a_stopped_round_prints_what_it_has(  # type: ignore[no-untyped-def]
        engine, runtime, tmp_path: Path) -> None:
    """Stopped at a point of the round's own, never after a time: the first entry hangs, so
    the second has not started whatever the host's speed (issue 34: a 4 s limit expected
    the second entry not started, and a fast host had started it)."""
    out = tmp_path / "r"
    proc = subprocess.Popen(
        [sys.executable, "bench/round_speed.py", "--suite", "demo", "--problem", "vector_add",
         "-n", "2", "--entry", str(_hung_entry(tmp_path)),
         "--entry", str(REPO / "examples" / "torch-fallback"), "-o", str(out),
         "--progress", str(tmp_path / "progress.jsonl")],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 600  # a bound on a broken run, not on the host's speed
        while not (out / "entries" / "hung").exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.2)
        proc.send_signal(signal.SIGUSR1)  # the first entry is grading: stop the round now
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 0, stdout[-3000:] + stderr[-3000:]
    assert "stopped on request (SIGUSR1)" in stdout
    table = [line for line in stdout.splitlines() if line.startswith("| ")]
    assert "| hung | cut short |" in stdout and "| torch-fallback | not started |" in stdout, (
        "\n".join(table) + "\n" + stderr[-3000:])
    # SIGINT first (the grader's own clean-up), then what a dead grader left reaped
    assert "stopped; left by the round and removed:" in stdout
    # where the cut-short entry was: its batch's lines, one JSON object each, as they came
    lines = [json.loads(line) for line in
             (tmp_path / "progress.jsonl").read_text().splitlines() if line.startswith("{")]
    said = [ev["message"] for ev in lines if "message" in ev]
    assert any(m.startswith("vector_add") and "entry" in m for m in said), said
