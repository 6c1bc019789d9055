"""Checks on hostile cases beyond their verdicts: what they leave on the host afterwards.

tests/integration/test_cases.py grades every case of tests/cases/hostile/ and checks the
verdicts; this file grades a few of them again and looks at the host: no process left behind,
no mount or temporary folder left behind, no trusted file changed, and every report format
renders with the entry's hostile text made inert.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from grader.cli.selftest import grade_case
from grader.detect.detector import Detector
from grader.detect.policy import load_policy
from grader.intake.tools import create_bundle
from grader.paths import REPO
from grader.report.render import FORMATS, write_reports
from grader.results import Report
from grader.run.config import RunConfig
from grader.run.grading import Grader
from grader.verdicts import Verdict

pytestmark = pytest.mark.docker
HOSTILE = Path(__file__).resolve().parents[1] / "cases" / "hostile"


def _grade(name: str, engine, tmp_path: Path) -> Report:  # type: ignore[no-untyped-def]
    result = grade_case(engine, HOSTILE / name, tmp_path)
    assert result.leftovers == 0  # none of this run's containers is left
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


def _grader_leftovers() -> tuple[list[str], list[str]]:
    """Grader mounts and temporary folders that exist now."""
    mounts = [line for line in Path("/proc/mounts").read_text().splitlines()
              if "grader-out-" in line or "grader-in-" in line]
    tmp = Path(tempfile.gettempdir())
    dirs = sorted(str(p) for pat in ("grader-out-*", "grader-in-*", "grader-run-*")
                  for p in tmp.glob(pat))
    return mounts, dirs


def _digest(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(str(p).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def test_daemon_does_not_outlive_its_container(engine, runtime, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    report = _grade("double_fork_daemon", engine, tmp_path)
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


def test_hostile_text_is_inert_in_every_report(engine, runtime, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    report = _grade("error_message_markup", engine, tmp_path)
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
    cfg = RunConfig(bundle=bundle, out_dir=tmp_path / "out", problems=("vector_add",),
                    seeds=2, seed_secret=secret.hex())
    cfg = replace(cfg, base_entry_limits=replace(cfg.base_entry_limits, memory_bytes=2 << 30))
    grader = Grader(cfg, engine, Detector(policy=load_policy(cfg.policy)), lambda _m: None)
    report = grader.run()
    from grader.run.grading import derive_seed

    seeds = [str(derive_seed(secret, "vector_add", s.id, k))
             for s in report.problems[0].shapes for k in range(2)]
    text = report.model_dump_json()
    assert secret.decode() not in text and secret.hex() not in text
    import re

    assert not [s for s in seeds if re.search(rf"(?<![0-9.]){s}(?![0-9])", text)]
    assert report.problems[0].verdict == Verdict.POLICY_VIOLATION


@pytest.mark.parametrize("name", ["read_expected_beside_inputs", "read_reference_files"])
def test_searches_for_the_reference_find_nothing(name: str, engine, runtime, tmp_path: Path  # type: ignore[no-untyped-def]
                                                 ) -> None:
    """The verdict (policy_violation, for the file-system calls) does not show whether the
    search found anything: the entry prints BREACH when it does, and it must not have."""
    report = _grade(name, engine, tmp_path)
    problem = report.problems[0]
    assert problem.verdict == Verdict.POLICY_VIOLATION
    assert "BREACH" not in (problem.stderr_excerpt or "")
    assert all(s.verdict == Verdict.POLICY_VIOLATION for s in problem.shapes)
