"""Which shapes a grading grades: those of each problem that its settings select on its
device (--shapes), narrowed by -k and --last-failed; what a problem left none is graded; and
which shapes the report says were graded. Derived from the settings here, once (issue 33).
"""

from __future__ import annotations

from grader.formats.problem import Shape
from grader.grading.settings import GradingSettings, Narrowing
from grader.model.findings import Finding
from grader.model.results import ProblemResult, ShapesGraded
from grader.suite.load import SuiteProblem
from grader.verdicts import Verdict


def select_shapes(sp: SuiteProblem, settings: GradingSettings,
                  narrowing: Narrowing | None = None) -> list[Shape]:
    """The shapes of `sp` that --shapes on the device selects, and -k or --last-failed
    leave in."""
    shapes = [s for s in sp.problem.shapes
              if narrowing is None or narrowing.picks(sp.id, s.id)]
    selection = settings.shapes
    if selection == "auto":
        selection = "smoke" if settings.device == "cpu" else "all"
    if selection == "smoke":
        return [s for s in shapes if s.smoke]
    if selection == "scored":
        return [s for s in shapes if not s.smoke]
    return list(shapes)


def nothing_graded(sp: SuiteProblem, settings: GradingSettings, static: list[Finding],
                   rel: str) -> ProblemResult:
    """A problem none of whose shapes this run selects: `missing`, never `passed` (issue 20:
    an imported problem without smoke shapes was "passed (0/0)" on a CPU, and `--fail-on`
    let it through)."""
    detail = (f"no shape graded: none of its {len(sp.problem.shapes)} shape(s) is selected "
              f"by --shapes {settings.shapes} on {settings.device}" + (
                  " (a CPU grades smoke shapes only; pass --shapes all)"
                  if settings.shapes == "auto" and settings.device == "cpu" else ""))
    return ProblemResult(id=sp.id, operator=sp.problem.operator, verdict=Verdict.MISSING,
                         detail=detail, findings=static, kernel_file=rel)


def shapes_graded(todo: list[SuiteProblem], settings: GradingSettings, narrowing: Narrowing
                  ) -> tuple[ShapesGraded, int]:
    """Which shapes of the problems in `todo` this run grades, and how many it leaves out."""
    chosen = [select_shapes(b, settings, narrowing) for b in todo]
    left = sum(len(b.problem.shapes) for b in todo) - sum(len(c) for c in chosen)
    smoke = {s.smoke for c in chosen for s in c}
    return ("all" if not left else "smoke" if smoke <= {True} else "scored"), left
