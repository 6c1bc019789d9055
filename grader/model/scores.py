"""The score card as the report embeds it: each shape's and problem's score, the roofline it
was scored against, the secondary metrics and the card itself (grader/scoring/ computes
them; docs/scoring.md says how)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from grader.formats.problem import Phase
from grader.verdicts import Verdict


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


PeakDType = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8"]


PEAK_DTYPES: tuple[PeakDType, ...] = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8")


Regime = Literal["memory", "compute", "launch"]


REGIMES: tuple[Regime, ...] = ("memory", "compute", "launch")


Ceiling = Literal["datasheet", "measured"]


class Roofline(Frozen):
    hardware: str
    dtype: PeakDType  # the peak the FLOPs were charged to
    flops: float = Field(ge=0)
    bytes: float = Field(gt=0)
    peak_flops_per_s: float = Field(gt=0)
    bandwidth_bytes_per_s: float = Field(gt=0)
    flops_ceiling: Ceiling
    bandwidth_ceiling: Ceiling
    t_compute_s: float = Field(ge=0)
    t_memory_s: float = Field(gt=0)
    t_s: float = Field(gt=0)  # max of the two: the roofline time
    intensity: float = Field(ge=0)  # FLOP per byte
    ridge: float = Field(gt=0)  # peak / bandwidth: the intensity where the two limits meet
    regime: Regime


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


class FastP(Frozen):
    p: float
    share: float = Field(ge=0, le=1)  # of the scored shapes: counted and reference_s/t > p
    shapes: int  # the denominator: scored shapes


class GateFunnel(Frozen):
    """compile → correct → native → timed, over every shape given except those not judged:
    infra and reference errors (the grader's and the suite's failures are not the entry's)
    and unverified shapes (this host could not judge them)."""

    shapes: int
    compiled: int
    correct: int  # passed or fallback
    native: int  # passed
    timed: int  # passed with a valid time
    infra_errors: int  # infra and reference errors, left out of the funnel
    unverified: int = 0  # left out too: Triton's CPU interpreter could not run them

    def rate(self, gate: Literal["compiled", "correct", "native", "timed"]) -> float:
        return getattr(self, gate) / self.shapes if self.shapes else 0.0


class RegimeScore(Frozen):
    shapes: int  # scored shapes of this regime
    counted: int
    s_median: float | None


class Cost(Frozen):
    solved_problems: int
    tokens_per_solved: float | None  # None when nothing was solved or no count was given
    wall_s_per_solved: float | None


WeightsMode = Literal["per_problem", "per_shape", "mixed", "uniform"]


class ScoreOptions(Frozen):
    # Policy: fallback shapes (correct, but delegated to a library) score like passed ones.
    fallback_scores: bool = False
    # Score smoke shapes too (CI on the CPU interpreter). Weights then become uniform over
    # problems: weights.toml describes production shapes, not smoke ones.
    include_smoke: bool = False
    fast_p: tuple[float, ...] = (1.0, 2.0)


class ScoreCard(Frozen):
    options: ScoreOptions
    weights_version: str
    weights_mode: WeightsMode
    weights_normalised: bool = True  # S_agg divides by the sum of the weights it used
    weight_coverage: float = Field(ge=0, le=1)  # share of the total weight that was scorable
    s_agg: float | None
    s_agg_by_phase: dict[Phase, float | None]
    shapes: list[ShapeScore]
    problems: list[ProblemScore]
    speedup_geomean: float | None
    speedup_shapes: int
    fast_p: list[FastP]
    funnel: GateFunnel
    regimes: dict[Regime, RegimeScore]
    cost: Cost | None
    tampering_candidates: list[str]  # "problem/shape" with S > 1 or an impossible time
    notes: list[str] = Field(default_factory=list)
