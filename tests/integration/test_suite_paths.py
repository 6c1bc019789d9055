"""Issue 34, friction 1, replayed with the real engine on the CPU: a suite in a folder of
one's own, named once. `round commit --suite DIR`, then `grader round A.tar B.tar` with no
--suite nor --suites (the round grades both, exit 0, never exit 30 "fix the host"), then
`round verify`, `grader verify` of one of its reports with the bundle the participant
submitted, `grader run BUNDLE --suite DIR`, and `bundle check` under $GRADER_SUITES."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from grader.paths import REPO
from tests.integration.own_suite import entry_for_mine, vector_add_suite

pytestmark = pytest.mark.docker


def _grader(*args: str, env: dict[str, str] | None = None,
            cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k != "GRADER_SUITES"}
    return subprocess.run([sys.executable, "-m", "grader", *args], capture_output=True,
                          text=True, cwd=cwd, check=False, timeout=900,
                          env={**clean, "PYTHONPATH": str(REPO), **(env or {})})


def test_a_suite_of_your_own_named_once(engine, runtime,  # type: ignore[no-untyped-def]
                                        tmp_path: Path) -> None:
    suite = vector_add_suite(tmp_path / "my-suites")
    bundles = []
    for name, example in (("honest", "triton"), ("cheat", "torch-fallback")):
        tar = tmp_path / f"{name}.tar"
        entry = entry_for_mine(tmp_path, name, example)
        res = _grader("bundle", "create", str(entry), "-o", str(tar))
        assert res.returncode == 0, res.stderr
        bundles.append(tar)
    round_dir = tmp_path / "round"
    res = _grader("round", "commit", "--suite", str(suite), "-o", str(round_dir), "-q")
    assert res.returncode == 0, res.stderr
    # The command: every entry failed, exit 30, "hint: fix the host".
    res = _grader("round", *map(str, bundles), "-o", str(round_dir), "-q")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "fix the host" not in res.stderr
    honest = next(ln for ln in res.stdout.splitlines() if " honest " in ln)
    cheat = next(ln for ln in res.stdout.splitlines() if " cheat " in ln)
    assert "passed" in honest and "fallback" in cheat  # the verdicts, not only "graded"
    assert "smoke shapes only" in honest
    # Checking the round needs no --suites: the round recorded where its suite is.
    res = _grader("round", "verify", str(round_dir))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ok        suite digest matches" in res.stdout
    secret = (round_dir / "seed.secret").read_text().strip()
    # The participant re-checks with the bundle they submitted, repacked by another tool.
    submitted = tmp_path / "submitted.tar"
    with tarfile.open(bundles[0]) as tin, tarfile.open(submitted, "w:gz") as tout:
        for m in tin.getmembers():
            tout.addfile(m, tin.extractfile(m))
    res = _grader("verify", str(round_dir / "entries" / "honest" / "report.json"),
                  "--secret", secret, "--bundle", str(submitted), "-q")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "holds the files of the round's copy" in res.stdout and "reproduced:" in res.stdout
    # grader run BUNDLE --suite DIR, and the bundle checked under $GRADER_SUITES.
    res = _grader("run", str(bundles[0]), "--suite", str(suite), "-o", str(tmp_path / "out"),
                  "--format", "json")
    assert res.returncode == 0, res.stdout + res.stderr
    res = _grader("bundle", "check", str(bundles[0]), env={"GRADER_SUITES": str(suite.parent)})
    assert res.returncode == 0, res.stdout + res.stderr
    assert "not found" not in res.stdout + res.stderr
