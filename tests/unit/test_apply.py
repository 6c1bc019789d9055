"""Scoring a finished report: the physical floor and the score card (grader/scoring/apply.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from grader.model.results import (
    Environment,
    ProblemResult,
    Report,
    ShapeResult,
    SubmissionSummary,
    SuiteSummary,
    Summary,
    Timing,
)
from grader.paths import PROBLEM_BUNDLES
from grader.scoring.apply import profile_for_device, score_report
from grader.scoring.hardware import load_hardware
from grader.scoring.roofline import roofline
from grader.suite.load import load_suite
from grader.verdicts import Verdict

SUITE = load_suite(PROBLEM_BUNDLES / "demo")


def _report(median_us: float) -> Report:
    matmul = SUITE.problems["matmul"].problem
    shape = next(s for s in matmul.shapes if s.id == "llama3_8b_oproj_prefill")
    sr = ShapeResult(id=shape.id, phase=shape.phase, smoke=False, params=shape.params,
                     verdict=Verdict.PASSED,
                     timing=Timing(median_us=median_us, iqr_us=1, cv=0.01, samples=20,
                                   method="cuda-events"))
    pr = ProblemResult(id="matmul", operator="gemm", verdict=Verdict.PASSED, shapes=[sr])
    return Report(
        created_at=datetime.now(UTC),
        submission=SubmissionSummary(name="x", suite="demo", dsl="triton", bundle_sha256="0"),
        suite=SuiteSummary(id="demo", version="1", weights_version="1"),
        environment=Environment(grader_version="0", hardware="h200", device="cuda: NVIDIA H200",
                                is_performance=True, policy="triton", seed_commitment="0"),
        problems=[pr],
        summary=Summary(problems=1, shapes=1, verdicts={Verdict.PASSED: 1}, correct_shapes=1,
                        passed_shapes=1, correctness_rate=1, dsl_adoption_rate=1,
                        illusion_gap=0))


def test_profiles_match_gpu_names() -> None:
    assert profile_for_device("NVIDIA H200") == "h200"
    assert profile_for_device("NVIDIA H20") == "h20"
    assert profile_for_device("NVIDIA H100 80GB HBM3") == "h100-sxm"
    assert profile_for_device("NVIDIA A100-SXM4-80GB") == "a100-sxm"
    assert profile_for_device("Some Unknown Accelerator") is None


def test_honest_time_scores_its_roofline_fraction() -> None:
    h200 = load_hardware("h200")
    shape = next(s for s in SUITE.problems["matmul"].problem.shapes
                 if s.id == "llama3_8b_oproj_prefill")
    t_roof = roofline(SUITE.problems["matmul"].problem, shape, h200).t_s
    scored = score_report(_report(228.99), SUITE, h200)
    assert scored.problems[0].verdict == Verdict.PASSED
    assert scored.scores is not None
    s = next(x for x in scored.scores.shapes if x.shape == shape.id)
    assert abs(s.s - t_roof / 228.99e-6) < 1e-9  # 2*4096^3 / 989.5e12 / 229 µs ≈ 0.607
    assert 0.60 < s.s < 0.61


def test_time_below_the_roofline_is_tampering() -> None:
    scored = score_report(_report(50.0), SUITE, load_hardware("h200"))  # 2.7 PFLOP/s: impossible
    shape = scored.problems[0].shapes[0]
    assert shape.verdict == Verdict.TAMPERING and scored.problems[0].verdict == Verdict.TAMPERING
    assert any(f.rule == "TM913" for f in shape.findings)


def test_cpu_interpreter_applies_no_floor() -> None:
    scored = score_report(_report(50.0), SUITE, load_hardware("cpu-interpreter"))
    assert scored.problems[0].verdict == Verdict.PASSED


def test_practice_view_carries_the_floor_once() -> None:
    """A practice run scored the report again (practice_view), and the floor added TM913 a
    second time (issue 33): the floor is applied once, however often the report is scored."""
    from grader.grading.practice import practice_view

    h200 = load_hardware("h200")
    viewed = practice_view(score_report(_report(50.0), SUITE, h200), SUITE, h200)
    shape = viewed.problems[0].shapes[0]
    assert [f.rule for f in shape.findings].count("TM913") == 1
    assert shape.verdict == Verdict.TAMPERING and viewed.scores is not None


def test_the_floor_is_idempotent() -> None:
    h200 = load_hardware("h200")
    once = score_report(_report(50.0), SUITE, h200)
    twice = score_report(once, SUITE, h200)
    assert twice.problems[0].shapes[0].findings == once.problems[0].shapes[0].findings
