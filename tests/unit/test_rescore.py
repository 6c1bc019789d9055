"""`grader rescore`: new weights over a saved report, nothing re-run, against hand-computed S_agg.

The hand-made report grades vector_add and rmsnorm of the demo suite on the H200 (bandwidth
4.8 TB/s; every shape here is memory-bound, so T_roofline = bytes / 4.8e12):

| shape                       | bytes                     | verdict   | S   |
|-----------------------------|---------------------------|-----------|-----|
| vector_add/residual_prefill | 12 · 8388608 = 100663296  | passed    | 0.8 |
| vector_add/residual_decode  | 12 · 262144 = 3145728     | passed    | 0.5 |
| rmsnorm/llama3_8b_prefill   | 2·(2·2048·4096+4096) = 33562624 | passed | 0.6 |
| rmsnorm/llama3_8b_decode    | –                         | incorrect | 0   |

S_i: vector_add = median(0.8, 0.5) = 0.65; rmsnorm = median(0.6, 0) = 0.3.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli.scoring import rescore as rescore_cmd
from grader.errors import ProblemError, UsageError
from grader.formats.problem import Phase
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
from grader.report.render import load_report, write_reports
from grader.scoring.hardware import load_hardware
from grader.scoring.rescore import load_weights, report_suite, rescore
from grader.suite.load import load_suite
from grader.verdicts import Verdict

DEMO = load_suite(PROBLEM_BUNDLES / "demo")
H200 = load_hardware("h200")
BW = 4.8e12

# (problem, shape, phase, verdict, bytes, S): the table of the module docstring.
ROWS: list[tuple[str, str, Phase, Verdict, float | None, float]] = [
    ("vector_add", "residual_prefill", "prefill", Verdict.PASSED, 100663296, 0.8),
    ("vector_add", "residual_decode", "decode", Verdict.PASSED, 3145728, 0.5),
    ("rmsnorm", "llama3_8b_prefill", "prefill", Verdict.PASSED, 33562624, 0.6),
    ("rmsnorm", "llama3_8b_decode", "decode", Verdict.INCORRECT, None, 0.0),
]

NEW_WEIGHTS = """
version = "2026-12-prod"
source = "test: per-problem weights"

[[weights]]
problem = "vector_add"
weight = 3

[[weights]]
problem = "rmsnorm"
weight = 1
"""


def _timing(us: float) -> Timing:
    return Timing(median_us=us, iqr_us=0.0, cv=0.0, samples=20, method="cuda-events")


def hand_report(*, is_performance: bool = True, version: str = DEMO.info.version) -> Report:
    problems: dict[str, list[ShapeResult]] = {"vector_add": [], "rmsnorm": []}
    for pid, sid, phase, verdict, nbytes, s in ROWS:
        timing = _timing(nbytes / BW / s * 1e6) if nbytes else None
        problems[pid].append(ShapeResult(id=sid, phase=phase, smoke=False, params={},
                                         verdict=verdict, timing=timing))
    # A smoke shape, timed: graded, but not scored on a GPU profile.
    problems["vector_add"].insert(0, ShapeResult(
        id="smoke_4099", phase="decode", smoke=True, params={"n": 4099},
        verdict=Verdict.PASSED, timing=_timing(3.0)))
    results = [ProblemResult(id=pid, operator="op", verdict=Verdict.INCORRECT if pid == "rmsnorm"
                             else Verdict.PASSED, shapes=shapes)
               for pid, shapes in problems.items()]
    return Report(
        created_at=datetime(2026, 11, 29, tzinfo=UTC),
        submission=SubmissionSummary(name="hand", suite="demo", dsl="triton",
                                     bundle_sha256="a" * 64),
        suite=SuiteSummary(id="demo", version=version, weights_version="0.1.0"),
        environment=Environment(
            grader_version="0", hardware="h200" if is_performance else "cpu-interpreter",
            device="NVIDIA H200" if is_performance else "cpu (triton interpreter)",
            is_performance=is_performance, policy="triton", seed_commitment="0" * 64),
        problems=results,
        summary=Summary(problems=2, shapes=5, verdicts={Verdict.PASSED: 4, Verdict.INCORRECT: 1},
                        correct_shapes=4, passed_shapes=4, correctness_rate=0.8,
                        dsl_adoption_rate=0.8, illusion_gap=0.0),
    )


@pytest.fixture
def weights_file(tmp_path: Path) -> Path:
    path = tmp_path / "weights.toml"
    path.write_text(NEW_WEIGHTS)
    return path


def test_rescore_with_the_suite_weights() -> None:
    # Demo weights, per shape: 0.12·0.8 + 0.06·0.5 + 0.08·0.6 + 0.04·0 over 0.30 (matmul's
    # 0.45 + 0.25 are not in this run: left out and renormalised) = 0.174 / 0.3 = 0.58.
    card = rescore(hand_report(), DEMO, H200).scores
    assert card is not None and card.weights_mode == "per_shape"
    assert card.s_agg == pytest.approx(0.58)
    assert card.weight_coverage == pytest.approx(0.30)
    assert [s.s for s in card.shapes if s.scored] == pytest.approx([0.8, 0.5, 0.6, 0.0])


def test_rescore_with_new_weights(weights_file: Path) -> None:
    before = hand_report()
    after = rescore(before, DEMO, H200, load_weights(weights_file, DEMO))
    card = after.scores
    assert card is not None and card.weights_mode == "per_problem"
    assert {p.problem: p.s for p in card.problems} == pytest.approx(
        {"vector_add": 0.65, "rmsnorm": 0.3})
    assert card.s_agg == pytest.approx((3 * 0.65 + 1 * 0.3) / 4)  # 0.5625
    # Per phase: each problem's median over its shapes of that phase.
    assert card.s_agg_by_phase["prefill"] == pytest.approx((3 * 0.8 + 1 * 0.6) / 4)  # 0.75
    assert card.s_agg_by_phase["decode"] == pytest.approx((3 * 0.5 + 1 * 0.0) / 4)  # 0.375
    assert card.weight_coverage == 1.0 and card.weights_version == "2026-12-prod"
    assert any("re-scored from saved results" in n for n in card.notes)
    # Nothing re-run or re-judged: the raw results are the same.
    assert after.problems == before.problems and after.summary == before.summary
    assert after.suite.weights_version == "2026-12-prod"


def test_weights_for_problems_not_run_are_left_out(tmp_path: Path) -> None:
    path = tmp_path / "w.toml"
    path.write_text(NEW_WEIGHTS + '\n[[weights]]\nproblem = "matmul"\nweight = 4\n')
    card = rescore(hand_report(), DEMO, H200, load_weights(path, DEMO)).scores
    assert card is not None
    assert card.s_agg == pytest.approx(0.5625) and card.weight_coverage == pytest.approx(0.5)
    assert any("matmul/*" in n for n in card.notes)


def test_rescore_cpu_report_on_the_cpu_profile() -> None:
    card = rescore(hand_report(is_performance=False), DEMO,
                   load_hardware("cpu-interpreter")).scores
    assert card is not None and card.options.include_smoke and card.weights_mode == "uniform"


def test_rescore_refusals(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not a performance run"):
        rescore(hand_report(is_performance=False), DEMO, H200)
    with pytest.raises(UsageError, match="cpu-interpreter is not a performance profile"):
        rescore(hand_report(), DEMO, load_hardware("cpu-interpreter"))
    with pytest.raises(UsageError, match=r"suite demo 9\.9"):
        rescore(hand_report(version="9.9"), DEMO, H200)
    bad = tmp_path / "bad.toml"
    bad.write_text('version = "x"\n[[weights]]\nproblem = "softmax"\nweight = 1\n')
    with pytest.raises(ProblemError, match="not a problem of suite demo"):
        load_weights(bad, DEMO)
    bad.write_text('version = "x"\n[[weights]]\nproblem = "matmul"\nshape = "huge"\nweight = 1\n')
    with pytest.raises(ProblemError, match="not a shape of matmul"):
        load_weights(bad, DEMO)


def test_rescore_command_writes_json_and_html(tmp_path: Path, weights_file: Path) -> None:
    saved = write_reports(hand_report(), tmp_path / "run", ["json"])["json"]
    out = tmp_path / "new"
    res = CliRunner().invoke(rescore_cmd, [str(saved), "--weights", str(weights_file),
                                           "-o", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "S_agg: 0.5625" in res.output
    new = load_report(out / "report.json")
    assert new.scores is not None and new.scores.s_agg == pytest.approx(0.5625)
    html = (out / "report.html").read_text(encoding="utf-8")
    assert 'id="scores"' in html and "2026-12-prod" in html
    # Default output folder: rescored/ beside the report, never over it.
    res = CliRunner().invoke(rescore_cmd, [str(saved)], catch_exceptions=False)
    assert res.exit_code == 0 and (saved.parent / "rescored" / "report.json").is_file()
    assert load_report(saved).scores is None


def test_the_report_names_its_suite_by_id_only(tmp_path: Path) -> None:
    assert report_suite(hand_report(), [PROBLEM_BUNDLES]).id == "demo"
    for sid in ("../demo", "/etc", "..", "a/b"):
        edited = hand_report().model_copy(update={"suite": hand_report().suite.model_copy(
            update={"id": sid})})
        with pytest.raises(UsageError, match="not a suite id"):
            report_suite(edited, [PROBLEM_BUNDLES])
    with pytest.raises(UsageError, match="not found"):
        report_suite(hand_report(), [tmp_path])
