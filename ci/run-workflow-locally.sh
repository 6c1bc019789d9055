#!/usr/bin/env bash
# Run the grading commands of .github/workflows/grade-kernels.yml here, as the runner would,
# with --device cpu (Triton's interpreter) so that no GPU is needed:
#
#   ci/run-workflow-locally.sh [SUBMISSION_DIR] [OUT_DIR] [SUITES_DIR]
#
# SUBMISSION_DIR defaults to examples/triton, OUT_DIR to build/ci-local. SUITES_DIR: a folder
# of suites of your own, or one suite's folder (the workflow's GRADER_SUITES, which this
# script also takes from the environment); the submission.toml names the suite. What only
# GitHub can do is replaced by a line saying what it would do: the guard job (environment and
# its reviewers), the runner check (ephemeral, no credentials), fetching the pull request's
# files, the workflow-command stop around each grader step, and the publish job (JUnit
# reporter, SARIF upload, artifact). The `"$GRADER" ...` lines are the workflow's own,
# character for character (tests/unit/test_ci_workflow.py checks it), so a change to one must
# be made to the other.
# Exit status, as the job's would be: 0; 3 when --fail-on trips; the grader's own code
# (docs/cli.md: 2 an option, 10-16 the submission, 20 the suite, 30 the host) when it could
# not grade, report.md, report.html and report.junit.xml then saying why; 1 when one of the
# files a job publishes is missing.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
SUBMISSION_DIR=$(cd "${1:-$repo/examples/triton}" && pwd)
out=${2:-$repo/build/ci-local}
if [ -n "${3:-}" ]; then GRADER_SUITES=$(cd "$3" && pwd)${GRADER_SUITES:+:$GRADER_SUITES}; fi
export GRADER_SUITES=${GRADER_SUITES:-}

# The job's environment (see the workflow's `env:`), with the CPU in place of the GPU.
export GRADER_DEVICE=${GRADER_DEVICE:-cpu}
export GRADER_RUNTIME=${GRADER_RUNTIME:-cpu}
export FAIL_ON=${FAIL_ON:-fallback,incorrect,compile_error,runtime_error,timeout,resource_limit,policy_violation,tampering,missing,unverified,reference_error,infra_error}
export SUBMISSION_DIR
# What the runner provides: a per-job temporary folder, the job summary file, a workspace.
rm -rf "$out"
mkdir -p "$out/runner-temp" "$out/workspace"
out=$(cd "$out" && pwd)
export RUNNER_TEMP=$out/runner-temp
export GITHUB_STEP_SUMMARY=$out/step-summary.md
export REPORTS=grader-reports
cd "$out/workspace"
if [ -z "${GRADER:-}" ]; then
  # This checkout's grader (not whichever `grader` is first on PATH), behind a one-line shim:
  # the workflow calls "$GRADER" as a single executable path.
  GRADER=$out/grader
  printf '#!/bin/sh\nPYTHONPATH=%q${PYTHONPATH:+:$PYTHONPATH} exec %q -m grader "$@"\n' \
    "$repo" "${PYTHON:-python3}" >"$GRADER"
  chmod +x "$GRADER"
fi
export GRADER
step() { printf '\n== %s\n' "$*" >&2; }

step "Guard rails, runner check (GitHub only): skipped here"
step "Fetch the pull request's submission files (as data only): $SUBMISSION_DIR"

# Each step runs whatever the one before did, as the workflow's do (`if: !cancelled()`).
rc=0
step "Static analysis (SARIF)"
rm -rf "$REPORTS" && mkdir -p "$REPORTS"
"$GRADER" check "$SUBMISSION_DIR" --sarif "$REPORTS/grader.sarif" || rc=$?

step "Grade ($GRADER_DEVICE${GRADER_SUITES:+, suites $GRADER_SUITES})"
"$GRADER" run "$SUBMISSION_DIR" -o "$REPORTS" --device "$GRADER_DEVICE" --runtime "$GRADER_RUNTIME" --format json,html,md,junit --public --fail-on "$FAIL_ON" --log-format json || rc=$?

# The steps below run whatever the grading step's outcome (`if: !cancelled()`).
step "Job summary"
if [ -f "$REPORTS/report.md" ]; then cat "$REPORTS/report.md" >> "$GITHUB_STEP_SUMMARY"; fi

step "Keep the seed secret on the runner"
rm -f "$REPORTS/seed.secret"

step "Artifact, then the publish job's test results and code scanning (GitHub only): the files"
for f in "$REPORTS/report.junit.xml" "$REPORTS/grader.sarif" "$REPORTS/report.html"; do
  if [ -f "$f" ]; then echo "ready: $out/workspace/$f"; else echo "MISSING: $f"; [ "$rc" -ne 0 ] || rc=1; fi
done
echo "summary: $GITHUB_STEP_SUMMARY"
exit "$rc"
