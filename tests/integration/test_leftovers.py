"""A grader killed by SIGKILL mid-problem leaves containers, tmpfs mounts and folders; the
next start removes them all (issue 19, grader/sandbox/runs.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.intake.tools import create_bundle
from grader.paths import REPO
from grader.sandbox.runs import OWNER, runs_root
from grader.sandbox.spec import SESSION_LABEL

pytestmark = pytest.mark.docker

SLEEPER = """import time


def kernel(*args):
    time.sleep(10 ** 6)
"""


def _submission(root: Path) -> Path:
    (root / "kernels").mkdir(parents=True)
    (root / "submission.toml").write_text(
        '[submission]\nname = "sleeper"\nsuite = "demo"\ndsl = "triton"\n\n'
        '[problems.vector_add]\nfile = "kernels/vector_add.py"\n\n'
        '[problems.rmsnorm]\nfile = "kernels/rmsnorm.py"\n')
    for pid in ("vector_add", "rmsnorm"):
        (root / "kernels" / f"{pid}.py").write_text(SLEEPER)
    return root


def _grader(bundle: Path, out: Path, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "grader", "run", str(bundle), "-o", str(out), "--seeds", "1",
         "--timeout", "300", *extra],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)  # its own process group, killed whole below


def _run_of(pid: int) -> Path | None:
    for path in runs_root().glob("*"):
        try:
            if json.loads((path / OWNER).read_text())["pid"] == pid:
                return path
        except (OSError, ValueError, KeyError):
            continue
    return None


def _mounts_under(path: Path) -> list[str]:
    return [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
            if line.split()[4].startswith(str(path) + "/")]


def test_sigkill_mid_problem_leaves_nothing_after_the_next_start(
        engine, runtime, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bundle = tmp_path / "sleeper.tar"
    create_bundle(_submission(tmp_path / "sub"), bundle)
    proc = _grader(bundle, tmp_path / "out", "--start-ahead", "on")
    run_dir: Path | None = None
    containers: list[object] = []
    try:
        deadline = time.monotonic() + 240
        # Mid-problem: the first problem's pair running, the next problem's standbys started.
        while time.monotonic() < deadline and proc.poll() is None:
            run_dir = run_dir or _run_of(proc.pid)
            if run_dir is not None:
                containers = engine.client.containers.list(
                    all=True, filters={"label": f"{SESSION_LABEL}={run_dir.name}"})
                if len(containers) >= 4:
                    break
            time.sleep(0.5)
        assert run_dir is not None and len(containers) >= 4, "the grader never got going"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    session = run_dir.name
    time.sleep(1)
    left = engine.client.containers.list(all=True,
                                         filters={"label": f"{SESSION_LABEL}={session}"})
    assert len(left) >= 4  # what issue 19 found: the run's containers outlive it...
    assert run_dir.is_dir()
    if os.geteuid() == 0:
        assert _mounts_under(run_dir)  # ...and its tmpfs mounts and folders

    # The next start: an honest grading, which first removes what the dead run left.
    honest = tmp_path / "honest.tar"
    create_bundle(REPO / "examples" / "triton", honest)
    nxt = _grader(honest, tmp_path / "out2", "--problem", "vector_add")
    assert nxt.wait(timeout=300) == 0
    assert engine.client.containers.list(
        all=True, filters={"label": f"{SESSION_LABEL}={session}"}) == []
    assert not run_dir.exists()
    assert _mounts_under(run_dir) == []
    assert _run_of(nxt.pid) is None  # and the honest run left nothing either
