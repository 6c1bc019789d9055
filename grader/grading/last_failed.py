"""`grader run --last-failed`: grade again only what did not pass, as pytest's --lf does, read
from the report the run before left in the output folder (issue 34: an agent iterating on one
kernel re-graded every problem to see one fixed).

Pure but for reading that report: a run's options in, narrower ones out, and what to say.
"""

from __future__ import annotations

from dataclasses import replace

from grader.errors import GraderError
from grader.grading.config import RunOptions
from grader.model.results import Report
from grader.report.render import load_report
from grader.verdicts import Verdict

REPORT = "report.json"


def failed_shapes(rep: Report) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The problems with a shape that did not pass, and those shapes as PROBLEM/SHAPE
    (`PROBLEM/*` for a problem that failed with no shape, `missing` say)."""
    problems: list[str] = []
    shapes: list[str] = []
    for p in rep.problems:
        bad = [f"{p.id}/{s.id}" for s in p.shapes if s.verdict is not Verdict.PASSED]
        if not p.shapes and p.verdict is not Verdict.PASSED:
            bad = [f"{p.id}/*"]
        if bad:
            problems.append(p.id)
            shapes += bad
    return tuple(problems), tuple(shapes)


def last_failed(opts: RunOptions) -> tuple[RunOptions, str]:
    """`opts` narrowed to what failed in its output folder's report, and a line saying what
    is graded again. No report there, or one where everything passed: everything, as pytest.
    The run replaces the reports it read (--force): the kernel was edited in between, so the
    bundle is another one, which -o would otherwise refuse."""
    g = opts.grading
    path = g.out_dir / REPORT
    if not path.is_file():
        return opts, f"--last-failed: no {path} from an earlier run; grading everything"
    try:
        rep = load_report(path)
    except GraderError:
        return opts, f"--last-failed: {path} cannot be read; grading everything"
    problems, shapes = failed_shapes(rep)
    if g.settings.problems:  # --problem narrows it further
        keep = set(g.settings.problems)
        problems = tuple(p for p in problems if p in keep)
        shapes = tuple(s for s in shapes if s.split("/", 1)[0] in keep)
    forced = replace(opts.presentation, force=True)
    if not shapes:
        return (replace(opts, presentation=forced),
                f"--last-failed: nothing failed in {path}; grading everything")
    g = replace(g, settings=g.settings.but(problems=problems),
                narrowing=replace(g.narrowing, only_shapes=shapes))
    return (replace(opts, grading=g, presentation=forced),
            f"--last-failed: grading again {len(shapes)} shape(s) that did not pass in {path}: "
            + ", ".join(shapes[:5]) + (f" and {len(shapes) - 5} more" if len(shapes) > 5
                                       else ""))
