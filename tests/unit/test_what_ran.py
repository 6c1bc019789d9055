"""On the CPU a `passed` says what ran (issue 34, friction 3, and the leaderboard feature):
`--shapes auto` grades the smoke shapes only there, and every summary, report, leaderboard
and the round's terminal lines say so; `grader leaderboard --format md,html` writes a board
with a column for it. No Docker."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from grader.cli.round import board_lines
from grader.cli.scoring import leaderboard as leaderboard_cmd
from grader.grading.grader import summarize
from grader.grading.runner import summary_line
from grader.grading.selection import shapes_graded
from grader.grading.settings import GradingSettings, Narrowing
from grader.model.results import Report
from grader.paths import PROBLEM_BUNDLES
from grader.report.html import render_html
from grader.report.markdown import render_markdown
from grader.report.render import write_reports
from grader.report.summaries import run_summary
from grader.round.board import build_board
from grader.round.model import Manifest, ManifestEntry, Outcome, Settings, SuiteRef
from grader.suite.load import load_suite
from grader.verdicts import MESSAGES, Verdict
from tests.unit.test_leaderboard_fair import cpu_report

DEMO = load_suite(PROBLEM_BUNDLES / "demo")
PWN = "<script>alert(1)</script>"


def _smoke_only(rep: Report, left: int = 4) -> Report:
    return rep.model_copy(update={"summary": summarize(rep.problems, ("smoke", left)).model_copy(
        update={k: getattr(rep.summary, k) for k in (
            "problems", "shapes", "verdicts", "correct_shapes", "passed_shapes",
            "correctness_rate")})})


def test_auto_on_a_cpu_grades_smoke_shapes_and_says_how_many_it_left_out() -> None:
    todo = list(DEMO.problems.values())
    total = sum(len(b.problem.shapes) for b in todo)
    smoke = sum(1 for b in todo for s in b.problem.shapes if s.smoke)
    assert 0 < smoke < total  # the demo suite has shapes of both kinds
    every = Narrowing()
    assert shapes_graded(todo, GradingSettings(device="cpu"), every) == ("smoke", total - smoke)
    assert shapes_graded(todo, GradingSettings(device="cpu", shapes="all"), every) == ("all", 0)
    assert shapes_graded(todo, GradingSettings(device="cpu", shapes="scored"), every) == (
        "scored", smoke)


def test_the_summary_line_says_what_ran_in_good_english() -> None:
    rep = _smoke_only(cpu_report("one", Verdict.PASSED, shapes=1), left=1)
    line = summary_line(rep.model_copy(update={"summary": rep.summary.model_copy(
        update={"problems": 1})}))
    assert "1 shape in 1 problem (smoke shapes only (1 shape not graded))" in line
    assert "shapes in" not in line and "problems" not in line


def test_no_report_claims_every_input_of_shapes_that_never_ran() -> None:
    assert "every hidden input" not in MESSAGES[Verdict.PASSED]
    assert "shapes graded" in MESSAGES[Verdict.PASSED]
    rep = _smoke_only(cpu_report("smoke", Verdict.PASSED))
    assert rep.summary.coverage == "smoke shapes only (4 shapes not graded)"
    assert "smoke shapes only (4 shapes not graded)" in render_markdown(rep)
    assert "smoke shapes only (4 shapes not graded)" in render_html(rep)
    summary = run_summary(rep, {}, None)  # grader run --json, for agents
    assert summary.shapes_graded == "smoke shapes only (4 shapes not graded)"
    whole = cpu_report("all", Verdict.PASSED)
    assert whole.summary.coverage == "all shapes"
    assert "Shapes graded: **" not in render_markdown(whole)


def test_leaderboard_files_outside_a_round_have_a_graded_column(tmp_path: Path) -> None:
    paths = []
    for name, verdict in ((PWN, Verdict.PASSED), ("honest-fallback", Verdict.FALLBACK)):
        folder = tmp_path / str(len(paths))
        write_reports(_smoke_only(cpu_report(name, verdict)), folder, ["json"])
        paths.append(str(folder / "report.json"))
    res = CliRunner().invoke(leaderboard_cmd, [*paths, "--format", "md,html,json",
                                               "-o", str(tmp_path / "board")])
    assert res.exit_code == 0, res.output
    assert "graded" in res.output and "smoke shapes only" in res.output  # the terminal table
    md = (tmp_path / "board" / "leaderboard.md").read_text()
    html = (tmp_path / "board" / "leaderboard.html").read_text()
    assert "| shapes graded |" in md and md.count("smoke shapes only (4 shapes not graded)") == 2
    assert "not every shape was graded" in md
    assert "<th>Shapes graded</th>" in html and "smoke shapes only" in html
    assert "<script" not in md and "<script" not in html and "Content-Security-Policy" in html
    assert (tmp_path / "board" / "leaderboard.json").is_file()
    bad = CliRunner().invoke(leaderboard_cmd, [paths[0], "--format", "pdf"])
    assert bad.exit_code == 2 and "unknown format 'pdf'" in bad.output


def test_the_round_s_terminal_lines_show_each_entry_s_verdicts(tmp_path: Path) -> None:
    """An honest and a cheating entry both read `S_agg 0.000 ... graded` on the CPU."""
    reports = {"honest": _smoke_only(cpu_report("honest", Verdict.PASSED)),
               "cheat": _smoke_only(cpu_report("cheat", Verdict.FALLBACK))}
    manifest = Manifest(
        round_id="r", created_at="2026-12-04T00:00:00Z", grader_version="0",
        suite=SuiteRef(id="demo", version="1", weights_version="w1", digest="d" * 64),
        settings=Settings(policy="triton", device="cpu", runtime="cpu", hardware="auto",
                          shapes="auto"),
        seed_commitment="0" * 64,
        entries=[ManifestEntry(name=n, source=n, bundle=f"bundles/{n}.tar", sha256="0" * 64)
                 for n in reports])
    outcomes = {n: Outcome(name=n, status="graded") for n in reports}
    lines = board_lines(build_board(manifest, outcomes, reports))
    honest, cheat = (next(ln for ln in lines if n in ln) for n in ("honest", "cheat"))
    assert "3 passed" in honest and "3 fallback" in cheat
    assert all("smoke shapes only" in ln for ln in (honest, cheat))
