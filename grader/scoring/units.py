"""The scored units: one shape's score and one problem's (scores.py computes them, metrics.py
summarises them, the report embeds them)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from grader.formats.problem import Phase
from grader.scoring._model import Frozen
from grader.scoring.roofline import Regime
from grader.verdicts import Verdict

Flag = Literal[
    "over_roofline",  # S > 1: faster than physically possible; a tampering candidate
    "invalid_timing",  # a counted shape timed at zero, negative, NaN or infinite seconds
    "missing_timing",  # a counted shape without a time: scores 0
    "no_roofline",  # a counted shape without a roofline: scores 0
    "infra_error",  # the grader failed on this shape; scores 0 until re-run
    "reference_error",  # the suite's reference failed on this shape; scores 0 until fixed
    "unverified",  # this host could not judge the shape (CPU interpreter); scores 0
]


class ShapeScore(Frozen):
    problem: str
    shape: str
    phase: Phase
    smoke: bool
    verdict: Verdict
    scored: bool  # enters S_i and S_agg (not smoke, or smoke with include_smoke)
    counted: bool  # its verdict counts (passed, or fallback under fallback_scores)
    s: float = Field(ge=0)
    t_roofline_s: float | None = None
    measured_s: float | None = None
    regime: Regime | None = None
    speedup: float | None = None  # reference_s / measured_s, when both are valid
    flags: list[Flag] = Field(default_factory=list)


class ProblemScore(Frozen):
    problem: str
    s: float | None  # median over scored shapes; None when it has none (e.g. all smoke)
    scored_shapes: int
    by_phase: dict[Phase, float | None]
    solved: bool  # every shape given (smoke included) has a counting verdict
