"""The CI recipe: the workflow file parses, and the local script runs the same commands."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from grader.paths import REPO

WORKFLOW = REPO / ".github" / "workflows" / "grade-kernels.yml"
SCRIPT = REPO / "ci" / "run-workflow-locally.sh"
GRADER_LINE = re.compile(r'^\s*("\$GRADER" .*)$', re.M)


def _workflow() -> dict[str, Any]:
    yaml = pytest.importorskip("yaml")
    data = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(data, dict)
    return data


def _job(data: dict[str, Any]) -> dict[str, Any]:
    job: dict[str, Any] = data["jobs"]["grade"]
    return job


def _run_lines(data: dict[str, Any]) -> list[str]:
    runs = "\n".join(s["run"] for s in _job(data)["steps"] if "run" in s)
    return [line.rstrip() for line in GRADER_LINE.findall(runs)]


def test_workflow_parses_and_is_safe_by_construction() -> None:
    data = _workflow()
    on = data.get("on", data.get(True))  # YAML 1.1 reads a bare `on` key as true
    # The commands come from the base branch: a pull request cannot change what runs here.
    assert set(on) == {"pull_request_target"}
    job = _job(data)
    assert "self-hosted" in job["runs-on"] and "gpu" in job["runs-on"]
    assert data["permissions"] == {"contents": "read", "checks": "write",
                                   "security-events": "write", "actions": "read"}
    checkout = job["steps"][0]
    assert checkout["uses"].startswith("actions/checkout@")
    assert checkout["with"]["persist-credentials"] is False
    assert checkout["with"]["path"] == job["env"]["SUBMISSION_DIR"]
    # Every shell step calls only the runner's grader (never something from the checkout).
    for step in job["steps"]:
        for line in step.get("run", "").splitlines():
            words = line.split()
            assert not words or words[0] in ('"$GRADER"', "rm", "if"), line
    assert not job["env"]["GRADER"].startswith(("./", job["env"]["SUBMISSION_DIR"]))


def test_workflow_runs_the_commands_the_issue_names() -> None:
    data = _workflow()
    job = _job(data)
    assert (job["env"]["GRADER_DEVICE"], job["env"]["GRADER_RUNTIME"]) == ("cuda", "host")
    subcommands = [line.split()[1] for line in _run_lines(data)]
    assert subcommands == ["bundle", "check", "run"]
    run = _run_lines(data)[2]
    assert "--format json,html,md,junit" in run and '--fail-on "$FAIL_ON"' in run
    uses = {s["uses"].split("@")[0]: s for s in job["steps"] if "uses" in s}
    assert {"actions/checkout", "mikepenz/action-junit-report", "github/codeql-action/upload-sarif",
            "actions/upload-artifact"} == set(uses)
    assert uses["github/codeql-action/upload-sarif"]["with"]["sarif_file"].endswith(".sarif")
    artifact = uses["actions/upload-artifact"]["with"]["path"]
    assert "!grader-reports/seed.secret" in artifact  # the seed secret stays on the runner
    summary = [s["run"] for s in job["steps"] if "GITHUB_STEP_SUMMARY" in s.get("run", "")]
    assert summary and "report.md" in summary[0]
    publishing = [s for s in job["steps"] if s.get("name") in (
        "Job summary", "Test results", "Code scanning (SARIF)", "Keep the reports")]
    assert len(publishing) == 4 and all("!cancelled()" in s["if"] for s in publishing)


def test_local_script_runs_the_same_commands() -> None:
    data = _workflow()
    script = SCRIPT.read_text()
    assert _run_lines(data) == [
        line.removesuffix(" || rc=$?").rstrip() for line in GRADER_LINE.findall(script)]
    fail_on = re.search(r"FAIL_ON:-([a-z_,]+)\}", script)
    assert fail_on and fail_on.group(1) == _job(data)["env"]["FAIL_ON"]
    assert 'GRADER_DEVICE=${GRADER_DEVICE:-cpu}' in script
    assert Path(SCRIPT).stat().st_mode & 0o111  # executable


def test_fail_on_names_real_verdicts() -> None:
    from grader.verdicts import Verdict

    names = _job(_workflow())["env"]["FAIL_ON"].split(",")
    assert {Verdict(n) for n in names} == set(Verdict) - {Verdict.PASSED}
