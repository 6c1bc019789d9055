"""Scores: roofline attainment per shape, per problem and for the suite (docs/scoring.md).

- Per shape: `S = T_roofline / T_measured` when the shape counts (verdict passed; fallback too
  if the policy says so) and has a valid time and a roofline; 0 otherwise. S > 1 is physically
  impossible: it is flagged as a tampering candidate and left as it is, never capped.
- Per problem: `S_i` = the median of S over its scored shapes (non-smoke unless
  `include_smoke`); for an even count, the mean of the two middle values.
- Suite: `S_agg = Σ w·v / Σ w` over the weight terms of `weights.toml` (see `_terms`), overall
  and per phase.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import get_args

from grader.formats.problem import Phase, Weights
from grader.model.scores import (
    Flag,
    Frozen,
    ProblemScore,
    Roofline,
    ScoreCard,
    ScoreOptions,
    ShapeScore,
    WeightsMode,
)
from grader.scoring.metrics import cost_per_solved, fast_p, funnel, regime_scores, speedup_geomean
from grader.verdicts import Verdict

PHASES: tuple[Phase, ...] = get_args(Phase)



class ScoreInput(Frozen):
    """One graded (problem, shape): what scoring needs from the run."""

    problem: str
    shape: str
    phase: Phase
    smoke: bool = False
    verdict: Verdict
    measured_s: float | None = None  # the entry's median device time (may be hostile: checked)
    reference_s: float | None = None  # the reference's median time on the same device
    roofline: Roofline | None = None






def median(values: Sequence[float]) -> float | None:
    """The middle value; for an even count the mean of the two middle values; None if empty."""
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _valid_time(t: float | None) -> bool:
    return t is not None and math.isfinite(t) and t > 0


def score_shape(item: ScoreInput, options: ScoreOptions) -> ShapeScore:
    counted = item.verdict == Verdict.PASSED or (
        options.fallback_scores and item.verdict == Verdict.FALLBACK)
    flags: list[Flag] = []
    s = 0.0
    if item.verdict in (Verdict.INFRA_ERROR, Verdict.REFERENCE_ERROR, Verdict.UNVERIFIED):
        flags.append(item.verdict.value)  # type: ignore[arg-type]
    if counted:
        if item.measured_s is None:
            flags.append("missing_timing")
        elif not _valid_time(item.measured_s):
            flags.append("invalid_timing")
        elif item.roofline is None:
            flags.append("no_roofline")
        else:
            s = item.roofline.t_s / item.measured_s
            if s > 1:
                flags.append("over_roofline")
    speedup = None
    if counted and _valid_time(item.measured_s) and _valid_time(item.reference_s):
        speedup = item.reference_s / item.measured_s  # type: ignore[operator]
    return ShapeScore(
        problem=item.problem, shape=item.shape, phase=item.phase, smoke=item.smoke,
        verdict=item.verdict, scored=options.include_smoke or not item.smoke, counted=counted,
        s=s, t_roofline_s=item.roofline.t_s if item.roofline else None,
        measured_s=item.measured_s, regime=item.roofline.regime if item.roofline else None,
        speedup=speedup, flags=flags,
    )


def score_problem(problem: str, shapes: Sequence[ShapeScore]) -> ProblemScore:
    scored = [s for s in shapes if s.scored]
    return ProblemScore(
        problem=problem, s=median([s.s for s in scored]), scored_shapes=len(scored),
        by_phase={ph: median([s.s for s in scored if s.phase == ph]) for ph in PHASES},
        solved=bool(shapes) and all(s.counted for s in shapes),
    )


@dataclass(frozen=True)
class _Term:
    """One weight entry: a problem's median (shape None) or one shape's S."""

    weight: float
    problem: str
    shape: str | None


def _terms(weights: Weights, problems: Iterable[str], options: ScoreOptions
           ) -> tuple[list[_Term], WeightsMode]:
    """Every weight entry is one term of S_agg. A per-problem entry weighs the problem's median
    S_i; a per-shape entry weighs that shape's S directly. Both may appear (mode "mixed"): the
    terms simply add up. No weights, or a smoke run, weigh every problem equally."""
    if options.include_smoke or not weights.weights:
        return [_Term(1.0, p, None) for p in problems], "uniform"
    terms = [_Term(w.weight, w.problem, w.shape) for w in weights.weights]
    per_shape = {t.shape is not None for t in terms}
    mode: WeightsMode = ("mixed" if len(per_shape) == 2
                         else "per_shape" if per_shape == {True} else "per_problem")
    return terms, mode


def _aggregate(terms: Sequence[_Term], shapes: dict[tuple[str, str], ShapeScore],
               problems: dict[str, ProblemScore], phase: Phase | None
               ) -> tuple[float | None, float]:
    """(Σ w·v / Σ w over the terms with a value, Σ w of those terms)."""
    num = den = 0.0
    for t in terms:
        value: float | None = None
        if t.shape is None:
            p = problems.get(t.problem)
            value = None if p is None else (p.s if phase is None else p.by_phase[phase])
        else:
            sh = shapes.get((t.problem, t.shape))
            if sh is not None and sh.scored and (phase is None or sh.phase == phase):
                value = sh.s
        if value is not None:
            num += t.weight * value
            den += t.weight
    return (num / den if den > 0 else None), den


def score(inputs: Sequence[ScoreInput], weights: Weights, *,
          options: ScoreOptions | None = None, agent_tokens: int | None = None,
          agent_wall_s: float | None = None) -> ScoreCard:
    """The score card of one run: per shape, per problem, suite, and the secondary metrics."""
    options = options or ScoreOptions()
    shapes = [score_shape(i, options) for i in inputs]
    by_key = {(s.problem, s.shape): s for s in shapes}
    order = list(dict.fromkeys(s.problem for s in shapes))
    problems = {p: score_problem(p, [s for s in shapes if s.problem == p]) for p in order}
    terms, mode = _terms(weights, order, options)
    total = sum(t.weight for t in terms)
    s_agg, used = _aggregate(terms, by_key, problems, None)
    notes = []
    missing = [f"{t.problem}/{t.shape or '*'}" for t in terms
               if _aggregate([t], by_key, problems, None)[0] is None]
    if missing:
        notes.append("weighted but not scorable in this run (left out, the rest renormalised): "
                     + ", ".join(missing))
    if mode == "uniform":
        notes.append("every problem weighted equally ("
                     + ("smoke run" if options.include_smoke else "no weights given") + ")")
    if any("infra_error" in s.flags for s in shapes):
        notes.append("some shapes hit an infrastructure error and score 0: re-run them")
    if any("reference_error" in s.flags for s in shapes):
        notes.append("the suite's reference failed on some shapes, which score 0: the "
                     "organiser must fix it (grader suite check)")
    if any("unverified" in s.flags for s in shapes):
        notes.append("some shapes are unverified on this host (Triton's CPU interpreter "
                     "cannot run them) and score 0: grade them on a GPU")
    suspects = [f"{s.problem}/{s.shape}" for s in shapes
                if {"over_roofline", "invalid_timing"} & set(s.flags)]
    speedup, speedup_n = speedup_geomean(shapes)
    return ScoreCard(
        options=options, weights_version=weights.version, weights_mode=mode,
        weight_coverage=min(1.0, used / total) if total > 0 else 0.0,
        s_agg=s_agg,
        s_agg_by_phase={ph: _aggregate(terms, by_key, problems, ph)[0] for ph in PHASES},
        shapes=shapes, problems=list(problems.values()),
        speedup_geomean=speedup, speedup_shapes=speedup_n,
        fast_p=fast_p(shapes, options.fast_p), funnel=funnel(shapes),
        regimes=regime_scores(shapes, median),
        cost=cost_per_solved(problems.values(), agent_tokens, agent_wall_s),
        tampering_candidates=suspects, notes=notes,
    )
