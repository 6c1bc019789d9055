"""The CI recipe: the workflow we ship is pinned, least-privilege and linted, and the local
script runs the same commands (issue 24)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from grader.paths import REPO

WORKFLOWS = REPO / ".github" / "workflows"
WORKFLOW = WORKFLOWS / "grade-kernels.yml"
SCRIPT = REPO / "ci" / "run-workflow-locally.sh"
DOCS = REPO / "docs" / "ci.md"
GRADER_LINE = re.compile(r'^\s*("\$GRADER" .*)$', re.M)
# Each grader step opens with this line: workflow commands stay off while grader's output
# (which quotes entry text) is in the log.
STOP_COMMANDS = ('stop=$(cat /proc/sys/kernel/random/uuid); echo "::stop-commands::$stop"; '
                 "trap 'echo \"::$stop::\"' EXIT")
PINNED = re.compile(r"^[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}$")
# The zizmor findings we suppress on purpose. Each has its reason on the ignore comment and a
# section of docs/ci.md; a new kind of suppression must be added here, deliberately.
SUPPRESSED = {"dangerous-triggers", "self-hosted-runner"}
# The steps of the grade job that the local script runs too (the rest need GitHub).
LOCAL_STEPS = ("Static analysis (SARIF)", "Grade on the GPU", "Job summary",
               "Keep the seed secret on the runner")


def _workflow() -> dict[str, Any]:
    yaml = pytest.importorskip("yaml")
    data = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(data, dict)
    return data


def _job(data: dict[str, Any], name: str = "grade") -> dict[str, Any]:
    job: dict[str, Any] = data["jobs"][name]
    return job


def _steps(data: dict[str, Any], job: str = "grade") -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in _job(data, job)["steps"]}


def _run_lines(data: dict[str, Any]) -> list[str]:
    runs = "\n".join(s["run"] for s in _job(data)["steps"] if "run" in s)
    return [line.rstrip() for line in GRADER_LINE.findall(runs)]


def _zizmor() -> str:
    # Installed by the dev extra (scripts/setup.sh); next to this interpreter in a venv.
    found = shutil.which("zizmor") or shutil.which("zizmor", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail("zizmor is not installed: pip install -e '.[dev]' (scripts/setup.sh does)")
    return found


def _zizmor_findings(*extra: str) -> list[dict[str, Any]]:
    """zizmor over every workflow and action in this checkout: offline, at its strictest
    persona, with no configuration file (a suppression can only be an inline comment)."""
    res = subprocess.run(
        [_zizmor(), "--offline", "--no-config", "--persona", "auditor", "--format", "json",
         "--no-exit-codes", *extra, str(REPO)],
        capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    findings: list[dict[str, Any]] = json.loads(res.stdout)
    return findings


# --- zizmor -------------------------------------------------------------------------------


def test_zizmor_reports_nothing() -> None:
    findings = _zizmor_findings()
    assert findings == [], "\n".join(
        f"{f['ident']}: {f['desc']} ({f['locations'][0]['symbolic']['key']})" for f in findings)


def test_every_suppression_is_deliberate_and_explained() -> None:
    findings = _zizmor_findings("--no-ignores")
    assert {f["ident"] for f in findings} == SUPPRESSED
    docs = DOCS.read_text()
    for f in findings:
        primary = next(loc for loc in f["locations"] if loc["symbolic"]["kind"] == "Primary")
        path = REPO / primary["symbolic"]["key"]["Local"]["verbatim_path"]
        row = primary["concrete"]["location"]["start_point"]["row"]
        line = path.read_text().splitlines()[row]
        comment = re.search(r"# zizmor: ignore\[([a-z-]+)\](.*)$", line)
        assert comment and comment.group(1) == f["ident"], line
        # The reason stands on the comment itself, and docs/ci.md says more.
        assert len(comment.group(2).split()) >= 5, f"no reason given: {line}"
        assert f"`{f['ident']}`" in docs, f"docs/ci.md does not explain {f['ident']}"


def test_zizmor_still_sees_an_unpinned_action(tmp_path: Path) -> None:
    """The gate is live: the same run over a moving tag finds it (so an empty list above is
    zizmor reading our file, not zizmor reading nothing)."""
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text(WORKFLOW.read_text().replace(
        "actions/upload-artifact@bbbca2ddaa5d8feaa63e36b76fdaad77386f024f # v7.0.0",
        "actions/upload-artifact@v7"))
    res = subprocess.run([_zizmor(), "--offline", "--no-config", "--format", "json",
                          "--no-exit-codes", str(bad)],
                         capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    assert [f["ident"] for f in json.loads(res.stdout)] == ["unpinned-uses"]


# --- the workflow's shape -----------------------------------------------------------------


def test_every_action_is_pinned_to_a_commit_with_its_release() -> None:
    for path in sorted(WORKFLOWS.glob("*.y*ml")):
        uses = re.findall(r"^\s*(?:-\s+)?uses:\s*(\S+)(.*)$", path.read_text(), re.M)
        assert uses, path
        for ref, rest in uses:
            assert PINNED.match(ref), f"{path.name}: {ref} is not pinned to a full commit hash"
            assert re.fullmatch(r"\s*# v\d+\.\d+\.\d+", rest), f"{ref}: no `# vX.Y.Z` comment"


def test_trigger_and_permissions_are_least_privilege() -> None:
    data = _workflow()
    on = data.get("on", data.get(True))  # YAML 1.1 reads a bare `on` key as true
    # The commands come from the base branch: a pull request cannot change what runs here.
    assert set(on) == {"pull_request_target"}
    assert data["permissions"] == {}  # nothing unless a job asks
    jobs = data["jobs"]
    assert set(jobs) == {"guard", "grade", "publish"}
    assert jobs["guard"]["permissions"] == {"actions": "read"}
    # The job that holds the pull request's files and the GPU can write nothing.
    assert jobs["grade"]["permissions"] == {"contents": "read"}
    assert jobs["publish"]["permissions"] == {
        "checks": "write", "security-events": "write", "actions": "read", "contents": "read"}
    writers = [name for name, job in jobs.items() if "write" in job["permissions"].values()]
    assert writers == ["publish"]
    # The writing job runs nothing of its own and never sees the pull request's files: it
    # downloads the grade job's reports and hands them to two reporters.
    publish = jobs["publish"]
    assert publish["needs"] == "grade" and "self-hosted" not in str(publish["runs-on"])
    assert all("run" not in s for s in publish["steps"])
    assert [s["uses"].split("@")[0] for s in publish["steps"]] == [
        "actions/download-artifact", "mikepenz/action-junit-report",
        "github/codeql-action/upload-sarif"]
    fetch = publish["steps"][0]["with"]
    assert fetch["artifact-ids"] == "${{ needs.grade.outputs.artifact-id }}"
    assert "!cancelled()" in publish["if"]  # a failing gate still shows why
    junit = _steps(data, "publish")["Test results"]["with"]
    assert junit["report_paths"].endswith("report.junit.xml") and junit["comment"] is False
    sarif = _steps(data, "publish")["Code scanning (SARIF)"]["with"]
    assert sarif["sarif_file"].endswith(".sarif")


def test_fork_pull_requests_wait_for_a_reviewer() -> None:
    data = _workflow()
    guard, grade = _job(data, "guard"), _job(data, "grade")
    assert grade["needs"] == "guard"
    assert grade["environment"] == "${{ needs.guard.outputs.environment }}"
    [pick] = guard["steps"]
    env = pick["env"]
    # The fork environment is the default; only the base repository's own branches get the
    # other one, and the fork one must have required reviewers or the job stops here.
    assert env["HEAD_REPO"] == "${{ github.event.pull_request.head.repo.full_name }}"
    assert pick["run"].startswith("name=$FORK_ENVIRONMENT\n")
    assert 'select(.type == "required_reviewers")' in pick["run"] and "exit 1" in pick["run"]
    docs = DOCS.read_text()
    assert env["FORK_ENVIRONMENT"] in docs and env["SAME_REPO_ENVIRONMENT"] in docs


def test_grade_job_runs_nothing_from_the_checkout() -> None:
    data = _workflow()
    job = _job(data)
    assert "self-hosted" in job["runs-on"] and "gpu" in job["runs-on"]
    steps = job["steps"]
    assert steps[0]["name"].startswith("Check the runner")
    assert "grader-ci-job" in steps[0]["run"] and ".ssh/id_*" in steps[0]["run"]
    # No git checkout at all (zizmor's unsafe-checkout, issue 34): GitHub's archive of the
    # head commit, pinned by its sha, of which only the two paths grader packs are unpacked.
    fetch = steps[1]
    assert fetch["name"].startswith("Fetch the pull request's submission files")
    assert "uses" not in fetch and not any("actions/checkout" in str(s) for s in steps)
    assert fetch["env"]["HEAD_SHA"] == "${{ github.event.pull_request.head.sha }}"
    script = fetch["run"]
    assert '/tarball/$HEAD_SHA"' in script and "--proto '=https'" in script
    [untar] = [line for line in script.splitlines() if line.startswith("tar ")]
    assert '-C "$SUBMISSION_DIR"' in untar and "--no-wildcards-match-slash" in untar
    assert untar.split("--no-wildcards-match-slash ")[1].split(" || ")[0] == \
        "'*/submission.toml' '*/kernels/*.py'"
    assert "--no-same-owner" in untar and "--no-same-permissions" in untar
    # The fetch writes the files and runs none of them; every later step only hands the
    # folder to grader.
    fetched = {"archive=\"$RUNNER_TEMP/pr.tar.gz\"", "curl", "rm", "tar", "if"}
    assert {line.split()[0] for line in script.splitlines()} <= fetched
    allowed = {'"$GRADER"', "rm", "if", "fi", "then", "else", "for", "done", "echo", "exit",
               "touch", "marker=\"$HOME/.grader-ci-job\"", "stop=$(cat"}
    for step in steps[2:] + steps[:1]:
        for line in step.get("run", "").splitlines():
            words = line.split()
            assert not words or words[0] in allowed, line
            # The checkout is an argument of grader, never a command, a source or a path
            # anything executes from.
            if "SUBMISSION_DIR" in line or "submission" in line:
                assert words[0] == '"$GRADER"', line
    assert not job["env"]["GRADER"].startswith(("./", job["env"]["SUBMISSION_DIR"]))
    # No secrets reach this job, in any form.
    assert "secrets." not in WORKFLOW.read_text()


def test_grader_steps_stop_workflow_commands() -> None:
    for step in _job(_workflow())["steps"]:
        if '"$GRADER"' in step.get("run", ""):
            assert step["run"].splitlines()[0] == STOP_COMMANDS, step["name"]


def test_workflow_runs_the_commands_the_issue_names() -> None:
    data = _workflow()
    job = _job(data)
    assert (job["env"]["GRADER_DEVICE"], job["env"]["GRADER_RUNTIME"]) == ("cuda", "host")
    subcommands = [line.split()[1] for line in _run_lines(data)]
    assert subcommands == ["check", "run"]
    run = _run_lines(data)[1]
    assert run.startswith('"$GRADER" run "$SUBMISSION_DIR" ')  # packed as bundle create does
    assert "--format json,html,md,junit" in run and '--fail-on "$FAIL_ON"' in run
    # A suite of your own: the administrator's folders, from a repository variable.
    assert job["env"]["GRADER_SUITES"] == "${{ vars.GRADER_SUITES }}"
    steps = _steps(data)
    summary = steps["Job summary"]["run"]
    assert "GITHUB_STEP_SUMMARY" in summary and "report.md" in summary
    publishing = [steps[n] for n in ("Grade on the GPU", "Job summary",
                                     "Keep the seed secret on the runner", "Keep the reports")]
    assert all("!cancelled()" in s["if"] for s in publishing)


def test_the_seed_secret_never_leaves_the_runner() -> None:
    data = _workflow()
    names = [s["name"] for s in _job(data)["steps"]]
    steps = _steps(data)
    assert names.index("Keep the seed secret on the runner") < names.index("Keep the reports")
    assert steps["Keep the seed secret on the runner"]["run"].strip() == \
        'rm -f "$REPORTS/seed.secret"'
    keep = steps["Keep the reports"]
    assert keep["uses"].startswith("actions/upload-artifact@") and keep["id"] == "keep"
    assert "!grader-reports/seed.secret" in keep["with"]["path"]
    assert "include-hidden-files" not in keep["with"]  # .checkpoint/ stays behind
    assert _job(data)["outputs"]["artifact-id"] == "${{ steps.keep.outputs.artifact-id }}"


# --- the local script ---------------------------------------------------------------------


def test_local_script_runs_the_same_commands() -> None:
    data = _workflow()
    script = SCRIPT.read_text()
    assert _run_lines(data) == [
        line.removesuffix(" || rc=$?").rstrip() for line in GRADER_LINE.findall(script)]
    # Every other line of those steps too (the stop line aside: it is for GitHub's log).
    script_lines = [line.removesuffix(" || rc=$?").rstrip() for line in script.splitlines()]
    steps = _steps(data)
    at = 0
    for name in LOCAL_STEPS:
        for line in steps[name]["run"].splitlines():
            if line and line != STOP_COMMANDS:
                assert line in script_lines[at:], f"{name}: {line}"
                at = script_lines.index(line, at)
    fail_on = re.search(r"FAIL_ON:-([a-z_,]+)\}", script)
    assert fail_on and fail_on.group(1) == _job(data)["env"]["FAIL_ON"]
    assert 'GRADER_DEVICE=${GRADER_DEVICE:-cpu}' in script
    assert Path(SCRIPT).stat().st_mode & 0o111  # executable


def test_fail_on_names_real_verdicts() -> None:
    from grader.verdicts import Verdict

    names = _job(_workflow())["env"]["FAIL_ON"].split(",")
    assert {Verdict(n) for n in names} == set(Verdict) - {Verdict.PASSED}
