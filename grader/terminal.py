"""Terminal output from a kept library (rich, issue 23): tables and progress.

Tables (leaderboard, compare, hardware list, roofline derive) are rich tables: on a terminal
they fit its width, a long cell folding onto a second line rather than being cut or running
into its neighbour; piped or in a file they take their natural width, one row a line, with
no colour and no escape codes, so that scripts and CI logs read plain text. Progress
(cli/progress.py) is a live bar on a terminal and plain lines when piped.
"""

from __future__ import annotations

import io
import shutil
import sys
from collections.abc import Sequence
from typing import TextIO

from rich import box
from rich.console import Console, RenderableType
from rich.table import Table

# The width of text that is not shown on a terminal: wide enough that no table wraps.
NATURAL = 10_000


def is_terminal(stream: TextIO | None = None) -> bool:
    isatty = getattr(stream if stream is not None else sys.stdout, "isatty", None)
    return bool(callable(isatty) and isatty())


def width(stream: TextIO | None = None) -> int | None:
    """The terminal's width when `stream` (stdout by default) is one; None when piped."""
    return shutil.get_terminal_size().columns if is_terminal(stream) else None


def table(header: Sequence[str], rows: Sequence[Sequence[str]], *, left: int = 1,
          title: str | None = None) -> Table:
    """A table whose first `left` columns are left-aligned and the others right-aligned (for
    numbers); a header may hold several lines ("machine\\nsubmission")."""
    out = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title=title,
                title_justify="left", title_style=None, header_style=None)
    for i, name in enumerate(header):
        out.add_column(name, justify="left" if i < left else "right", overflow="fold")
    for row in rows:
        out.add_row(*row)
    return out


def render(*items: RenderableType | str, width: int | None = None) -> str:
    """`items` as plain text (no colour, no escape codes): fitted to `width` columns, or at
    their natural width when None; trailing blanks removed."""
    buf = io.StringIO()
    console = Console(file=buf, width=width or NATURAL, color_system=None, highlight=False,
                      emoji=False, markup=False, force_terminal=False, soft_wrap=width is None)
    for item in items:
        console.print(item)
    return "\n".join(line.rstrip() for line in buf.getvalue().splitlines()) + "\n"
