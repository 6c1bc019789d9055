"""`problem.toml`, `suite.toml` and `weights.toml`: the organiser's side of the contract."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from grader.formats._base import Ident, Strict

DType = Literal["float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int8",
                "int32", "int64", "bool"]
Phase = Literal["prefill", "decode"]


class Tolerance(Strict):
    atol: float = Field(ge=0)
    rtol: float = Field(ge=0)


# Defaults by output dtype, used where a problem names none for that dtype.
DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "float32": Tolerance(atol=1e-4, rtol=1e-4),
    "float16": Tolerance(atol=1e-2, rtol=1e-2),
    "bfloat16": Tolerance(atol=2e-2, rtol=2e-2),
    "float8_e4m3fn": Tolerance(atol=1.25e-1, rtol=1.25e-1),
    "float8_e5m2": Tolerance(atol=2.5e-1, rtol=2.5e-1),
}


class Shape(Strict):
    id: Ident
    params: dict[str, int | float | bool | str] = Field(default_factory=dict)
    phase: Phase
    # Smoke shapes are small enough for the CPU interpreter; CI grades them, scores skip them.
    smoke: bool = False


class Hidden(Strict):
    """Never shown to agents: where the problem and its shapes come from."""

    provenance: str = ""
    notes: str = ""


class Problem(Strict):
    id: Ident
    operator: str = Field(min_length=1, max_length=80)
    description: str = ""
    dtypes: list[DType] = Field(min_length=1)
    tolerance: dict[DType, Tolerance] = Field(default_factory=dict)
    flops: str = Field(min_length=1, max_length=500)
    bytes: str = Field(min_length=1, max_length=500)
    shapes: list[Shape] = Field(min_length=1)
    hidden: Hidden = Hidden()

    @model_validator(mode="after")
    def _unique_shapes(self) -> Problem:
        ids = [s.id for s in self.shapes]
        if len(set(ids)) != len(ids):
            raise ValueError(f"shape ids must be unique, got {ids}")
        return self

    def tolerance_for(self, dtype: str) -> Tolerance:
        if dtype in self.tolerance:
            return self.tolerance[dtype]
        return DEFAULT_TOLERANCES.get(dtype, Tolerance(atol=0.0, rtol=0.0))


class SuiteInfo(Strict):
    id: Ident
    description: str = ""
    version: str = Field(min_length=1, max_length=40)
    problems: list[Ident] = Field(min_length=1)
    seeds_per_shape: int = Field(default=2, ge=1, le=32)
    timeout_s: float = Field(default=300.0, gt=0, le=7200)

    @model_validator(mode="after")
    def _unique_problems(self) -> SuiteInfo:
        if len(set(self.problems)) != len(self.problems):
            raise ValueError("a problem is listed twice")
        return self


class SuiteFile(Strict):
    suite: SuiteInfo


class Weight(Strict):
    problem: Ident
    shape: Ident | None = None
    weight: float = Field(ge=0)


class Weights(Strict):
    version: str = Field(min_length=1, max_length=40)
    source: str = ""
    weights: list[Weight] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_keys(self) -> Weights:
        keys = [(w.problem, w.shape) for w in self.weights]
        dup = sorted({k for k in keys if keys.count(k) > 1}, key=str)
        if dup:
            raise ValueError(f"weights given twice for {dup[0]}")
        return self
