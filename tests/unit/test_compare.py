"""`grader compare`: one entry on two machines, portability per problem, hand-computed."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli.scoring import compare as compare_cmd
from grader.errors import UsageError
from grader.formats.problem import Weights
from grader.model.results import Environment, Report, SubmissionSummary, SuiteSummary, Summary
from grader.model.scores import ScoreCard
from grader.report.render import write_reports
from grader.scoring.across import compare, comparison_text
from grader.scoring.hardware import load_hardware
from grader.scoring.roofline import roofline_values
from grader.scoring.scores import ScoreInput, score
from grader.verdicts import Verdict

H200 = load_hardware("h200")


def card_for(s: dict[tuple[str, str], float]) -> ScoreCard:
    """A score card whose shapes score exactly `s` (roofline 1 µs, time 1 µs / S)."""
    roof = roofline_values(0.0, 1e-6 * 4.8e12, "bf16", H200)
    inputs = [ScoreInput(problem=p, shape=sh, phase="prefill" if "pre" in sh else "decode",
                         verdict=Verdict.PASSED if v > 0 else Verdict.INCORRECT,
                         measured_s=roof.t_s / v if v > 0 else None, roofline=roof)
              for (p, sh), v in s.items()]
    return score(inputs, Weights(version="w1"))


def report(hardware: str, s: dict[tuple[str, str], float], *, sha: str = "a" * 64,
           suite: str = "demo", policy: str = "triton") -> Report:
    return Report(
        created_at=datetime(2026, 11, 29, tzinfo=UTC),
        submission=SubmissionSummary(name="entry", suite=suite, dsl="triton", bundle_sha256=sha),
        suite=SuiteSummary(id=suite, version="1", weights_version="w1"),
        environment=Environment(grader_version="0", hardware=hardware, device=hardware,
                                is_performance=True, policy=policy, seed_commitment="0" * 64),
        problems=[], summary=Summary(problems=0, shapes=0, verdicts={}, correct_shapes=0,
                                     passed_shapes=0, correctness_rate=0, dsl_adoption_rate=0,
                                     illusion_gap=0),
        scores=card_for(s),
    )


# On A: matmul S_i = 0.8, rmsnorm 0.4, add 0 (failed).  S_agg (uniform) = 1.2 / 3 = 0.4.
# On B: matmul 0.4, rmsnorm 0.5, add 0.3.               S_agg = 1.2 / 3 = 0.4.
A = {("matmul", "pre"): 0.8, ("rmsnorm", "pre"): 0.4, ("add", "dec"): 0.0}
B = {("matmul", "pre"): 0.4, ("rmsnorm", "pre"): 0.5, ("add", "dec"): 0.3}


def test_portability_per_problem_and_s_agg_ratio() -> None:
    cmp = compare([report("h100-sxm", A), report("h200", B)])
    assert cmp.baseline == "h100-sxm" and [r.label for r in cmp.runs] == ["h100-sxm", "h200"]
    rows = {r.problem: r for r in cmp.problems}
    assert rows["matmul"].s == pytest.approx([0.8, 0.4])
    assert rows["matmul"].portability == pytest.approx([1.0, 0.5])
    assert rows["rmsnorm"].portability == pytest.approx([1.0, 1.25])
    assert rows["add"].portability == [None, None]  # 0 on A: nothing to keep
    assert cmp.s_agg_ratio == pytest.approx([1.0, 1.0])
    # prefill: A (0.8 + 0.4) / 2 = 0.6, B (0.4 + 0.5) / 2 = 0.45 -> 0.75; decode: A 0 -> none.
    assert cmp.s_agg_ratio_by_phase["prefill"] == pytest.approx([1.0, 0.75])
    assert cmp.s_agg_ratio_by_phase["decode"] == [None, None]
    assert not cmp.mixed and cmp.notes == []
    text = comparison_text(cmp)
    assert "portability" in text and "0.500" in text and "1.250" in text


def test_three_machines_and_repeated_hardware() -> None:
    cmp = compare([report("h200", A), report("h200", B), report("b200", A)])
    assert [r.label for r in cmp.runs] == ["h200#1", "h200#2", "b200"]
    assert {r.problem: r.portability for r in cmp.problems}["matmul"] == pytest.approx(
        [1.0, 0.5, 1.0])
    assert any("run-to-run noise" in n for n in cmp.notes)


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"sha": "b" * 64}, "bundle_sha256"), ({"suite": "other"}, "suite"),
    ({"policy": "lenient"}, "policy"),
])
def test_refuses_different_entries_unless_allowed(kwargs: dict[str, str], field: str) -> None:
    reports = [report("h100-sxm", A), report("h200", B, **kwargs)]
    with pytest.raises(UsageError, match=field):
        compare(reports)
    cmp = compare(reports, allow_mixed=True)
    assert cmp.mixed and field in cmp.notes[-1] and len(cmp.context[field]) == 2


def test_refuses_different_weights_versions() -> None:
    other = report("h200", B)
    assert other.scores is not None
    other = other.model_copy(update={"scores": other.scores.model_copy(
        update={"weights_version": "w2"})})
    with pytest.raises(UsageError, match="weights_version"):
        compare([report("h100-sxm", A), other])


def test_needs_two_scored_reports() -> None:
    with pytest.raises(UsageError, match="at least two"):
        compare([report("h200", A)])
    with pytest.raises(UsageError, match="no scores"):
        compare([report("h200", A), report("b200", A).model_copy(update={"scores": None})])


def test_compare_command(tmp_path: Path) -> None:
    a = write_reports(report("h100-sxm", A), tmp_path / "a", ["json"])["json"]
    b = write_reports(report("h200", B), tmp_path / "b", ["json"])["json"]
    res = CliRunner().invoke(compare_cmd, [str(a), str(b), "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["baseline"] == "h100-sxm" and data["s_agg_ratio"] == pytest.approx([1.0, 1.0])
    res = CliRunner().invoke(compare_cmd, [str(a), str(b)], catch_exceptions=False)
    assert "S_i" in res.output and "matmul" in res.output
