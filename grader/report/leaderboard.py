"""`grader leaderboard REPORT... --format json,md,html`: a board of reports graded outside a
round, as files (pure). The terminal table is scoring.leaderboard's; these say the same, with
the column that tells which shapes each entry was graded on (issue 34: on a CPU `--shapes
auto` grades the smoke shapes only, and a board said `passed` for shapes that never ran).

Submission names are the entries' own words: the HTML autoescapes everything and forbids
scripts (its Content-Security-Policy), the Markdown makes every such string inert.
"""

from __future__ import annotations

import json
from functools import cache

import jinja2

from grader.report.inert import clean_text
from grader.report.markdown import md_text
from grader.scoring.leaderboard import COUNT_COLUMNS, Leaderboard

TEXT_LIMIT = 400


def _score(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def leaderboard_json(board: Leaderboard) -> str:
    return json.dumps(board.model_dump(mode="json"), indent=1, allow_nan=False) + "\n"


def leaderboard_markdown(board: Leaderboard) -> str:
    ctx = {k: md_text(", ".join(board.context.get(k, ["-"])))
           for k in ("suite", "weights_version", "policy", "hardware")}
    lines = ["# Leaderboard", "",
             f"Suite {ctx['suite']}, weights {ctx['weights_version']}, policy {ctx['policy']}, "
             f"hardware {ctx['hardware']}; {len(board.rows)} entries.", ""]
    lines += [f"- {md_text(n, TEXT_LIMIT)}" for n in board.notes] + ([""] if board.notes else [])
    if board.mixed:
        lines += ["- mixed reports: scores are not comparable between rows", ""]
    head = ["#", "submission", *COUNT_COLUMNS, "shapes graded", "S_agg",
            *(md_text(p) for p in board.problems)]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in board.rows:
        cells = [str(r.rank), md_text(r.submission), *(str(r.counts.get(c, 0))
                                                        for c in COUNT_COLUMNS),
                 md_text(r.graded), _score(r.s_agg),
                 *(_score(r.problems.get(p)) for p in board.problems)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("grader.report", "templates"),
        autoescape=True, undefined=jinja2.StrictUndefined,
        finalize=lambda v: clean_text(v, TEXT_LIMIT) if isinstance(v, str) else v,
        trim_blocks=True, lstrip_blocks=True)
    env.filters.update(score=_score)
    return env


def leaderboard_html(board: Leaderboard) -> str:
    return _environment().get_template("leaderboard.html.j2").render(
        board=board, columns=list(COUNT_COLUMNS))


RENDERERS = {"json": ("leaderboard.json", leaderboard_json),
             "md": ("leaderboard.md", leaderboard_markdown),
             "html": ("leaderboard.html", leaderboard_html)}
