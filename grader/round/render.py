"""The round's leaderboard as JSON, Markdown and one self-contained HTML page (pure).

Entry names are safe by construction (round/entries.safe_name), but declared names and
errors are the entries' own words: the HTML autoescapes everything and forbids scripts (its
Content-Security-Policy), the Markdown makes every such string inert (report.markdown).
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import jinja2
from markupsafe import Markup

from grader.report.html import VERDICT_GROUP
from grader.report.inert import clean_text
from grader.report.markdown import md_text
from grader.round.model import Board
from grader.verdicts import SEVERITY, Verdict

TEXT_LIMIT = 2000


def board_json(board: Board) -> str:
    return json.dumps(board.model_dump(mode="json"), indent=1, allow_nan=False) + "\n"


def _score(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _verdicts(counts: dict[Verdict, int]) -> list[tuple[Verdict, int]]:
    return [(v, counts[v]) for v in SEVERITY if counts.get(v)]


def board_markdown(board: Board) -> str:
    lines = [f"# Leaderboard: {md_text(board.suite.id)} {md_text(board.suite.version)}", "",
             f"Round `{board.round_id}`, policy {md_text(board.settings.policy)}, device "
             f"{md_text(board.settings.device)}, hardware {md_text(board.hardware or '-')}; "
             f"{len(board.rows)} entries.", ""]
    if board.settings.device == "cpu":
        lines += ["Graded on the CPU (Triton's interpreter): scores are not performance "
                  "numbers.", ""]
    lines += [f"- {md_text(n, 400)}" for n in board.notes] + ([""] if board.notes else [])
    head = ["#", "entry", "S_agg", *(md_text(p) for p in board.problems), "verdicts",
            "correct", "shapes graded"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in board.rows:
        who = md_text(r.entry) + (f" (“{md_text(r.declared_name)}”)" if r.declared_name else "")
        if r.status != "graded":
            who += f": {r.status}, {md_text(r.error or '', 300)}"
        verdicts = ", ".join(f"{v.value} {n}" for v, n in _verdicts(r.verdicts)) or "-"
        cells = [str(r.rank) if r.rank is not None else "-", who, _score(r.s_agg),
                 *(_score(r.problems.get(p)) for p in board.problems), verdicts,
                 f"{r.correct_shapes}/{r.shapes}" if r.status == "graded" else "-",
                 r.graded or "-"]
        lines.append("| " + " | ".join(cells) + " |")
    if board.ties:
        lines += ["", "Ties (equal scores share a rank): " + "; ".join(
            ", ".join(md_text(n) for n in names) for names in board.ties)]
    lines += ["", "## References", "", "| problem | cases | computed by | reused by |",
              "|---|---|---|---|"]
    lines += [f"| {md_text(b.problem)} | {b.cases} | "
              f"{', '.join(md_text(n) for n in b.computed_by) or '-'} | {b.reused_by} |"
              for b in board.references]
    return "\n".join(lines) + "\n"


def _finalize(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, Markup):
        return value
    if isinstance(value, str):
        return clean_text(value, TEXT_LIMIT)
    return value


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("grader.round", "templates"),
        autoescape=True, undefined=jinja2.StrictUndefined, finalize=_finalize,
        trim_blocks=True, lstrip_blocks=True)
    env.filters.update(score=_score, verdict_items=_verdicts,
                       vgroup=lambda v: VERDICT_GROUP.get(Verdict(v), "none"),
                       clip=lambda v, n: clean_text(v, n))
    return env


def board_html(board: Board) -> str:
    tied = {n for names in board.ties for n in names}
    return _environment().get_template("board.html.j2").render(board=board, tied=tied)


RENDERERS = {"json": ("leaderboard.json", board_json), "md": ("leaderboard.md", board_markdown),
             "html": ("leaderboard.html", board_html)}
