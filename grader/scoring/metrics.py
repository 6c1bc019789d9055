"""Secondary metrics of a score card: speed-up over the reference, fast_p, the gate funnel,
scores per regime, and cost per solved problem (docs/scoring.md)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

from grader.model.scores import (
    REGIMES,
    Cost,
    FastP,
    GateFunnel,
    ProblemScore,
    Regime,
    RegimeScore,
    ShapeScore,
)
from grader.verdicts import NOT_JUDGED, Verdict

# The gates a shape passes, in order. A verdict says how far it got.
NOT_COMPILED = frozenset({Verdict.MISSING, Verdict.COMPILE_ERROR})
# Ran, but its output cannot be trusted: wrong, crashed, killed, or caught cheating.
NOT_CORRECT = frozenset({Verdict.INCORRECT, Verdict.RUNTIME_ERROR, Verdict.TIMEOUT,
                         Verdict.RESOURCE_LIMIT, Verdict.POLICY_VIOLATION, Verdict.TAMPERING})










def _valid(t: float | None) -> bool:
    return t is not None and math.isfinite(t) and t > 0


def speedup_geomean(shapes: Sequence[ShapeScore]) -> tuple[float | None, int]:
    """Geometric mean of reference_s / measured_s over scored, counted shapes with both times."""
    ups = [s.speedup for s in shapes if s.scored and s.speedup is not None and s.speedup > 0]
    if not ups:
        return None, 0
    return math.exp(sum(math.log(u) for u in ups) / len(ups)), len(ups)


def fast_p(shapes: Sequence[ShapeScore], ps: Iterable[float]) -> list[FastP]:
    """Share of scored shapes that count and beat the reference by more than p; empty when no
    shape has a reference time (then there is nothing to compare against)."""
    scored = [s for s in shapes if s.scored]
    if not any(s.speedup is not None for s in scored):
        return []
    return [FastP(p=p, shapes=len(scored),
                  share=sum(1 for s in scored if s.speedup is not None and s.speedup > p)
                  / len(scored)) for p in ps]


def funnel(shapes: Sequence[ShapeScore]) -> GateFunnel:
    graded = [s for s in shapes if s.verdict not in NOT_JUDGED]
    compiled = [s for s in graded if s.verdict not in NOT_COMPILED]
    correct = [s for s in compiled if s.verdict not in NOT_CORRECT]
    native = [s for s in correct if s.verdict == Verdict.PASSED]
    return GateFunnel(
        shapes=len(graded), compiled=len(compiled), correct=len(correct), native=len(native),
        timed=sum(1 for s in native if _valid(s.measured_s)),
        infra_errors=sum(1 for s in shapes if s.verdict in (Verdict.INFRA_ERROR,
                                                            Verdict.REFERENCE_ERROR)),
        unverified=sum(1 for s in shapes if s.verdict == Verdict.UNVERIFIED),
    )


def regime_scores(shapes: Sequence[ShapeScore],
                  median: Callable[[Sequence[float]], float | None]
                  ) -> dict[Regime, RegimeScore]:
    """Per regime (of the shapes that have a roofline): counts and the median S; launch only
    where the hardware profile knows its launch floor and a shape is below it."""
    out: dict[Regime, RegimeScore] = {}
    for regime in REGIMES:
        group = [s for s in shapes if s.scored and s.regime == regime]
        if regime == "launch" and not group:
            continue
        out[regime] = RegimeScore(shapes=len(group), counted=sum(1 for s in group if s.counted),
                                  s_median=median([s.s for s in group]))
    return out


def cost_per_solved(problems: Iterable[ProblemScore], tokens: int | None,
                    wall_s: float | None) -> Cost | None:
    """Agent tokens and wall time per solved problem; None when neither was given."""
    if tokens is None and wall_s is None:
        return None
    solved = sum(1 for p in problems if p.solved)
    return Cost(
        solved_problems=solved,
        tokens_per_solved=tokens / solved if tokens is not None and solved else None,
        wall_s_per_solved=wall_s / solved if wall_s is not None and solved else None,
    )
