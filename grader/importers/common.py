"""What every importer shares: drafts of problems and suites, reading foreign files with clear
errors, ids, dtypes and params.

A source is read into a `SuiteDraft` (pure data, no file written); `write.write_suite` then
derives what is missing, validates with the grader's own models and writes the suite.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import Any

from pydantic import ValidationError

from grader.errors import ProblemError
from grader.formats._base import describe_validation
from grader.formats.problem import Problem, Weight

TEMPLATES = Path(__file__).resolve().parents[1] / "templates" / "import"
Scalar = int | float | bool | str
# A list param is a flat list of scalars (Atrex-Bench's `seq_lens`, KernelBench's
# `kernel_size = (3, 5)`): tuples arrive as lists, as JSON and TOML have no tuples.
Param = Scalar | list[Scalar]

# Spellings of dtypes seen in benchmark metadata, to the grader's names.
DTYPE_ALIASES: dict[str, str] = {
    **{a: "float32" for a in ("float32", "fp32", "f32", "float", "single")},
    **{a: "float16" for a in ("float16", "fp16", "f16", "half")},
    **{a: "bfloat16" for a in ("bfloat16", "bf16")},
    **{a: "float8_e4m3fn" for a in ("float8_e4m3fn", "float8_e4m3", "fp8_e4m3", "e4m3", "fp8")},
    **{a: "float8_e5m2" for a in ("float8_e5m2", "fp8_e5m2", "e5m2")},
    # ROCm's fp8 (Atrex-Bench quantises to it on AMD GPUs): the same 4-bit exponent and 3-bit
    # mantissa as float8_e4m3fn, so the same tolerance; the tensor files carry the dtype itself.
    **{a: "float8_e4m3fn" for a in ("float8_e4m3fnuz", "fp8_e4m3fnuz", "e4m3fnuz")},
    **{a: "float8_e5m2" for a in ("float8_e5m2fnuz", "fp8_e5m2fnuz", "e5m2fnuz")},
    **{a: a for a in ("int8", "int32", "int64", "bool")},
}


@dataclass(frozen=True, kw_only=True)
class ShapeDraft:
    id: str
    params: dict[str, Param]
    phase: str = "prefill"
    smoke: bool = False
    flops: float | None = None
    bytes: float | None = None
    output_bytes: float | None = None  # what one call returns, counted where it is derived
    keys: tuple[str, ...] = ()  # the source's names for it: weights and rooflines use them

    def needs_work(self, problem: ProblemDraft) -> bool:
        return (self.flops is None and problem.flops_expr is None) or (
            self.bytes is None and problem.bytes_expr is None)


@dataclass(frozen=True, kw_only=True)
class ProblemDraft:
    """One problem as read from a source: the fields of problem.toml and its files."""

    id: str
    origin: str  # the source's own name for it (a folder, a file), for messages
    operator: str
    description: str
    dtypes: list[str]
    tolerance: dict[str, dict[str, float]]
    flops_expr: str | None  # problem.toml's flops/bytes expressions
    bytes_expr: str | None
    shapes: list[ShapeDraft]
    init_params: list[str]
    entry_classes: list[str]
    files: dict[str, bytes]  # reference.py and the wrapped sources (extra_files)
    provenance: str
    notes: list[str] = field(default_factory=list)
    # Smoke shapes (smoke.py): the params that may be scaled down (None: every int or int-list
    # param), and how the others follow from them (KernelBench: constants computed from
    # constants, constructor arguments from both); None: they do not depend on each other.
    scalable: tuple[str, ...] | None = None
    recompute: Callable[[dict[str, Param]], dict[str, Param]] | None = None

    def to_problem(self) -> Problem:
        data: dict[str, Any] = {
            "id": self.id, "operator": self.operator, "description": self.description,
            "dtypes": self.dtypes, "tolerance": self.tolerance, "interface": "module",
            "init_params": self.init_params, "entry_classes": self.entry_classes,
            "extra_files": sorted(n for n in self.files if n != "reference.py"),
            "shapes": [{k: v for k, v in (("id", s.id), ("params", s.params),
                                          ("phase", s.phase), ("smoke", s.smoke),
                                          ("flops", s.flops), ("bytes", s.bytes),
                                          ("output_bytes", s.output_bytes))
                        if v is not None} for s in self.shapes],
            "hidden": {"provenance": self.provenance, "notes": "\n".join(self.notes)},
        }
        data.update({k: v for k, v in (("flops", self.flops_expr), ("bytes", self.bytes_expr))
                     if v})
        try:
            return Problem.model_validate(data)
        except ValidationError as exc:
            raise ProblemError(f"{self.origin}: does not make a valid problem:\n"
                               f"{describe_validation(exc)}",
                               hint="see docs/import.md for what each source field becomes"
                               ) from None


@dataclass(frozen=True, kw_only=True)
class SuiteDraft:
    kind: str  # "atrex" or "kernelbench"
    source: Path
    description: str
    problems: list[ProblemDraft]
    weights: list[Weight]
    weights_source: str
    notes: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "<origin>: <why>" (--skip-bad)


# -- reading foreign files ------------------------------------------------------------------
def read_json(path: Path) -> Any:
    if not path.is_file():
        raise ProblemError(f"{path}: missing")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ProblemError(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ProblemError(f"{path}: not valid JSON: {exc.msg} at line {exc.lineno} "
                           f"column {exc.colno}") from None
    except RecursionError:
        raise ProblemError(f"{path}: nested too deeply to be a valid file") from None


def validated(model: type[Any], data: Any, where: str) -> Any:
    """`model.model_validate(data)`, a ProblemError naming `where` and the field if not."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ProblemError(f"{where}: unexpected content:\n{describe_validation(exc)}",
                           hint="see docs/import.md for the fields accepted") from None


def read_python(path: Path) -> tuple[bytes, ast.Module]:
    """The file's bytes and syntax tree (the file is only parsed here, never run)."""
    if not path.is_file():
        raise ProblemError(f"{path}: missing")
    try:
        data = path.read_bytes()
        return data, ast.parse(data.decode("utf-8"), filename=str(path))
    except (OSError, UnicodeDecodeError) as exc:
        raise ProblemError(f"{path}: cannot read: {exc}") from None
    except SyntaxError as exc:
        raise ProblemError(f"{path}: not valid Python: {exc.msg} (line {exc.lineno})") from None
    except (ValueError, RecursionError) as exc:
        raise ProblemError(f"{path}: cannot be parsed: {exc}") from None


def top_class(tree: ast.Module, name: str) -> ast.ClassDef | None:
    found = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
    return found[-1] if found else None


def top_function(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    return found[-1] if found else None


def constructor_args(cls: ast.ClassDef) -> tuple[list[str], int, bool]:
    """`__init__`'s positional argument names after self, how many have no default, and
    whether it takes *args. No `__init__`: none."""
    init = next((n for n in cls.body if isinstance(n, ast.FunctionDef)
                 and n.name == "__init__"), None)
    if init is None:
        return [], 0, False
    args = [*init.args.posonlyargs, *init.args.args][1:]
    required = len(args) - len(init.args.defaults)
    return [a.arg for a in args], max(required, 0), init.args.vararg is not None


def docstring(node: ast.Module | ast.ClassDef | None) -> str:
    """The first paragraph of a docstring, on one line."""
    text = ast.get_docstring(node) if node is not None else None
    return " ".join((text or "").strip().split("\n\n")[0].split())


# -- ids, dtypes, params --------------------------------------------------------------------
def problem_id(text: str, taken: set[str]) -> str:
    """A problem id from a source's name: lower case letters, digits and single `_` (a problem
    id is also a folder and part of a Docker image name), unique among `taken`."""
    base = re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:60].rstrip("_") or "problem"
    return _unique(base, taken)


def shape_id(text: str, taken: set[str], fallback: str) -> str:
    base = re.sub(r"[^A-Za-z0-9_.-]+", "_", text).lstrip("_.-")[:60].rstrip("_.-")
    return _unique(base or fallback, taken)


def _unique(base: str, taken: set[str]) -> str:
    name, n = base, 2
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    taken.add(name)
    return name


def dtype_name(text: str, where: str) -> str:
    key = text.strip().lower().removeprefix("torch.")
    if key not in DTYPE_ALIASES:
        raise ProblemError(f"{where}: unknown dtype {text!r}",
                           hint=f"use one of {', '.join(sorted(set(DTYPE_ALIASES.values())))}")
    return DTYPE_ALIASES[key]


def param_value(value: Any, where: str) -> Param:
    if isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple) and all(
            isinstance(v, bool | int | float | str) for v in value):
        return list(value)
    raise ProblemError(f"{where}: is {type(value).__name__} {value!r:.60}; shape params must be "
                       "int, float, bool, str or a flat list of them",
                       hint="a nested list, an object or null cannot be a shape param "
                       "(docs/import.md)")


def merge_params(init: dict[str, Param], inputs: dict[str, Param], where: str
                 ) -> dict[str, Param]:
    """One flat params table: a name in both must have one value."""
    for name in init.keys() & inputs.keys():
        if init[name] != inputs[name]:
            raise ProblemError(f"{where}: `{name}` is {init[name]!r} for the constructor and "
                               f"{inputs[name]!r} for the inputs; one shape param cannot be both",
                               hint="rename one of them in the source")
    return {**init, **inputs}


def reason(origin: object, message: str) -> str:
    """A refusal's line: the source named once (most messages begin with it)."""
    return message if message.startswith(str(origin)) else f"{origin}: {message}"


def render_template(name: str, **values: str) -> bytes:
    text = Template((TEMPLATES / name).read_text(encoding="utf-8")).substitute(values)
    return text.encode()
