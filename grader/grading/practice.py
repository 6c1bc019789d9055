"""`grader run --practice`: an agent's practice run, on public shapes only (issue 23).

The same intake, images and sandbox as any run, with full diagnostics (errors, output
excerpts, findings, the fraction of roofline per shape), but nothing an agent must not see:
- only the public shapes are graded (a problem's smoke shapes: the release kit's public
  shapes, grader/organiser/release_kit.py), whatever the device; `--shapes all|scored` is refused;
- the score card is computed with uniform weights over those shapes, so that neither
  weights.toml (its version, its terms naming hidden shapes) nor a note about a hidden shape
  reaches the report;
- a problem with no public shape says so without counting its hidden ones.
Hidden shapes, their ids and params, `[hidden]` provenance and notes, the FLOP and byte
expressions and the weights never reach stdout, stderr or any report format
(tests/integration/test_practice.py checks each).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from grader.errors import UsageError
from grader.verdicts import Verdict

if TYPE_CHECKING:
    from grader.model.results import ProblemResult, Report
    from grader.scoring.hardware import HardwareProfile
    from grader.suite.load import Suite

WEIGHTS = "practice (uniform over public shapes)"
NO_PUBLIC_SHAPE = "no public shape to practise on: this problem is graded on hidden shapes only"


def practice_shapes(shapes: str) -> str:
    """The shape selection of a practice run: the public (smoke) shapes."""
    if shapes not in ("auto", "smoke"):
        raise UsageError(f"--practice grades public shapes only; --shapes {shapes} names "
                         "hidden ones", hint="leave --shapes out (or pass --shapes smoke)")
    return "smoke"


def _problem(p: ProblemResult) -> ProblemResult:
    if p.shapes or p.verdict is not Verdict.MISSING or p.kernel_file is None:
        return p
    return p.model_copy(update={"detail": NO_PUBLIC_SHAPE})


def practice_view(report: Report, suite: Suite, profile: HardwareProfile) -> Report:
    """`report` (graded: its physical floor applied) as a practice run shows it: its score card
    again, under uniform weights, no hidden shape counted, the suite's weights named as the
    practice's. Only the card is computed again: the floor is the Grader's, applied once
    (issue 33: scoring the report again here carried TM913 twice)."""
    from grader.scoring.apply import with_score_card

    uniform = suite.weights.model_copy(update={"version": WEIGHTS, "source": "",
                                               "weights": []})
    report = report.model_copy(update={
        "problems": [_problem(p) for p in report.problems],
        "summary": report.summary.model_copy(update={"shapes_graded": "public",
                                                     "ungraded_shapes": 0}),
        "suite": report.suite.model_copy(update={"weights_version": WEIGHTS})})
    return with_score_card(report, replace(suite, weights=uniform), profile, include_smoke=True)
