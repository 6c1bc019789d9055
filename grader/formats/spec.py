"""`spec.toml`: one problem's public specification, as a release kit gives it to entrants.

The public part of `problem.toml` (docs/scoring.md, "The release kit"): no roofline expression,
no hidden shape, no `[hidden]` table. Tolerances are the ones grading uses, written out for
every dtype (the problem's own, else the dtype's default).
"""

from __future__ import annotations

from pydantic import Field

from grader.formats._base import Ident, Strict
from grader.formats.problem import DType, Interface, ParamValue, Phase, PyName, Tolerance


class PublicShape(Strict):
    """A shape entrants may run: a smoke shape of the problem."""

    id: Ident
    phase: Phase
    params: dict[str, ParamValue] = Field(default_factory=dict)


class Spec(Strict):
    id: Ident
    operator: str = Field(min_length=1, max_length=80)
    # What the entry defines: `kernel(...)` with the reference's arguments, or a class.
    signature: str = Field(min_length=1)
    description: str = ""
    dtypes: list[DType] = Field(min_length=1)
    interface: Interface = "function"
    entry_classes: list[PyName] | None = Field(default=None, min_length=1)
    init_params: list[PyName] = Field(default_factory=list)
    tolerance: dict[DType, Tolerance] = Field(default_factory=dict)
    shapes: list[PublicShape] = Field(default_factory=list)
