"""Checks on hostile cases beyond their verdicts: what they leave on the host afterwards.

tests/integration/test_cases.py grades every case of tests/cases/hostile/ and checks the
verdicts; this file looks at the host around a few of them: no process left behind, no mount
or temporary folder left behind, no trusted file changed, and every report format renders
with the entry's hostile text made inert. Checks made before a grading grade the case again
here; checks made after one take test_cases.py's grading (case_pool.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from case_pool import CasePool

from grader.cli.selftest import grade_case
from grader.detect.detector import Detector
from grader.detect.policy import load_policy
from grader.grading.config import GradingOptions
from grader.grading.grader import Grader
from grader.grading.settings import GradingSettings
from grader.intake.tools import create_bundle
from grader.model.results import Report
from grader.paths import REPO
from grader.report.render import FORMATS, write_reports
from grader.sandbox.runs import OWNER, runs_root
from grader.verdicts import Verdict

pytestmark = pytest.mark.docker
HOSTILE = Path(__file__).resolve().parents[1] / "cases" / "hostile"


def _grade(name: str, engine, tmp_path: Path) -> Report:  # type: ignore[no-untyped-def]
    result = grade_case(engine, HOSTILE / name, tmp_path)
    assert result.leftovers == 0  # none of this run's containers is left
    return result.report


def _graded(name: str, case_pool: CasePool | None, engine, tmp_path: Path  # type: ignore[no-untyped-def]
            ) -> Report:
    """The case's grading by test_cases.py's pool (the same grading, shared), or graded here
    when no case is selected; for checks made once the grading is over."""
    if case_pool is None:
        return _grade(name, engine, tmp_path)
    result = case_pool.result(HOSTILE / name, widen=False)
    assert result.leftovers == 0
    return result.report


def _host_cmdlines() -> list[bytes]:
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                out.append(Path(f"/proc/{p}/cmdline").read_bytes())
            except OSError:
                pass
    return out


def _another_live_run(mount: str) -> bool:
    """Whether the mount is in the folder of a run of another process that is still running
    (the cases graded meanwhile by tests/integration/case_pool.py, another grader on the
    host): not a leftover."""
    point, root = Path(mount.split()[1]), runs_root()
    if root not in point.parents:
        return False
    try:
        pid = json.loads((root / point.relative_to(root).parts[0] / OWNER).read_text())["pid"]
    except (OSError, ValueError, KeyError):
        return False
    return pid != os.getpid() and Path(f"/proc/{pid}").exists()


def _grader_leftovers() -> tuple[list[str], list[str]]:
    """Grader mounts (but those of other live runs) and temporary folders that exist now."""
    seen = [line for line in Path("/proc/mounts").read_text().splitlines()
            if ("grader-out-" in line or "grader-in-" in line) and not _another_live_run(line)]
    # A run that ended between the two reads took its owner file and its mounts with it.
    still = set(Path("/proc/mounts").read_text().splitlines())
    mounts = [line for line in seen if line in still]
    tmp = Path(tempfile.gettempdir())
    dirs = sorted(str(p) for pat in ("grader-out-*", "grader-in-*", "grader-run-*")
                  for p in tmp.glob(pat))
    return mounts, dirs


def _digest(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(str(p).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def test_daemon_does_not_outlive_its_container(case_pool, engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    report = _graded("double_fork_daemon", case_pool, engine, tmp_path)
    assert report.problems[0].verdict == Verdict.POLICY_VIOLATION
    left = [c for c in _host_cmdlines() if b"4242.4242" in c]
    assert not left, left


@pytest.mark.parametrize("name", ["fill_output_dir", "fifo_in_output", "symlink_dir_in_output",
                                  "subdir_in_output", "fill_scratch_then_compute"])
def test_nothing_left_mounted_or_on_disk(name: str, engine, runtime, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    before = _grader_leftovers()
    _grade(name, engine, tmp_path)
    after = _grader_leftovers()
    assert after == before or (not after[0] and set(after[1]) <= set(before[1])), after


@pytest.mark.parametrize("name", ["write_outside_scratch", "evasive_write_outside_scratch",
                                  "shadow_torch_modules"])
def test_trusted_files_unchanged(name: str, engine, runtime, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    trusted = [p for p in (REPO / "grader").rglob("*")
               if p.is_file() and "__pycache__" not in p.parts]
    trusted += [p for p in (REPO / "problem_bundles").rglob("*") if p.is_file()
                and "__pycache__" not in p.parts]
    kernel = HOSTILE / name / "submission" / "kernels" / "vector_add.py"
    before = _digest([*trusted, kernel])
    _grade(name, engine, tmp_path)
    assert _digest([*trusted, kernel]) == before


def test_hostile_text_is_inert_in_every_report(case_pool, engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    report = _graded("error_message_markup", case_pool, engine, tmp_path)
    assert report.problems[0].verdict == Verdict.RUNTIME_ERROR
    paths = write_reports(report, tmp_path / "reports", list(FORMATS))
    html = paths["html"].read_text(encoding="utf-8")
    assert "<script>" not in html and "onerror=" not in html.replace("onerror=alert", "")
    assert "\x1b" not in html and "\x00" not in html
    json.loads(paths["json"].read_text(encoding="utf-8"))
    junit = paths["junit"].read_text(encoding="utf-8")
    assert "\x1b" not in junit and "\x00" not in junit
    import xml.etree.ElementTree as ET

    ET.fromstring(junit)


def test_no_secret_reaches_the_entry(engine, runtime, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The run's secret and the derived seeds appear nowhere in what the entry could print."""
    secret = b"hostile-suite-secret-0123456789abcdef"
    case = HOSTILE / "read_job_for_seeds"
    bundle = tmp_path / "bundle.tar"
    create_bundle(case / "submission", bundle)
    cfg = GradingOptions(bundle=bundle, out_dir=tmp_path / "out", seed_secret=secret.hex(),
                         settings=GradingSettings(problems=("vector_add",), seeds_per_shape=2))
    cfg = replace(cfg, base_entry_limits=replace(cfg.base_entry_limits, memory_bytes=2 << 30))
    grader = Grader(cfg, engine, Detector(policy=load_policy(cfg.settings.policy)),
                    lambda _m: None)
    report = grader.open_and_grade()
    from grader.grading.seeds import derive_seed

    seeds = [str(derive_seed(secret, "vector_add", s.id, k))
             for s in report.problems[0].shapes for k in range(2)]
    text = report.model_dump_json()
    assert secret.decode() not in text and secret.hex() not in text
    import re

    assert not [s for s in seeds if re.search(rf"(?<![0-9.]){s}(?![0-9])", text)]
    assert report.problems[0].verdict == Verdict.POLICY_VIOLATION


@pytest.mark.parametrize("name", ["read_expected_beside_inputs", "read_reference_files"])
def test_searches_for_the_reference_find_nothing(name: str, case_pool, engine,  # type: ignore[no-untyped-def]
                                                 tmp_path: Path) -> None:
    """The verdict (policy_violation, for the file-system calls) does not show whether the
    search found anything: the entry prints BREACH when it does, and it must not have."""
    report = _graded(name, case_pool, engine, tmp_path)
    problem = report.problems[0]
    assert problem.verdict == Verdict.POLICY_VIOLATION
    assert "BREACH" not in (problem.stderr_excerpt or "")
    assert all(s.verdict == Verdict.POLICY_VIOLATION for s in problem.shapes)
