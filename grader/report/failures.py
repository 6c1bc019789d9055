"""What a run prints on the terminal about the shapes that did not pass, the way pytest does:
the verdict and its detail, the entry's own file:line (the deepest frame of a traceback, or
where a timed-out entry was when its stack was dumped) and the error's last line.

Issue 34: a syntax error's line number and an exception's frame were only in report.json.
Pure: a Report in, lines out. The texts are the report's, already in the participant's paths
(entry_paths), and a `--public` run's are its public view's (public.py): what a public report
leaves out, the terminal of a CI job leaves out too.
"""

from __future__ import annotations

import re

from grader.model.results import ProblemResult, Report, ShapeResult
from grader.verdicts import Verdict

# `File "x.py", line 3, in kernel` (a traceback, most recent call last) and `File "x.py",
# line 3 in kernel` (faulthandler's dump of a timed-out entry, most recent call first).
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)(?P<comma>,?) in (?P<fn>\S+)'
                    r'|File "(?P<sfile>[^"]+)", line (?P<sline>\d+)\s*$', re.M)
SHOWN_LINE = 200  # characters of the error's last line


def entry_line(text: str | None, entry_file: str | None) -> tuple[int, str | None] | None:
    """The line (and function) of the deepest frame of `entry_file` in `text`, or None. A
    syntax error's traceback ends with the file and line that did not parse (no function)."""
    if not text or not entry_file:
        return None
    hits = []
    for m in _FRAME.finditer(text):
        if (m.group("file") or m.group("sfile")) != entry_file:
            continue
        fn = m.group("fn")
        where = (int(m.group("line") or m.group("sline")), fn if fn != "<module>" else None)
        hits.append((where, m.group("comma") == "" and fn is not None))
    if not hits:
        return None
    dumped = [where for where, first in hits if first]
    # A faulthandler dump lists the innermost frame first; a traceback lists it last.
    return dumped[0] if dumped else hits[-1][0]


def entry_frame(text: str | None, entry_file: str | None) -> str | None:
    """`file:line (in fn)` of entry_line, or None."""
    found = entry_line(text, entry_file)
    if found is None:
        return None
    line, fn = found
    return f"{entry_file}:{line}" + (f" (in {fn})" if fn else "")


def last_line(text: str | None) -> str | None:
    """The error's own line: the last non-empty line of a traceback."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1][:SHOWN_LINE] if lines else None


def error_lines(shape: ShapeResult, entry_file: str | None, indent: str = "    ") -> list[str]:
    """Where in the entry's file the error was, and its last line (none for what has no
    excerpt). A timeout's excerpt is the dump of the entry's stacks: where it was."""
    excerpt = shape.error_excerpt
    at = entry_frame(excerpt, entry_file)
    out = []
    if at is not None:
        out.append(f"{indent}at {at}" + (" when it was stopped"
                                          if shape.verdict is Verdict.TIMEOUT else ""))
    if shape.verdict is not Verdict.TIMEOUT and (last := last_line(excerpt)):
        out.append(f"{indent}{last}")
    return out


def _problem_lines(p: ProblemResult) -> list[str]:
    failed = [s for s in p.shapes if s.verdict is not Verdict.PASSED]
    if not p.shapes and p.verdict is not Verdict.PASSED:
        return [f"  {p.id}: {p.verdict}: {p.detail}"]
    out: list[str] = []
    # Shapes that failed the same way (a compile error fails them all) are one entry.
    groups: dict[tuple[Verdict, str, str | None], list[ShapeResult]] = {}
    for s in failed:
        groups.setdefault((s.verdict, s.detail, s.error_excerpt), []).append(s)
    for (verdict, detail, _), shapes in groups.items():
        more = f" (and {len(shapes) - 1} more shape(s))" if len(shapes) > 1 else ""
        out.append(f"  {p.id}/{shapes[0].id}{more}: {verdict}: {detail}")
        out += error_lines(shapes[0], p.kernel_file)
    return out


def failure_lines(rep: Report) -> list[str]:
    """A few lines per problem that did not pass, none for one that did."""
    return [line for p in rep.problems for line in _problem_lines(p)]
