"""`grader leaderboard`: rank entries by S_agg, with a column per problem.

Scores are comparable only when they were computed the same way: the same suite, the same
weights version, the same policy and the same hardware. A leaderboard over mixed reports is
refused unless the organiser asks for it (`allow_mixed`), and then it says it is mixed.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from grader.errors import UsageError
from grader.formats.problem import Phase
from grader.scoring._model import Frozen, check_comparable
from grader.scoring.scores import ScoreCard

# What must agree between the entries of one leaderboard.
COMPARABLE = ("suite", "weights_version", "policy", "hardware")


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


class Leaderboard(Frozen):
    problems: list[str]  # the columns, in first-seen order
    rows: list[Row]
    mixed: bool  # True when allow_mixed let incomparable reports in
    context: dict[str, list[str]]  # each comparability field: the distinct values seen


def leaderboard(entries: Sequence[Scored], *, allow_mixed: bool = False) -> Leaderboard:
    """Rank `entries` by S_agg (highest first; unscored last, then by name)."""
    if not entries:
        raise UsageError("no reports to rank", hint="pass one or more report files")
    context = check_comparable(
        [{f: getattr(e, f) for f in COMPARABLE} for e in entries], COMPARABLE,
        allow_mixed=allow_mixed, refusal="the reports are not comparable",
        hint="rank reports of one suite, weights version, policy and hardware, "
             "or pass --allow-mixed to rank them anyway")
    columns = list(dict.fromkeys(p for e in entries for p in e.problems))
    ordered = sorted(entries, key=lambda e: (e.s_agg is None, -(e.s_agg or 0.0), e.submission))
    rows: list[Row] = []
    for i, e in enumerate(ordered):
        tied = rows and rows[-1].s_agg == e.s_agg
        rows.append(Row(
            rank=rows[-1].rank if tied else i + 1, submission=e.submission, s_agg=e.s_agg,
            s_agg_by_phase=e.s_agg_by_phase,
            problems={p: e.problems.get(p) for p in columns},
            context={f: getattr(e, f) for f in COMPARABLE},
        ))
    return Leaderboard(problems=columns, rows=rows, mixed=any(len(v) > 1 for v in context.values()),
                       context=context)
