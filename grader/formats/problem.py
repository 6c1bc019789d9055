"""`problem.toml`, `suite.toml` and `weights.toml`: the organiser's side of the contract."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints, model_validator

from grader.formats._base import Ident, Strict

DType = Literal["float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int8",
                "int32", "int64", "bool"]
Phase = Literal["prefill", "decode"]
# How an entry is called: `kernel(*inputs)` (function) or a class built once per case with the
# shape's `init_params` and called on the inputs (module: Atrex-Bench and KernelBench style).
Interface = Literal["function", "module"]
PyName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")]
# Files of a problem folder beside problem.toml and reference.py: flat, safe names.
FileName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\.py$")]
DEFAULT_ENTRY_CLASSES = ("ModelNew", "Model")


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


# A shape param: a scalar, or a flat list of them (imported sources size tensors with lists:
# Atrex-Bench's `seq_lens`, KernelBench's `kernel_size = (3, 5)`; issue 20).
ParamScalar = int | float | bool | str
ParamValue = ParamScalar | list[ParamScalar]


class Shape(Strict):
    id: Ident
    params: dict[str, ParamValue] = Field(default_factory=dict)
    phase: Phase
    # Smoke shapes are small enough for the CPU interpreter; CI grades them, scores skip them.
    smoke: bool = False
    # This shape's own roofline numbers (an imported roofline.json): they take the place of the
    # problem's `flops`/`bytes` expressions for this shape. Hidden, like the expressions.
    flops: float | None = Field(default=None, ge=0)
    bytes: float | None = Field(default=None, gt=0)
    # Bytes one call of this shape returns (an importer's count, on `meta`): takes the place of
    # the problem's `output_bytes` expression for this shape. Sizes batches and the entry's
    # output cap (run/plan.py); not a roofline number.
    output_bytes: float | None = Field(default=None, ge=0)


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
    # Expressions of the shape's params; optional only where every shape has its own numbers.
    flops: str | None = Field(default=None, min_length=1, max_length=500)
    bytes: str | None = Field(default=None, min_length=1, max_length=500)
    # Bytes one call's outputs hold, where they outgrow `bytes` (a kernel that returns whole
    # buffers it wrote a few rows of): sizes the entry's output cap before the reference has
    # written them (run/plan.py). Not a roofline number.
    output_bytes: str | None = Field(default=None, min_length=1, max_length=500)
    shapes: list[Shape] = Field(min_length=1)
    interface: Interface = "function"
    # module: the shape params passed to the constructor (by name); the others only reach
    # make_inputs. reference.py defines `class Model`; the entry one of `entry_classes`.
    init_params: list[PyName] = Field(default_factory=list)
    entry_classes: list[PyName] | None = Field(default=None, min_length=1)
    # Further trusted files the reference imports (copied beside it into the problem's image
    # and into the release kit), e.g. the sources an importer wrapped.
    extra_files: list[FileName] = Field(default_factory=list)
    hidden: Hidden = Hidden()

    @model_validator(mode="after")
    def _unique_shapes(self) -> Problem:
        ids = [s.id for s in self.shapes]
        if len(set(ids)) != len(ids):
            raise ValueError(f"shape ids must be unique, got {ids}")
        return self

    @model_validator(mode="after")
    def _work_of_every_shape(self) -> Problem:
        for field in ("flops", "bytes"):
            missing = [s.id for s in self.shapes
                       if getattr(self, field) is None and getattr(s, field) is None]
            if missing:
                raise ValueError(f"{field}: no expression, and shapes {missing} have no "
                                 f"{field} number of their own")
        return self

    @model_validator(mode="after")
    def _module_fields(self) -> Problem:
        if self.interface == "function" and (self.init_params or self.entry_classes):
            raise ValueError("init_params and entry_classes need interface = \"module\"")
        if len(set(self.extra_files)) != len(self.extra_files) or (
                "reference.py" in self.extra_files):
            raise ValueError("extra_files: names must be unique and not reference.py")
        return self

    def entry_names(self) -> tuple[str, ...]:
        """The names the harness calls in an entry: kernel(), or the first class found."""
        if self.interface == "function":
            return ("kernel",)
        return tuple(self.entry_classes or DEFAULT_ENTRY_CLASSES)

    def init_kwargs(self, shape: Shape) -> dict[str, ParamValue]:
        """module: the constructor's keyword arguments for `shape` (the params it names)."""
        return {k: shape.params[k] for k in self.init_params if k in shape.params}

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
