"""The CI recipe end to end: the workflow's commands, run locally on the CPU (real Docker)."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from grader.paths import REPO
from tests.integration.own_suite import entry_for_mine, vector_add_suite

pytestmark = pytest.mark.docker
SCRIPT = REPO / "ci" / "run-workflow-locally.sh"


def _run(submission: Path, out: Path, *suites: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), str(submission), str(out), *map(str, suites)],
                          capture_output=True, text=True, check=False, timeout=1800)


def _own_suite(tmp_path: Path) -> tuple[Path, Path]:
    return vector_add_suite(tmp_path / "suites"), entry_for_mine(tmp_path, "entry")


def test_workflow_commands_grade_the_example(tmp_path: Path) -> None:
    res = _run(REPO / "examples" / "triton", tmp_path / "ci")
    assert res.returncode == 0, res.stdout + res.stderr
    reports = tmp_path / "ci" / "workspace" / "grader-reports"
    for name in ("report.json", "report.html", "report.md", "report.junit.xml", "grader.sarif"):
        assert (reports / name).stat().st_size > 0, name
    assert json.loads((reports / "report.json").read_text())["submission"]["name"]
    assert ET.parse(reports / "report.junit.xml").getroot().tag in ("testsuites", "testsuite")
    assert json.loads((reports / "grader.sarif").read_text())["version"] == "2.1.0"
    # The seed secret was removed before what would be the artifact upload.
    assert not (reports / "seed.secret").exists()
    summary = (tmp_path / "ci" / "step-summary.md").read_text()
    assert summary == (reports / "report.md").read_text()
    # --log-format json: every progress line on stderr is a JSON object.
    events = [json.loads(line) for line in res.stderr.splitlines() if line.startswith("{")]
    assert events[0]["event"] == "start" and events[-1]["event"] == "finish"


def test_gate_fails_the_job_and_still_publishes(tmp_path: Path) -> None:
    res = _run(REPO / "examples" / "torch-fallback", tmp_path / "ci")
    assert res.returncode == 3, res.stdout + res.stderr  # VerdictGate, from --fail-on
    assert "--fail-on" in res.stderr and "hint:" in res.stderr
    reports = tmp_path / "ci" / "workspace" / "grader-reports"
    assert (reports / "report.html").is_file() and (reports / "report.junit.xml").is_file()
    assert (tmp_path / "ci" / "step-summary.md").read_text().strip()


def test_a_suite_of_your_own_and_a_job_that_cannot_grade(tmp_path: Path) -> None:
    """Issue 34, friction 2: the recipe had no way to name a suite of one's own; the job
    failed with exit 20 and wrote no JUnit, HTML or summary."""
    suite, entry = _own_suite(tmp_path)
    res = _run(entry, tmp_path / "ci", suite)
    assert res.returncode == 0, res.stdout + res.stderr
    reports = tmp_path / "ci" / "workspace" / "grader-reports"
    assert json.loads((reports / "report.json").read_text())["suite"]["id"] == "mine"
    # Without the suite: the grader's own code, and every file a job publishes says why.
    res = _run(entry, tmp_path / "ci2")
    assert res.returncode == 20, res.stdout + res.stderr
    reports = tmp_path / "ci2" / "workspace" / "grader-reports"
    junit = ET.parse(reports / "report.junit.xml").getroot()
    assert junit.find(".//error") is not None and "not found" in ET.tostring(junit, "unicode")
    assert "not graded" in (reports / "report.html").read_text()
    summary = (tmp_path / "ci2" / "step-summary.md").read_text()
    assert "not graded" in summary and r"GRADER\_SUITES" in summary  # the hint, inert
