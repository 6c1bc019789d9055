"""`grader leaderboard`: rank entries by their verdicts, then S_agg, with a column per problem.

Scores are comparable only when they were computed the same way: the same suite, the same
weights version, the same policy and the same hardware. A leaderboard over mixed reports is
refused unless the organiser asks for it (`allow_mixed`), and then it says it is mixed.

Verdicts come first (issue 23): on a CPU run nothing is timed and every S is 0, so ranking by
S_agg alone put an entry that only delegated to PyTorch (fallback) level with, or above, one
whose kernels passed. The order is: more shapes passed, then fewer shapes graded fallback,
policy_violation or tampering, then S_agg. On a GPU, where failed and cheating shapes score 0
anyway, this rarely differs from S_agg; on a CPU it is the only honest order, and the board
says that its scores carry no timing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pydantic import Field

from grader.errors import UsageError
from grader.formats.problem import Phase
from grader.model.scores import Frozen, ScoreCard
from grader.scoring.comparable import check_comparable
from grader.verdicts import NOT_JUDGED, Verdict

if TYPE_CHECKING:
    from grader.model.results import Report

# What must agree between the entries of one leaderboard.
COMPARABLE = ("suite", "weights_version", "policy", "hardware")
# Verdicts of an entry that looked right but was not its own kernel: never level with a pass.
CHEATS = frozenset({Verdict.FALLBACK, Verdict.POLICY_VIOLATION, Verdict.TAMPERING})
# The verdict columns of a board, each with the verdicts it counts. Shapes this host could
# not judge (unverified on the CPU interpreter) and the grader's or the suite's failures are
# counted apart: neither passed nor the entry's failure (issue 23).
COUNT_COLUMNS: dict[str, frozenset[Verdict]] = {
    "passed": frozenset({Verdict.PASSED}),
    "fallback": frozenset({Verdict.FALLBACK}),
    "violation": frozenset({Verdict.POLICY_VIOLATION, Verdict.TAMPERING}),
    "failed": frozenset(set(Verdict) - {Verdict.PASSED, *CHEATS, *NOT_JUDGED}),
    "unverified": frozenset({Verdict.UNVERIFIED}),
    "not_graded": frozenset({Verdict.REFERENCE_ERROR, Verdict.INFRA_ERROR}),
}


class Scored(Frozen):
    """What a leaderboard needs from one scored report."""

    submission: str
    suite: str
    weights_version: str
    policy: str
    hardware: str
    s_agg: float | None
    s_agg_by_phase: dict[Phase, float | None] = Field(default_factory=dict)
    problems: dict[str, float | None] = Field(default_factory=dict)  # S_i per problem
    verdicts: dict[Verdict, int] = Field(default_factory=dict)  # shapes per verdict
    is_performance: bool = True  # False: CPU interpreter, nothing timed, every S is 0
    graded: str = "all shapes"  # which shapes were graded (Summary.coverage): smoke only...

    @classmethod
    def from_report(cls, rep: Report, *, submission: str | None = None) -> Scored:
        """A graded report's entry: its scores (none when unscored) and verdict counts."""
        card = rep.scores
        return cls(submission=submission or rep.submission.name, suite=rep.suite.id,
                   weights_version=card.weights_version if card else rep.suite.weights_version,
                   policy=rep.environment.policy, hardware=rep.environment.hardware,
                   s_agg=card.s_agg if card else None,
                   s_agg_by_phase=dict(card.s_agg_by_phase) if card else {},
                   problems={p.problem: p.s for p in card.problems} if card
                   else {p.id: None for p in rep.problems},
                   verdicts=dict(rep.summary.verdicts),
                   is_performance=rep.environment.is_performance,
                   graded=rep.summary.coverage)

    def count(self, column: str) -> int:
        return sum(n for v, n in self.verdicts.items() if v in COUNT_COLUMNS[column])

    @classmethod
    def from_card(cls, card: ScoreCard, *, submission: str, suite: str, policy: str,
                  hardware: str) -> Scored:
        return cls(submission=submission, suite=suite, weights_version=card.weights_version,
                   policy=policy, hardware=hardware, s_agg=card.s_agg,
                   s_agg_by_phase=dict(card.s_agg_by_phase),
                   problems={p.problem: p.s for p in card.problems})


class Row(Frozen):
    rank: int  # competition ranking: equal scores share a rank ("1, 1, 3")
    submission: str
    s_agg: float | None
    s_agg_by_phase: dict[Phase, float | None]
    problems: dict[str, float | None]  # every column of the board; None where not scored
    context: dict[str, str]  # suite, weights_version, policy, hardware of this row
    counts: dict[str, int] = Field(default_factory=dict)  # shapes per COUNT_COLUMNS column
    graded: str = "all shapes"  # which shapes were graded: "smoke shapes only" on a CPU


class Leaderboard(Frozen):
    problems: list[str]  # the columns, in first-seen order
    rows: list[Row]
    mixed: bool  # True when allow_mixed let incomparable reports in
    context: dict[str, list[str]]  # each comparability field: the distinct values seen
    timed: bool = True  # False when a report is not a performance run: scores carry no timing
    notes: list[str] = Field(default_factory=list)  # warnings a reader must see with the board


def rank_key(e: Scored) -> tuple[int, int, bool, float]:
    """Sort key, best first: more passed shapes, fewer cheating ones, then S_agg."""
    return (-e.count("passed"), e.count("fallback") + e.count("violation"), e.s_agg is None,
            -(e.s_agg or 0.0))


def leaderboard(entries: Sequence[Scored], *, allow_mixed: bool = False) -> Leaderboard:
    """Rank `entries` by rank_key (ties by name; entries equal on it share a rank)."""
    if not entries:
        raise UsageError("no reports to rank", hint="pass one or more report files")
    context = check_comparable(
        [{f: getattr(e, f) for f in COMPARABLE} for e in entries], COMPARABLE,
        allow_mixed=allow_mixed, refusal="the reports are not comparable",
        hint="rank reports of one suite, weights version, policy and hardware, "
             "or pass --allow-mixed to rank them anyway")
    columns = list(dict.fromkeys(p for e in entries for p in e.problems))
    ordered = sorted(entries, key=lambda e: (rank_key(e), e.submission))
    rows: list[Row] = []
    for i, e in enumerate(ordered):
        tied = rows and rank_key(ordered[i - 1]) == rank_key(e)
        rows.append(Row(
            rank=rows[-1].rank if tied else i + 1, submission=e.submission, s_agg=e.s_agg,
            s_agg_by_phase=e.s_agg_by_phase,
            problems={p: e.problems.get(p) for p in columns},
            context={f: getattr(e, f) for f in COMPARABLE},
            counts={c: e.count(c) for c in COUNT_COLUMNS}, graded=e.graded,
        ))
    timed = all(e.is_performance for e in entries)
    notes = [] if timed else [
        "not a performance run (CPU interpreter): nothing was timed, so every S is 0 and "
        "carries no speed; entries are ranked by their verdicts only (passed shapes, then "
        "fewest fallback/violation shapes). Grade on a GPU (--device cuda) to rank by speed."]
    if any(e.graded != "all shapes" for e in entries):
        notes.append("not every shape was graded (see the graded column; on a CPU, "
                     "`--shapes auto` grades the smoke shapes only): a verdict speaks for the "
                     "shapes that ran, not for those left out")
    if any(e.count("unverified") for e in entries):
        notes.append("some shapes are unverified (Triton's CPU interpreter cannot run them): "
                     "counted apart, neither passed nor failed; grade on a GPU to judge them")
    return Leaderboard(problems=columns, rows=rows, mixed=any(len(v) > 1 for v in context.values()),
                       context=context, timed=timed, notes=notes)


def leaderboard_text(board: Leaderboard, width: int | None = None) -> str:
    """The board as a table (rich, grader/terminal.py): rank, submission, verdict counts,
    S_agg, S_i per problem; then its warnings. `width`: a terminal's, to fit; None: natural
    width, one row a line."""
    from grader.terminal import render, table

    header = ["#", "submission", *COUNT_COLUMNS, "graded", "S_agg", *board.problems]
    rows = [[str(r.rank), r.submission, *(str(r.counts.get(c, 0)) for c in COUNT_COLUMNS),
             r.graded,
             "-" if r.s_agg is None else f"{r.s_agg:.3f}",
             *("-" if r.problems.get(p) is None else f"{r.problems[p]:.3f}"
               for p in board.problems)] for r in board.rows]
    before = ["UNRANKED BY SPEED: " + board.notes[0]] if not board.timed else []
    after = [f"warning: {n}" for n in (board.notes if board.timed else board.notes[1:])]
    if board.mixed:
        differing = [f for f, v in board.context.items() if len(v) > 1]
        after.append(f"warning: mixed reports ({', '.join(differing)} differ): scores are not "
                     "comparable between rows")
    return render(*before, table(header, rows, left=2), *after, width=width)
