"""`grader run` end to end against the real engine: reports, image reuse, --fail-on, workers."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from grader.detect.detector import Detector
from grader.detect.policy import load_policy
from grader.grading.config import GradingOptions, Scheduling
from grader.grading.grader import Grader
from grader.grading.settings import GradingSettings
from grader.intake.tools import create_bundle
from grader.paths import REPO
from grader.verdicts import Verdict

pytestmark = pytest.mark.docker


def _grader(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grader", *args], capture_output=True,
                          text=True, cwd=REPO, check=False)


def test_cli_run_writes_reports_and_reuses_images(engine, runtime, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bundle = tmp_path / "fallback.tar"
    create_bundle(REPO / "examples" / "torch-fallback", bundle)
    out = tmp_path / "out"
    res = _grader("run", str(bundle), "-o", str(out), "--problem", "vector_add",
                  "--format", "json,html,md,junit", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    for name in ("report.json", "report.html", "report.md", "report.junit.xml", "seed.secret"):
        assert (out / name).is_file(), name
    rep = json.loads((out / "report.json").read_text())
    assert rep["problems"][0]["verdict"] == "fallback"
    assert rep["environment"]["is_performance"] is False
    assert (out / "seed.secret").stat().st_mode & 0o077 == 0
    # the same run again builds no image, and --fail-on turns the verdict into exit code 3
    before = {(i.tag, i.id, i.created) for i in engine.images()}
    res = _grader("run", str(bundle), "-o", str(out), "--problem", "vector_add",
                  "--fail-on", "fallback", cwd=tmp_path)
    assert res.returncode == 3, res.stderr
    assert "fallback" in res.stderr
    assert {(i.tag, i.id, i.created) for i in engine.images()} == before
    # re-rendering a saved report
    res = _grader("report", str(out / "report.json"), "--format", "md", "-o", str(tmp_path),
                  cwd=tmp_path)
    assert res.returncode == 0 and (tmp_path / "report.md").is_file()


def test_seed_secret_reproduces_the_inputs(engine, runtime, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bundle = tmp_path / "t.tar"
    create_bundle(REPO / "examples" / "triton", bundle)
    cfg = GradingOptions(bundle=bundle, out_dir=tmp_path, seed_secret=bytes(range(32)).hex(),
                         settings=GradingSettings(problems=("vector_add",)))
    detector = Detector(policy=load_policy("triton"))
    a = Grader(cfg, engine, detector, lambda _m: None).open_and_grade()
    b = Grader(cfg, engine, detector, lambda _m: None).open_and_grade()
    assert a.environment.seed_commitment == b.environment.seed_commitment
    errs = [[c.max_abs_err for c in s.comparisons] for p in (a, b) for s in p.problems[0].shapes]
    assert errs[0] == errs[1]


def test_problems_graded_by_two_workers_keep_their_order(engine, runtime, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bundle = tmp_path / "t.tar"
    create_bundle(REPO / "examples" / "triton", bundle)
    cfg = replace(GradingOptions(bundle=bundle, out_dir=tmp_path), scheduling=Scheduling(jobs=2))
    grader = Grader(cfg, engine, Detector(policy=load_policy("triton")), lambda _m: None)
    rep = grader.open_and_grade()
    assert [p.id for p in rep.problems] == ["vector_add", "rmsnorm", "matmul"]
    assert {p.verdict for p in rep.problems} == {Verdict.PASSED}
    # Where each problem's time went, for bench/overhead.py: the host's clocks and the harnesses'.
    for p in rep.problems:
        assert {"image", "reference", "entry", "judge", "entry.warm"} <= p.phases_s.keys()
        assert 0 <= p.phases_s["judge"] < (p.wall_s or 0)
        assert "reference_keep" not in p.phases_s  # only a round keeps references
