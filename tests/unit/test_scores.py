"""Scores, secondary metrics and leaderboards, against hand-computed cases."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path

import pytest

from grader.errors import ProblemError, UsageError
from grader.formats.problem import Weight, Weights
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
from grader.model.scores import Roofline, ScoreOptions
from grader.scoring.from_report import score_inputs
from grader.scoring.hardware import load_hardware
from grader.scoring.leaderboard import Scored, leaderboard
from grader.scoring.roofline import roofline, roofline_values
from grader.scoring.scores import ScoreInput, median, score, score_shape
from grader.suite.load import load_suite
from grader.verdicts import Verdict

DEMO = load_suite(Path(__file__).resolve().parents[2] / "problem_bundles" / "demo")
H200 = load_hardware("h200")
V = Verdict


def rl(t_s: float, regime: str = "memory") -> Roofline:
    """A roofline of `t_s` seconds on the H200, memory- or compute-bound."""
    if regime == "memory":
        return roofline_values(0.0, t_s * 4.8e12, "bf16", H200)
    return roofline_values(t_s * 989.5e12, 1.0, "bf16", H200)


def item(problem: str, shape: str, verdict: Verdict = V.PASSED, *, t: float | None = 1e-3,
         roof: float | None = 5e-4, phase: str = "prefill", smoke: bool = False,
         ref: float | None = None, regime: str = "memory") -> ScoreInput:
    return ScoreInput(problem=problem, shape=shape, phase=phase, smoke=smoke,  # type: ignore[arg-type]
                      verdict=verdict, measured_s=t, reference_s=ref,
                      roofline=rl(roof, regime) if roof is not None else None)


NO_WEIGHTS = Weights(version="w0")


# --- the median rule ---------------------------------------------------------------------


@pytest.mark.parametrize(("values", "expected"), [
    ([], None), ([0.3], 0.3), ([0.9, 0.1, 0.5], 0.5), ([0.4, 0.2], pytest.approx(0.3)),
    ([0.0, 0.8, 0.6, 0.0], pytest.approx(0.3)), ([1.0, 0.0, 0.0, 0.0, 1.0], 0.0),
])
def test_median(values: list[float], expected: float | None) -> None:
    assert median(values) == expected


# --- per shape ---------------------------------------------------------------------------


def test_passed_shape_scores_roofline_over_measured() -> None:
    s = score_shape(item("mm", "a", t=2e-4, roof=1.38897e-4, regime="compute"), ScoreOptions())
    assert s.s == pytest.approx(0.694485) and s.flags == [] and s.regime == "compute"
    assert s.counted and s.scored


@pytest.mark.parametrize("verdict", [v for v in Verdict if v != V.PASSED])
def test_every_other_verdict_scores_zero(verdict: Verdict) -> None:
    s = score_shape(item("p", "a", verdict, t=1e-4), ScoreOptions())
    assert s.s == 0.0 and not s.counted


def test_fallback_scores_only_when_the_policy_says_so() -> None:
    fb = item("p", "a", V.FALLBACK, t=1e-3, roof=5e-4)
    assert score_shape(fb, ScoreOptions()).s == 0.0
    assert score_shape(fb, ScoreOptions(fallback_scores=True)).s == pytest.approx(0.5)


@pytest.mark.parametrize(("t", "flag"), [
    (0.0, "invalid_timing"), (-1e-3, "invalid_timing"), (math.nan, "invalid_timing"),
    (math.inf, "invalid_timing"), (None, "missing_timing"),
])
def test_bad_times_score_zero_and_are_flagged(t: float | None, flag: str) -> None:
    s = score_shape(item("p", "a", t=t), ScoreOptions())
    assert s.s == 0.0 and s.flags == [flag]


def test_over_roofline_is_flagged_not_capped() -> None:
    card = score([item("p", "a", t=1e-4, roof=5e-4)], NO_WEIGHTS)
    assert card.shapes[0].s == pytest.approx(5.0)
    assert card.shapes[0].flags == ["over_roofline"]
    assert card.tampering_candidates == ["p/a"]
    assert card.s_agg == pytest.approx(5.0)


def test_zero_time_is_a_tampering_candidate_too() -> None:
    assert score([item("p", "a", t=0.0)], NO_WEIGHTS).tampering_candidates == ["p/a"]


def test_no_roofline_scores_zero() -> None:
    assert score_shape(item("p", "a", roof=None), ScoreOptions()).flags == ["no_roofline"]


def test_infra_error_is_flagged_and_noted() -> None:
    card = score([item("p", "a", V.INFRA_ERROR)], NO_WEIGHTS)
    assert card.shapes[0].flags == ["infra_error"] and card.shapes[0].s == 0
    assert any("infrastructure" in n for n in card.notes)
    assert card.funnel.infra_errors == 1 and card.funnel.shapes == 0


# --- per problem and suite: the demo suite on the H200, by hand ---------------------------


def demo_inputs() -> list[ScoreInput]:
    times = {  # (problem, shape): (verdict, measured seconds)
        ("matmul", "smoke_64x48x80"): (V.PASSED, 3e-6),
        ("matmul", "llama3_8b_oproj_prefill"): (V.PASSED, 200e-6),
        ("matmul", "llama3_8b_up_decode"): (V.PASSED, 40e-6),
        ("rmsnorm", "llama3_8b_prefill"): (V.PASSED, 10e-6),
        ("rmsnorm", "llama3_8b_decode"): (V.PASSED, 5e-6),
        ("vector_add", "residual_prefill"): (V.PASSED, 25e-6),
        ("vector_add", "residual_decode"): (V.FALLBACK, 1e-6),
    }
    out = []
    for (pid, sid), (verdict, t) in times.items():
        problem = DEMO.problems[pid].problem
        shape = next(s for s in problem.shapes if s.id == sid)
        out.append(ScoreInput(problem=pid, shape=sid, phase=shape.phase, smoke=shape.smoke,
                              verdict=verdict, measured_s=t, reference_s=t * 2,
                              roofline=roofline(problem, shape, H200)))
    return out


def test_demo_suite_by_hand() -> None:
    card = score(demo_inputs(), DEMO.weights)
    s = {sh.shape: sh.s for sh in card.shapes}
    assert s["llama3_8b_oproj_prefill"] == pytest.approx(2 * 4096**3 / 989.5e12 / 200e-6)  # 0.694
    assert s["llama3_8b_up_decode"] == pytest.approx(117735424 / 4.8e12 / 40e-6)  # 0.613
    assert s["llama3_8b_prefill"] == pytest.approx(33562624 / 4.8e12 / 10e-6)  # 0.699
    assert s["llama3_8b_decode"] == pytest.approx(1056768 / 4.8e12 / 5e-6)  # 0.044
    assert s["residual_prefill"] == pytest.approx(100663296 / 4.8e12 / 25e-6)  # 0.839
    assert s["residual_decode"] == 0.0  # fallback
    problems = {p.problem: p for p in card.problems}
    # Two scored shapes each: S_i is the mean of the two middle (here: only) values.
    assert problems["matmul"].s == pytest.approx(
        (s["llama3_8b_oproj_prefill"] + s["llama3_8b_up_decode"]) / 2)
    assert problems["matmul"].scored_shapes == 2  # the smoke shape is not scored
    assert problems["vector_add"].s == pytest.approx(s["residual_prefill"] / 2)
    assert problems["matmul"].by_phase == {
        "prefill": pytest.approx(s["llama3_8b_oproj_prefill"]),
        "decode": pytest.approx(s["llama3_8b_up_decode"])}
    # Per-shape weights (demo weights.toml), summing to 1.
    assert card.weights_mode == "per_shape" and card.weight_coverage == pytest.approx(1.0)
    prefill = (0.45 * s["llama3_8b_oproj_prefill"] + 0.08 * s["llama3_8b_prefill"]
               + 0.12 * s["residual_prefill"])
    decode = 0.25 * s["llama3_8b_up_decode"] + 0.04 * s["llama3_8b_decode"] + 0.06 * 0.0
    assert card.s_agg == pytest.approx(prefill + decode)
    assert card.s_agg == pytest.approx(0.6242, abs=1e-4)
    assert card.s_agg_by_phase["prefill"] == pytest.approx(prefill / 0.65)
    assert card.s_agg_by_phase["decode"] == pytest.approx(decode / 0.35)
    assert card.tampering_candidates == [] and card.weights_normalised
    assert not problems["vector_add"].solved and problems["matmul"].solved


def test_demo_regimes_speedup_fast_p_and_funnel() -> None:
    card = score(demo_inputs(), DEMO.weights)
    # Only the matmul prefill shape is compute-bound on the H200; the two small decode shapes
    # of vector_add and rmsnorm have rooflines under its 4.3 µs launch floor.
    regimes = {k: (r.shapes, r.counted) for k, r in card.regimes.items()}
    assert regimes == {"compute": (1, 1), "memory": (3, 3), "launch": (2, 1)}
    assert card.regimes["compute"].s_median == pytest.approx(0.694, abs=1e-3)
    # reference = 2 x measured everywhere: the geometric mean over the 5 counted shapes is 2.
    assert card.speedup_geomean == pytest.approx(2.0) and card.speedup_shapes == 5
    fast = {f.p: f.share for f in card.fast_p}
    assert fast == {1.0: pytest.approx(5 / 6), 2.0: 0.0}  # "faster by more than p"
    f = card.funnel
    assert (f.shapes, f.compiled, f.correct, f.native, f.timed) == (7, 7, 7, 6, 6)
    assert f.rate("native") == pytest.approx(6 / 7)


def test_json_round_trip() -> None:
    card = score(demo_inputs(), DEMO.weights, agent_tokens=10, agent_wall_s=1.0)
    assert type(card).model_validate_json(card.model_dump_json()) == card


# --- weights ------------------------------------------------------------------------------


def two_problems() -> list[ScoreInput]:
    return [  # a: S = 0.8 (prefill), 0.4 (decode); b: S = 0.2 (prefill)
        item("a", "x", t=1e-3, roof=8e-4), item("a", "y", t=1e-3, roof=4e-4, phase="decode"),
        item("b", "z", t=1e-3, roof=2e-4),
    ]


def test_per_problem_weights_are_normalised() -> None:
    w = Weights(version="w1", weights=[Weight(problem="a", weight=3),
                                       Weight(problem="b", weight=1)])
    card = score(two_problems(), w)
    assert card.weights_mode == "per_problem"
    assert card.s_agg == pytest.approx(0.75 * 0.6 + 0.25 * 0.2)
    assert card.s_agg_by_phase["prefill"] == pytest.approx(0.75 * 0.8 + 0.25 * 0.2)
    assert card.s_agg_by_phase["decode"] == pytest.approx(0.4)  # b has no decode shape


def test_per_shape_weights_multiply_the_shape_score() -> None:
    w = Weights(version="w1", weights=[Weight(problem="a", shape="y", weight=1),
                                       Weight(problem="b", shape="z", weight=3)])
    card = score(two_problems(), w)
    assert card.weights_mode == "per_shape"
    assert card.s_agg == pytest.approx((0.4 + 3 * 0.2) / 4)
    assert card.s_agg_by_phase == {"prefill": pytest.approx(0.2), "decode": pytest.approx(0.4)}


def test_mixed_weights_add_up_as_terms() -> None:
    w = Weights(version="w1", weights=[Weight(problem="a", weight=1),
                                       Weight(problem="b", shape="z", weight=1)])
    card = score(two_problems(), w)
    assert card.weights_mode == "mixed" and card.s_agg == pytest.approx((0.6 + 0.2) / 2)


def test_empty_weights_weigh_problems_equally() -> None:
    card = score(two_problems(), NO_WEIGHTS)
    assert card.weights_mode == "uniform" and card.s_agg == pytest.approx((0.6 + 0.2) / 2)
    assert any("no weights" in n for n in card.notes)


def test_zero_weights_give_no_score() -> None:
    w = Weights(version="w1", weights=[Weight(problem="a", weight=0)])
    card = score(two_problems(), w)
    assert card.s_agg is None and card.weight_coverage == 0.0


def test_all_smoke_problem_has_no_score_and_its_weight_is_dropped() -> None:
    inputs = [*two_problems(), item("c", "smoke", t=1e-3, roof=9e-4, smoke=True)]
    w = Weights(version="w1", weights=[Weight(problem="a", weight=1),
                                       Weight(problem="c", weight=1)])
    card = score(inputs, w)
    assert {p.problem: p.s for p in card.problems}["c"] is None
    assert card.s_agg == pytest.approx(0.6) and card.weight_coverage == pytest.approx(0.5)
    assert any("c/*" in n for n in card.notes)


def test_weighted_shape_not_in_the_run_is_reported() -> None:
    w = Weights(version="w1", weights=[Weight(problem="a", shape="x", weight=1),
                                       Weight(problem="a", shape="gone", weight=3)])
    card = score(two_problems(), w)
    assert card.s_agg == pytest.approx(0.8) and card.weight_coverage == pytest.approx(0.25)
    assert any("a/gone" in n for n in card.notes)


def test_smoke_run_scores_smoke_shapes_with_uniform_weights() -> None:
    inputs = [item("a", "s1", t=1e-3, roof=5e-4, smoke=True),
              item("b", "s2", t=1e-3, roof=1e-4, smoke=True, phase="decode")]
    assert score(inputs, DEMO.weights).s_agg is None  # production weights, no production shape
    card = score(inputs, DEMO.weights, options=ScoreOptions(include_smoke=True))
    assert card.weights_mode == "uniform" and card.s_agg == pytest.approx(0.3)
    assert card.s_agg_by_phase == {"prefill": pytest.approx(0.5), "decode": pytest.approx(0.1)}


def test_shapes_without_timing_count_as_zero_in_the_median() -> None:
    inputs = [item("a", "x", t=1e-3, roof=9e-4), item("a", "y", t=None),
              item("a", "z", V.TIMEOUT)]
    assert score(inputs, NO_WEIGHTS).problems[0].s == 0.0  # median of [0.9, 0, 0]


# --- speed-up, fast_p, funnel, cost -------------------------------------------------------


def test_speedup_geomean_and_fast_p() -> None:
    inputs = [item("a", "x", t=1e-3, ref=2e-3), item("a", "y", t=1e-3, ref=8e-3),
              item("a", "z", V.INCORRECT, t=1e-3, ref=9e-3), item("a", "w", t=1e-3)]
    card = score(inputs, NO_WEIGHTS, options=ScoreOptions(fast_p=(0.0, 1.0, 4.0)))
    assert card.speedup_geomean == pytest.approx(4.0) and card.speedup_shapes == 2
    assert {f.p: f.share for f in card.fast_p} == {0.0: 0.5, 1.0: 0.5, 4.0: 0.25}


def test_no_reference_times_no_speedup() -> None:
    card = score(two_problems(), NO_WEIGHTS)
    assert card.speedup_geomean is None and card.fast_p == []


def test_gate_funnel() -> None:
    verdicts = [V.MISSING, V.COMPILE_ERROR, V.RUNTIME_ERROR, V.INCORRECT, V.TAMPERING,
                V.FALLBACK, V.PASSED, V.PASSED, V.INFRA_ERROR]
    inputs = [item("a", f"s{i}", v) for i, v in enumerate(verdicts)]
    inputs.append(item("a", "untimed", V.PASSED, t=None))
    f = score(inputs, NO_WEIGHTS).funnel
    assert (f.shapes, f.compiled, f.correct, f.native, f.timed, f.infra_errors) == (
        9, 7, 4, 3, 2, 1)
    assert f.rate("compiled") == pytest.approx(7 / 9)


def test_cost_per_solved_problem() -> None:
    inputs = [item("a", "x"), item("b", "y"), item("c", "z", V.INCORRECT)]
    cost = score(inputs, NO_WEIGHTS, agent_tokens=1_000_000, agent_wall_s=3600).cost
    assert cost is not None and cost.solved_problems == 2
    assert (cost.tokens_per_solved, cost.wall_s_per_solved) == (500_000, 1800)
    assert score(inputs, NO_WEIGHTS).cost is None
    none = score([item("c", "z", V.INCORRECT)], NO_WEIGHTS, agent_tokens=5).cost
    assert none is not None and none.solved_problems == 0 and none.tokens_per_solved is None


# --- from a saved report ------------------------------------------------------------------


def _report(problem_id: str = "matmul") -> Report:
    shape = ShapeResult(id="llama3_8b_oproj_prefill", phase="prefill", smoke=False,
                        params={"M": 4096, "N": 4096, "K": 4096}, verdict=V.PASSED,
                        timing=Timing(median_us=200.0, iqr_us=2.0, cv=0.01, samples=50,
                                      method="cuda-events"))
    return Report(
        created_at=datetime(2026, 11, 29, tzinfo=UTC),
        submission=SubmissionSummary(name="t", suite="demo", dsl="triton", bundle_sha256="0" * 64),
        suite=SuiteSummary(id="demo", version="0.1.0", weights_version="0.1.0"),
        environment=Environment(grader_version="0", hardware="h200", device="NVIDIA H200",
                                is_performance=True, policy="default", seed_commitment="0" * 64),
        problems=[ProblemResult(id=problem_id, operator="gemm", verdict=V.PASSED, shapes=[shape])],
        summary=Summary(problems=1, shapes=1, verdicts={V.PASSED: 1}, correct_shapes=1,
                        passed_shapes=1, correctness_rate=1, dsl_adoption_rate=1, illusion_gap=0),
    )


def test_score_inputs_from_a_report() -> None:
    problems = {pid: b.problem for pid, b in DEMO.problems.items()}
    (inp,) = score_inputs(_report(), problems, H200)
    assert inp.measured_s == pytest.approx(200e-6) and inp.roofline is not None
    assert inp.roofline.t_s == pytest.approx(2 * 4096**3 / 989.5e12)
    with pytest.raises(ProblemError, match="not in the suite"):
        score_inputs(_report("softmax"), problems, H200)


# --- leaderboard --------------------------------------------------------------------------


def entry(name: str, s_agg: float | None, **kw: str) -> Scored:
    base = {"suite": "demo", "weights_version": "0.1.0", "policy": "default", "hardware": "h200"}
    return Scored.model_validate({"submission": name, "s_agg": s_agg,
                                  "problems": {"matmul": s_agg}, **base, **kw})


def test_leaderboard_ranks_by_s_agg() -> None:
    board = leaderboard([entry("b", 0.5), entry("none", None), entry("a", 0.7),
                         entry("c", 0.5), Scored(**{**entry("d", 0.1).model_dump(),
                                                    "problems": {"rmsnorm": 0.1}})])
    assert [(r.rank, r.submission) for r in board.rows] == [
        (1, "a"), (2, "b"), (2, "c"), (4, "d"), (5, "none")]
    assert board.problems == ["matmul", "rmsnorm"]
    assert board.rows[-2].problems == {"matmul": None, "rmsnorm": 0.1}
    assert not board.mixed


@pytest.mark.parametrize("field", ["suite", "weights_version", "policy", "hardware"])
def test_leaderboard_refuses_mixed_reports(field: str) -> None:
    entries = [entry("a", 0.5), entry("b", 0.4, **{field: "other"})]
    with pytest.raises(UsageError, match=field):
        leaderboard(entries)
    board = leaderboard(entries, allow_mixed=True)
    assert board.mixed and "other" in board.context[field] and len(board.context[field]) == 2
    assert board.rows[1].context[field] == "other"


def test_leaderboard_needs_reports() -> None:
    with pytest.raises(UsageError):
        leaderboard([])


def test_scored_from_card() -> None:
    card = score(demo_inputs(), DEMO.weights)
    scored = Scored.from_card(card, submission="team-a", suite="demo", policy="default",
                              hardware="h200")
    assert scored.s_agg == card.s_agg and scored.weights_version == "0.1.0"
    assert set(scored.problems) == {"matmul", "rmsnorm", "vector_add"}
    assert leaderboard([scored]).rows[0].rank == 1
