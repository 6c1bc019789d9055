"""Reports meant for publication (`--public`): what the entry printed is left out wherever it
could carry what the entry read.

Issue 18: an entry read a suite's hidden table from the host and printed it; its verdict was
`policy_violation`, but the report's stderr excerpt published the text, and in the CI recipe
that report is the pull request's job summary. An entry's stderr and error excerpts are kept in
report.json (the record); a public rendering shows them only where a participant needs them
to fix an honest mistake (compile and runtime errors), and never for an entry the policy or
the evidence caught (policy_violation, tampering), whatever verdict its other shapes got.
"""

from __future__ import annotations

from grader.detect.dynamic import verdict_for
from grader.model.findings import Finding
from grader.model.results import ProblemResult, Report, ShapeResult
from grader.verdicts import Verdict

# Verdicts whose excerpts a public report shows: the entry's own error, needed to fix it.
SHOWN = frozenset({Verdict.COMPILE_ERROR, Verdict.RUNTIME_ERROR, Verdict.UNVERIFIED})
# Verdicts (as given, or as the findings would force them) whose entry text is never shown.
NEVER = frozenset({Verdict.POLICY_VIOLATION, Verdict.TAMPERING})
NOTE = ("Entry output (stderr and error excerpts) is left out of this public report, except "
        "for compile and runtime errors of entries the policy did not flag; report.json keeps it.")


def _caught(verdict: Verdict, findings: list[Finding]) -> bool:
    return verdict in NEVER or verdict_for(findings) in NEVER


def problem_caught(problem: ProblemResult) -> bool:
    """The problem's entry was caught somewhere: its verdict, a shape's, or a finding (static
    findings can say `policy_violation` of an entry whose import then failed)."""
    return _caught(problem.verdict, problem.findings) or any(
        _caught(s.verdict, s.findings) for s in problem.shapes)


def _public_shape(shape: ShapeResult, caught: bool) -> ShapeResult:
    keep = shape.verdict in SHOWN and not caught
    return shape if keep else shape.model_copy(update={"error_excerpt": None})


def public_problem(problem: ProblemResult) -> ProblemResult:
    caught = problem_caught(problem)
    keep = problem.verdict in SHOWN and not caught
    return problem.model_copy(update={
        "shapes": [_public_shape(s, caught) for s in problem.shapes],
        "stderr_excerpt": problem.stderr_excerpt if keep else None})


def public_view(report: Report) -> Report:
    """`report` with the entry's output left out as the module says; everything else as is."""
    return report.model_copy(update={"problems": [public_problem(p) for p in report.problems]})
