"""Scoring a finished run: the physical floor, then the score card, into the report."""

from __future__ import annotations

from grader.model.findings import Finding, Layer, Severity
from grader.model.results import ProblemResult, Report, ShapeResult
from grader.model.scores import ScoreOptions
from grader.scoring.from_report import score_inputs
from grader.scoring.hardware import HardwareProfile, list_hardware
from grader.scoring.roofline import roofline
from grader.scoring.scores import score
from grader.suite.load import Suite
from grader.verdicts import Verdict, worst


def profile_for_device(device_name: str) -> str | None:
    """The hardware profile whose name the GPU's name contains (longest match), if any."""
    name = device_name.lower().replace(" ", "").replace("-", "")
    hits = [p.name for p in list_hardware()
            if p.name != "cpu-interpreter" and p.name.replace("-", "").split("sxm")[0] in name]
    return max(hits, key=len, default=None)


def _floor(shape: ShapeResult, t_roofline_s: float) -> ShapeResult:
    """A time under the roofline is physically impossible: the evidence was tampered with.
    Idempotent: a shape that already carries TM913 is returned as it is (issue 33: a practice
    run scored the report twice and carried TM913 twice)."""
    if (shape.timing is None or shape.timing.median_us * 1e-6 >= t_roofline_s
            or any(f.rule == "TM913" for f in shape.findings)):
        return shape
    finding = Finding(rule="TM913", severity=Severity.TAMPERING, layer=Layer.DYNAMIC,
                      message=f"measured {shape.timing.median_us:.2f} µs, below the roofline "
                              f"{t_roofline_s * 1e6:.2f} µs: faster than the hardware allows")
    return shape.model_copy(update={"verdict": Verdict.TAMPERING, "detail": finding.message,
                                    "findings": [*shape.findings, finding]})


def score_report(report: Report, suite: Suite, profile: HardwareProfile, *,
                 include_smoke: bool | None = None) -> Report:
    """The report with the physical floor applied and its score card; `include_smoke`
    (default: on a non-performance profile) scores smoke shapes too."""
    return with_score_card(apply_floor(report, suite, profile), suite, profile,
                           include_smoke=include_smoke)


def apply_floor(report: Report, suite: Suite, profile: HardwareProfile) -> Report:
    """The report with each time under its roofline judged tampering (TM913), on a
    performance profile; applying it again changes nothing."""
    problems: list[ProblemResult] = []
    for pr in report.problems:
        problem = suite.problems[pr.id].problem
        by_id = {s.id: s for s in problem.shapes}
        shapes = pr.shapes
        if profile.is_performance:
            shapes = [_floor(s, roofline(problem, by_id[s.id], profile).t_s) for s in shapes]
        problems.append(pr.model_copy(update={
            "shapes": shapes, "verdict": worst([s.verdict for s in shapes]) if shapes
            else pr.verdict}))
    return report.model_copy(update={"problems": problems})


def with_score_card(report: Report, suite: Suite, profile: HardwareProfile, *,
                    include_smoke: bool | None = None) -> Report:
    """The report with its score card under `suite.weights`, its verdicts as they are (the
    floor is apply_floor's)."""
    reference_s = {(p.id, s.id): s.reference_timing.median_us * 1e-6
                   for p in report.problems for s in p.shapes if s.reference_timing}
    inputs = score_inputs(report, {pid: b.problem for pid, b in suite.problems.items()}, profile,
                          reference_s=reference_s)
    agent = report.submission.agent
    card = score(inputs, suite.weights,
                 options=ScoreOptions(include_smoke=not profile.is_performance
                                      if include_smoke is None else include_smoke),
                 agent_tokens=agent.output_tokens if agent else None,
                 agent_wall_s=agent.wall_s if agent else None)
    return report.model_copy(update={"scores": card})
