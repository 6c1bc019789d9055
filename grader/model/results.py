"""The results every layer shares: a shape's and a problem's verdicts with their evidence
(comparisons, timings, traces, findings), and `Report`, the versioned record of one grading
run (`report.json`). The judge makes shape results, the run layer collects, checkpoints and
summarises them into a Report, scoring scores it (its ScoreCard, from grader/scoring/scores.py,
is the one type this module takes from another layer) and grader/report/ renders it; none of
those layers imports another to reach them.

Every string that came from the entry (its name, its errors, its kernel names) is hostile:
renderers must escape it.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from grader.formats.problem import Phase
from grader.formats.submission import AgentInfo
from grader.model.findings import Finding
from grader.model.scores import ScoreCard
from grader.verdicts import Verdict


class Model(BaseModel):
    # No NaN or Infinity: JSON has neither, pydantic writes them as null, and a report with
    # a null where a number belongs could no longer be read back (issue 19). Values from the
    # entry are refused already when read (evidence.py); this refuses the host's own.
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class Timing(Model):
    """Device time of the entry's kernel for one shape, in microseconds."""

    median_us: float = Field(ge=0)
    iqr_us: float = Field(ge=0)
    cv: float = Field(ge=0)
    samples: int = Field(ge=1)
    # The samples' mean and 10%-trimmed mean, beside the median that is scored: what a
    # statistic that pays for work moved between calls would show (docs/benchmarks.md).
    mean_us: float | None = Field(default=None, ge=0)
    trimmed_mean_us: float | None = Field(default=None, ge=0)
    method: str  # e.g. "cuda-events"
    host_median_us: float | None = None  # with device-wide sync, host clock: shows hidden work
    loop_s: float | None = None  # wall time of the whole timed loop, as the harness saw it
    # The L2 flush before each call: at least twice the device's L2, as the harness read it.
    flush_bytes: int | None = None
    # In the median timed call, the share of its event-timed device time during which some
    # recorded kernel ran (time accounting, rule TM915).
    covered_share: float | None = Field(default=None, ge=0, le=1)


class KernelTime(Model):
    name: str
    kind: str  # own_triton | other_triton | vendor | torch_native | copy | unknown
    device_us: float = Field(ge=0)
    calls: int = Field(ge=1)


class Trace(Model):
    """What ran during the entry's kernel() calls (as reported from inside: evidence only)."""

    torch_ops: dict[str, int] = Field(default_factory=dict)
    triton_launches: dict[str, int] = Field(default_factory=dict)
    device_kernels: list[KernelTime] = Field(default_factory=list)
    dsl_share: float | None = Field(default=None, ge=0, le=1)
    # The same share over the timed calls alone: the calls that are scored.
    timed_dsl_share: float | None = Field(default=None, ge=0, le=1)


class Comparison(Model):
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    mismatched: int = 0
    total: int = 0
    atol: float
    rtol: float

    @field_validator("max_abs_err", "max_rel_err", mode="before")
    @classmethod
    def _unbounded_is_none(cls, v: object) -> object:
        """An error the host cannot state as a number (the reference's own Inf against a finite
        output) is recorded as unknown, not written as an Infinity no reader accepts."""
        return None if isinstance(v, float) and not math.isfinite(v) else v


class ShapeResult(Model):
    id: str
    phase: Phase
    smoke: bool
    params: dict[str, int | float | bool | str | list[int | float | bool | str]]
    verdict: Verdict
    detail: str = ""  # why this verdict, in a sentence
    error_excerpt: str | None = None
    comparisons: list[Comparison] = Field(default_factory=list)  # one per seed
    timing: Timing | None = None
    reference_timing: Timing | None = None  # the reference, timed the same way
    trace: Trace | None = None
    findings: list[Finding] = Field(default_factory=list)  # dynamic findings for this shape


class ProblemResult(Model):
    id: str
    operator: str
    verdict: Verdict  # the worst of its shapes' verdicts
    detail: str = ""
    kernel_file: str | None = None
    shapes: list[ShapeResult] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)  # static findings for the file
    image: str | None = None
    stderr_excerpt: str | None = None
    wall_s: float | None = None
    # Where the wall time went, measured on the host: image, reference, entry (container
    # start to exit), and the entry's import as it reported it.
    phases_s: dict[str, float] = Field(default_factory=dict)


SCHEMA_VERSION: Literal["1"] = "1"


class SubmissionSummary(Model):
    name: str
    suite: str
    dsl: str
    agent: AgentInfo | None = None
    bundle_sha256: str


class SuiteSummary(Model):
    id: str
    version: str
    weights_version: str


class Environment(Model):
    grader_version: str
    hardware: str  # hardware profile name
    device: str  # what the run actually used, e.g. "cpu (triton interpreter)"
    is_performance: bool  # False on the CPU interpreter: timings are not performance numbers
    policy: str
    images: dict[str, str] = Field(default_factory=dict)  # role/problem -> image id
    seed_commitment: str  # sha256 of the run's secret seed, revealed only to the organiser
    docker: str | None = None


ShapesGraded = Literal["all", "smoke", "scored", "public"]


class Summary(Model):
    problems: int
    shapes: int
    verdicts: dict[Verdict, int]
    correct_shapes: int  # passed or fallback: the entry's outputs were right
    passed_shapes: int  # correct *and* native
    correctness_rate: float = Field(ge=0, le=1)
    dsl_adoption_rate: float = Field(ge=0, le=1)
    illusion_gap: float = Field(ge=0, le=1)
    # Which shapes of the graded problems were graded (issue 34: on a CPU `--shapes auto`
    # grades the smoke shapes only, and a `passed` read as every shape's): all of them; the
    # smoke or the scored ones only, `ungraded_shapes` left out; or, in a practice run, the
    # public ones (how many are hidden is not said).
    shapes_graded: ShapesGraded = "all"
    ungraded_shapes: int = Field(default=0, ge=0)

    @property
    def coverage(self) -> str:
        """`shapes_graded` in words, for every report format and leaderboard."""
        if self.shapes_graded == "all":
            return "all shapes"
        if self.shapes_graded == "public":
            return "public shapes only"
        n = self.ungraded_shapes
        return (f"{self.shapes_graded} shapes only ({n} {'shape' if n == 1 else 'shapes'} "
                "not graded)")


class Report(Model):
    schema_version: Literal["1"] = SCHEMA_VERSION
    created_at: datetime
    submission: SubmissionSummary
    suite: SuiteSummary
    environment: Environment
    problems: list[ProblemResult]
    summary: Summary
    # The grading's wall time (all problems and workers; problems' walls overlap when their
    # containers start beside the problem before: grader/grading/worker.py)
    wall_s: float | None = None
    scores: ScoreCard | None = None  # roofline scores (grader/scoring); see environment.hardware
