"""Tracebacks in the participant's own words: the harness imports every entry as
`/grader/entry/kernel.py`, so an entry's error named that path, one the participant has never
seen (issue 23). On the host, once the report is built, each problem's texts name its kernel's
path in the bundle instead (`kernels/vector_add.py`), or, for one kernel file graded on its own,
that file as the participant named it (issue 34: `grader run my_add.py` spoke of
`kernels/vector_add.py`, a path the packing made up). Pure: a Report in, a Report out.
"""

from __future__ import annotations

from grader.harness.protocol import ENTRY_FILE
from grader.model.findings import Finding
from grader.model.results import ProblemResult, Report


def _swap(text: str | None, name: str) -> str | None:
    return None if text is None else text.replace(ENTRY_FILE, name)


def _renamed(findings: list[Finding], old: str, new: str) -> list[Finding]:
    return [f.model_copy(update={"file": new}) if f.file == old else f for f in findings]


def _problem(p: ProblemResult, shown_as: str | None) -> ProblemResult:
    texts = [p.detail, p.stderr_excerpt, *(t for s in p.shapes for t in (s.detail,
                                                                         s.error_excerpt))]
    if not p.kernel_file or not (shown_as or any(t and ENTRY_FILE in t for t in texts)):
        return p
    old, name = p.kernel_file, shown_as or p.kernel_file
    shapes = [s.model_copy(update={"detail": _swap(s.detail, name) or "",
                                   "error_excerpt": _swap(s.error_excerpt, name),
                                   "findings": _renamed(s.findings, old, name)})
              for s in p.shapes]
    return p.model_copy(update={"detail": _swap(p.detail, name) or "",
                                "stderr_excerpt": _swap(p.stderr_excerpt, name),
                                "kernel_file": name, "findings": _renamed(p.findings, old, name),
                                "shapes": shapes})


def with_entry_paths(rep: Report, shown_as: str | None = None) -> Report:
    """`shown_as`: the one kernel file graded, as given: every problem's kernel is it, and
    the report names it so (its kernel_file, its findings' file, its texts)."""
    problems = [_problem(p, shown_as) for p in rep.problems]
    if all(new is old for new, old in zip(problems, rep.problems, strict=True)):
        return rep
    return rep.model_copy(update={"problems": problems})
