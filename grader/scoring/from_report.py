"""Score inputs from a saved report: the bridge that lets `grader rescore` re-score raw results.

Kept apart from scores.py so that the report model may embed a ScoreCard without an import
cycle (this module imports the report; scores.py does not).
"""

from __future__ import annotations

from collections.abc import Mapping

from grader.errors import ProblemError
from grader.formats.problem import Problem
from grader.model.results import Report
from grader.scoring.hardware import HardwareProfile
from grader.scoring.roofline import roofline
from grader.scoring.scores import ScoreInput


def score_inputs(report: Report, problems: Mapping[str, Problem], profile: HardwareProfile, *,
                 use_measured: bool = False,
                 reference_s: Mapping[tuple[str, str], float] | None = None) -> list[ScoreInput]:
    """One ScoreInput per shape result. The roofline comes from the *suite's* problem (its
    expressions are hidden data, never taken from the report); times are the report's medians."""
    out = []
    for pr in report.problems:
        if pr.id not in problems:
            raise ProblemError(f"report problem {pr.id!r} is not in the suite",
                               hint="score a report against the suite it was graded with")
        problem = problems[pr.id]
        shapes = {s.id: s for s in problem.shapes}
        for sr in pr.shapes:
            if sr.id not in shapes:
                raise ProblemError(f"report shape {pr.id}/{sr.id} is not in the suite's problem")
            out.append(ScoreInput(
                problem=pr.id, shape=sr.id, phase=sr.phase, smoke=sr.smoke, verdict=sr.verdict,
                measured_s=sr.timing.median_us * 1e-6 if sr.timing else None,
                reference_s=(reference_s or {}).get((pr.id, sr.id)),
                roofline=roofline(problem, shapes[sr.id], profile, use_measured=use_measured),
            ))
    return out
