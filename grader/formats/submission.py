"""`submission.toml`: the manifest of a submission bundle."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints, model_validator

from grader.formats._base import Ident, Strict

KernelPath = Annotated[
    # pydantic-core regexes are Rust ones: `$` is the end of the text, not before a newline
    str, StringConstraints(pattern=r"^kernels/[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\.py$")
]


class AgentInfo(Strict):
    """What producing the submission cost (optional; used for cost per solved problem)."""

    model: str | None = Field(default=None, max_length=200)
    output_tokens: int | None = Field(default=None, ge=0)
    wall_s: float | None = Field(default=None, ge=0)


class SubmissionInfo(Strict):
    name: str = Field(min_length=1, max_length=120)
    suite: Ident
    dsl: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,31}$")] = "triton"
    agent: AgentInfo | None = None


class ProblemEntry(Strict):
    file: KernelPath


class Manifest(Strict):
    submission: SubmissionInfo
    problems: dict[Ident, ProblemEntry] = Field(min_length=1, max_length=500)

    @model_validator(mode="after")
    def _distinct_files(self) -> Manifest:
        files = [p.file for p in self.problems.values()]
        if len(set(files)) != len(files):
            raise ValueError("two problems name the same kernel file")
        return self
