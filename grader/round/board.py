"""The round's leaderboard, computed from its manifest, the entries' outcomes and reports.

Pure: `grader round verify` computes it again from the files and compares. Ranking is
scoring.leaderboard's (verdicts, then S_agg; entries equal on both share a rank); entries that were
refused or whose grading failed are listed after the ranked ones, without a rank.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from grader.model.results import Report
from grader.round.commit import report_differences
from grader.round.model import (
    PREPARED_BY,
    PREPARED_KEPT,
    Board,
    BoardRow,
    Commitment,
    Manifest,
    Outcome,
    Prepared,
    ReferenceBatch,
)
from grader.scoring.leaderboard import Scored, leaderboard
from grader.verdicts import SEVERITY


def _references(outcomes: Mapping[str, Outcome], prepared: Prepared | None
                ) -> list[ReferenceBatch]:
    """Each batch's reference: who computed it (an entry, or `grader round prepare` before
    them) and how many entries reused it."""
    found: dict[str, tuple[str, int, list[str], int]] = {
        b.key: (b.problem, b.cases, [PREPARED_BY], 0)
        for b in (prepared.batches if prepared else []) if b.status in PREPARED_KEPT}
    for name in sorted(outcomes):
        for use in outcomes[name].references:
            problem, cases, computed, reused = found.get(use.key, (use.problem, use.cases,
                                                                   [], 0))
            if use.computed:
                computed = [*computed, name]
            else:
                reused += 1
            found[use.key] = (problem, cases, computed, reused)
    return sorted((ReferenceBatch(problem=p, key=k, cases=c, computed_by=by, reused_by=r)
                   for k, (p, c, by, r) in found.items()), key=lambda b: (b.problem, b.key))


def build_board(manifest: Manifest, outcomes: Mapping[str, Outcome],
                reports: Mapping[str, Report], commitment: Commitment | None = None,
                prepared: Prepared | None = None) -> Board:
    """The leaderboard: graded entries ranked (reports from one suite, policy, hardware and
    weights version; scoring.leaderboard refuses others), then the rest. With the round's
    `commitment`, an entry graded with images other than the committed ones is noted;
    `prepared`: the references computed before the entries."""
    declared = {e.name: e.declared_name for e in manifest.entries}
    graded = [e.name for e in manifest.entries if e.name in reports
              and outcomes.get(e.name) is not None and outcomes[e.name].status == "graded"]
    rows: list[BoardRow] = []
    columns: list[str] = []
    hardware = None
    ranked_notes: list[str] = []
    if graded:
        board = leaderboard([Scored.from_report(reports[n], submission=n) for n in graded])
        columns = board.problems
        hardware = board.context["hardware"][0]
        ranked_notes = board.notes
        for row in board.rows:
            rep, out = reports[row.submission], outcomes[row.submission]
            rows.append(BoardRow(
                rank=row.rank, entry=row.submission, declared_name=declared[row.submission],
                status="graded", s_agg=row.s_agg, problems=row.problems,
                verdicts={v: rep.summary.verdicts[v] for v in SEVERITY
                          if rep.summary.verdicts.get(v)},
                shapes=rep.summary.shapes, correct_shapes=rep.summary.correct_shapes,
                graded=rep.summary.coverage, report_sha256=out.report_sha256))
    for e in manifest.entries:
        if e.name in graded:
            continue
        got = outcomes.get(e.name)
        status: Literal["refused", "failed"] = "refused" if e.refused else "failed"
        error = e.refused or (got.error if got else "not graded yet (resume the round)")
        rows.append(BoardRow(rank=None, entry=e.name, declared_name=e.declared_name,
                             status=status, error=error))
    by_rank: dict[int, list[str]] = {}
    for r in rows:
        if r.rank is not None:
            by_rank.setdefault(r.rank, []).append(r.entry)
    notes = list(ranked_notes) + [
        f"entry {e.name!r}: renamed from {e.renamed_from!r} (names must be unique and safe "
        "as folder names)" for e in manifest.entries if e.renamed_from]
    if commitment is not None:
        for name in graded:
            diffs = report_differences(commitment, reports[name],
                                       ids=outcomes[name].node is None)
            if diffs:
                notes.append(f"entry {name!r}: graded with images other than the committed "
                             "ones: " + "; ".join(diffs))
    return Board(round_id=manifest.round_id, suite=manifest.suite, settings=manifest.settings,
                 hardware=hardware, problems=columns, rows=rows,
                 ties=[names for _, names in sorted(by_rank.items()) if len(names) > 1],
                 references=_references(outcomes, prepared), notes=notes)
