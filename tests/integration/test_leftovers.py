"""A grader killed by SIGKILL mid-problem leaves containers, tmpfs mounts and folders; the
next start removes them all (issue 19, grader/sandbox/runs.py).

Both gradings here keep their runs under a TMPDIR of the test's own: any grader that starts
reaps the dead runs under its TMPDIR, and `make test` grades case folders in worker
processes beside this test (tests/integration/case_pool.py), whose starts could otherwise
reap the killed run before the test has looked at what it left: the likely cause of a CI
failure on 2026-12-03, 3 of its 4 containers left a second after the kill (not seen alone,
nor under a CPU load of its own)."""

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
from grader.sandbox.runs import OWNER, RUNS_DIR
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


def _grader(bundle: Path, out: Path, tmpdir: Path, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "grader", "run", str(bundle), "-o", str(out), "--seeds", "1",
         "--timeout", "300", *extra],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "TMPDIR": str(tmpdir)},
        start_new_session=True)  # its own process group, killed whole below


def _run_of(pid: int, tmpdir: Path) -> Path | None:
    for path in (tmpdir / RUNS_DIR).glob("*"):
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
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    proc = _grader(bundle, tmp_path / "out", tmpdir, "--start-ahead", "on")
    run_dir: Path | None = None
    containers: list[object] = []
    try:
        deadline = time.monotonic() + 240
        # Mid-problem: the first problem's pair running, the next problem's standbys started.
        while time.monotonic() < deadline and proc.poll() is None:
            run_dir = run_dir or _run_of(proc.pid, tmpdir)
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
    nxt = _grader(honest, tmp_path / "out2", tmpdir, "--problem", "vector_add")
    assert nxt.wait(timeout=300) == 0
    assert engine.client.containers.list(
        all=True, filters={"label": f"{SESSION_LABEL}={session}"}) == []
    assert not run_dir.exists()
    assert _mounts_under(run_dir) == []
    assert _run_of(nxt.pid, tmpdir) is None  # and the honest run left nothing either
