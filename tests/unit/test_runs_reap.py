"""What a run owns on the host (grader/sandbox/runs.py): its folder, its record, and reaping
what dead runs left (issue 19). No Docker: containers are counted through a stand-in of the
engine's reap; tests/integration/test_leftovers.py kills a real grader."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from grader.errors import InfraError
from grader.sandbox import runs
from grader.sandbox.capped import can_mount, capped_dir


@pytest.fixture(autouse=True)
def _tmp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def _dead_pid() -> int:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(proc.stdout)


def _run_dir(session: str, owner: dict[str, object] | None) -> Path:
    path = runs.runs_root() / session
    (path / "grader-in-x").mkdir(parents=True)
    (path / "grader-in-x" / "job.json").write_text("{}")
    if owner is not None:
        (path / runs.OWNER).write_text(json.dumps(owner))
    return path


def test_a_run_owns_its_folders_and_removes_them() -> None:
    with runs.owned_run("s1") as path:
        owner = json.loads((path / runs.OWNER).read_text())
        assert owner["pid"] == os.getpid() and owner["session"] == "s1"
        inner = runs.run_folder("grader-out-")
        assert inner.parent == path
        with capped_dir(1 << 20) as out:
            assert out.parent == path
    assert not path.exists()
    assert runs.run_folder("x").parent == Path(tempfile.gettempdir())  # no run open


def test_dead_runs_are_reaped_and_live_ones_kept() -> None:
    dead = _run_dir("dead", {"pid": _dead_pid(), "start": 1, "session": "dead"})
    reused = _run_dir("reused", {"pid": os.getpid(), "start": -5, "session": "reused"})
    alive = _run_dir("alive", {"pid": os.getpid(), "start": runs._start_ticks(os.getpid()),
                               "session": "alive"})
    young = _run_dir("young", None)  # being made: no record yet
    old = _run_dir("old", None)
    os.utime(old, (0, 0))
    asked: list[str] = []
    got = runs.reap_dead(lambda s: asked.append(s) or 2)
    assert sorted(asked) == ["dead", "old", "reused"]
    assert got.runs == 3 and got.containers == 6
    assert not dead.exists() and not reused.exists() and not old.exists()
    assert alive.exists() and young.exists()


def test_an_engine_that_fails_leaves_the_record_for_the_next_start() -> None:
    dead = _run_dir("dead", {"pid": _dead_pid(), "start": 1, "session": "dead"})

    def failing(session: str) -> int:
        raise InfraError("the Docker engine failed")

    assert runs.reap_dead(failing).runs == 0
    assert (dead / runs.OWNER).exists()
    assert runs.reap_dead(lambda s: 0).runs == 1 and not dead.exists()


@pytest.mark.skipif(not can_mount(), reason="mounting a tmpfs needs root")
def test_mounts_of_a_dead_run_are_undone() -> None:
    dead = _run_dir("dead", {"pid": _dead_pid(), "start": 1, "session": "dead"})
    point = dead / "grader-out-y"
    point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(point)], check=True)
    (point / "big").write_bytes(b"x" * 1000)
    assert str(point) in Path("/proc/self/mountinfo").read_text()
    got = runs.reap_dead(lambda s: 0)
    assert got.mounts == 1 and not dead.exists()
    assert str(point) not in Path("/proc/self/mountinfo").read_text()
