"""A quick self-check of a suite's references before `grader release` ships them (issue 23:
a suite whose reference.py did not import was released, and every entry graded against it
got infra_error). Each reference is imported, and with `run` its `make_inputs` and reference
(or `Model`) run once on the CPU on the problem's smallest shape, through the same code as
`grader roofline derive`. The references are the organiser's trusted code."""

from __future__ import annotations

import math
from dataclasses import dataclass

from grader.errors import ProblemError, ReferenceFailed
from grader.formats.problem import Shape
from grader.suite.load import Suite


@dataclass(frozen=True, kw_only=True)
class Checked:
    problem: str
    shape: str | None  # None: imported only


def smallest(shapes: list[Shape]) -> Shape:
    """Smoke shapes first, then the fewest elements (the product of the integer params)."""
    def size(s: Shape) -> float:
        ints = [v for v in s.params.values() if isinstance(v, int) and not isinstance(v, bool)]
        return math.prod(abs(v) or 1 for v in ints) if ints else 0
    return min(shapes, key=lambda s: (not s.smoke, size(s)))


def self_check(suite: Suite, *, run: bool = True) -> list[Checked]:
    """Raise ReferenceFailed naming the first reference that fails; what was checked."""
    from grader.scoring.derive import derive, load_reference

    done = []
    for pid, sp in suite.problems.items():
        try:
            load_reference(sp.directory, sp.problem.interface)
            shape = smallest(list(sp.problem.shapes)) if run else None
            if shape is not None:
                derive(sp.directory, shape.id, device="cpu")
        except ProblemError as exc:
            raise ReferenceFailed(
                f"suite {suite.id}, problem {pid}: {exc.message}",
                hint="fix the reference (grader roofline derive PROBLEM_DIR --device cpu "
                "runs it); if it runs only on a GPU, pass --no-run-check to check its import "
                "alone") from None
        done.append(Checked(problem=pid, shape=shape.id if shape else None))
    return done
