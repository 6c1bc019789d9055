"""Issue 23, item 2: a leaderboard over CPU reports has verdict columns, says its scores carry
no timing, and never ranks a fallback or violation entry level with or above a passing one."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from click.testing import CliRunner

from grader.cli.scoring import leaderboard as leaderboard_cmd
from grader.formats.problem import Weights
from grader.model.results import Environment, Report, SubmissionSummary, SuiteSummary, Summary
from grader.report.render import write_reports
from grader.scoring.hardware import load_hardware
from grader.scoring.leaderboard import Scored, leaderboard, leaderboard_text
from grader.scoring.roofline import roofline_values
from grader.scoring.scores import ScoreInput, score
from grader.verdicts import Verdict

CPU = load_hardware("h200")  # any profile: a CPU run scores against a nominal one


def cpu_report(name: str, verdict: Verdict, shapes: int = 3, *,
               is_performance: bool = False) -> Report:
    """A CPU run: nothing timed, so every shape's S is 0 whatever its verdict."""
    roof = roofline_values(0.0, 4.8e6, "bf16", CPU)
    card = score([ScoreInput(problem="vector_add", shape=f"s{i}", phase="decode",
                             verdict=verdict, measured_s=None, roofline=roof)
                  for i in range(shapes)], Weights(version="w1"))
    correct = shapes if verdict in (Verdict.PASSED, Verdict.FALLBACK) else 0
    return Report(
        created_at=datetime(2026, 12, 1, tzinfo=UTC),
        submission=SubmissionSummary(name=name, suite="demo", dsl="triton",
                                     bundle_sha256=name[0] * 64),
        suite=SuiteSummary(id="demo", version="1", weights_version="w1"),
        environment=Environment(grader_version="0", hardware="h200", device="cpu",
                                is_performance=is_performance, policy="triton",
                                seed_commitment="0" * 64),
        problems=[], summary=Summary(
            problems=1, shapes=shapes, verdicts={verdict: shapes}, correct_shapes=correct,
            passed_shapes=shapes if verdict is Verdict.PASSED else 0,
            correctness_rate=correct / shapes, dsl_adoption_rate=0, illusion_gap=0),
        scores=card)


def test_a_fallback_entry_never_ranks_with_or_above_a_passing_one() -> None:
    reps = [cpu_report("aaa-fallback", Verdict.FALLBACK), cpu_report("zzz-pass", Verdict.PASSED),
            cpu_report("mmm-violation", Verdict.POLICY_VIOLATION),
            cpu_report("bbb-incorrect", Verdict.INCORRECT)]
    assert {r.scores.s_agg for r in reps if r.scores} == {0.0}  # S_agg alone cannot tell them
    board = leaderboard([Scored.from_report(r) for r in reps])
    ranks = {row.submission: row.rank for row in board.rows}
    assert ranks["zzz-pass"] == 1
    assert ranks["aaa-fallback"] > 1 and ranks["mmm-violation"] > 1
    # an honest failure is not ranked below an entry that cheated its way to right outputs
    assert ranks["bbb-incorrect"] < ranks["aaa-fallback"]
    assert board.rows[0].counts == {"passed": 3, "fallback": 0, "violation": 0, "failed": 0,
                                    "unverified": 0, "not_graded": 0}
    assert not board.timed and "nothing was timed" in board.notes[0]


def test_equal_entries_share_a_rank_and_gpu_boards_have_no_warning() -> None:
    a, b = (cpu_report(n, Verdict.PASSED, is_performance=True) for n in ("a", "b"))
    board = leaderboard([Scored.from_report(a), Scored.from_report(b)])
    assert [r.rank for r in board.rows] == [1, 1] and board.timed and not board.notes


def test_the_command_prints_verdict_columns_and_the_warning(tmp_path: Path) -> None:
    paths = []
    for rep in (cpu_report("fallback-entry", Verdict.FALLBACK),
                cpu_report("passing-entry", Verdict.PASSED)):
        paths.append(write_reports(rep, tmp_path / rep.submission.name, ["json"])["json"])
    res = CliRunner().invoke(leaderboard_cmd, [str(p) for p in paths])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0].startswith("UNRANKED BY SPEED")
    assert lines[1].split()[:10] == ["#", "submission", "passed", "fallback", "violation",
                                     "failed", "unverified", "not_graded", "graded", "S_agg"]
    assert set(lines[2]) == {"─"}  # rich's rule under the header
    assert lines[3].split()[:3] == ["1", "passing-entry", "3"]
    assert lines[4].split()[:4] == ["2", "fallback-entry", "0", "3"]
    assert "warning:" in res.stderr and "CPU interpreter" in res.stderr


def test_long_names_are_not_cut() -> None:
    long = "a-submission-name-longer-than-twenty-eight-characters"
    board = leaderboard([Scored.from_report(cpu_report(long, Verdict.PASSED))])
    assert long in leaderboard_text(board)
