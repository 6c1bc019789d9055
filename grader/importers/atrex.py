"""`grader import atrex DIR`: Atrex-Bench operator folders as a suite of ours.

DIR holds one folder per operator (or is one): reference.py (`class Model`), input.py
(`_make_inputs(**input_kwargs)`), shapes.json (a list of shapes), optionally metadata.json and
roofline.json; DIR may hold operator_importance.json. Every field read, and what is assumed
when it is missing, is in docs/import.md. Fields this module does not know are kept, by name,
in the problem's hidden notes, never silently dropped.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from grader.errors import ProblemError, UsageError
from grader.formats.problem import DEFAULT_TOLERANCES, Weight
from grader.importers.common import (
    Param,
    ProblemDraft,
    ShapeDraft,
    SuiteDraft,
    docstring,
    dtype_name,
    merge_params,
    param_value,
    problem_id,
    read_json,
    read_python,
    render_template,
    shape_id,
    top_class,
    top_function,
    validated,
)
from grader.scoring.expr import evaluate

SOURCE_FILES = ("reference.py", "input.py", "shapes.json")
INPUT_FUNCTIONS = ("_make_inputs", "make_inputs")  # the first input.py defines is called
IMPORTANCE = "operator_importance.json"
ENTRY_CLASSES = ["Model", "ModelNew"]
PHASES = ("prefill", "decode")


class _Loose(BaseModel):
    """A foreign file's object: known fields typed, unknown ones kept (and reported)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    def unknown(self) -> list[str]:
        return sorted((self.model_extra or {}).keys())


class AtrexShape(_Loose):
    init_kwargs: dict[str, Any] = Field(default_factory=dict)
    input_kwargs: dict[str, Any] = Field(default_factory=dict)
    name: str | int | None = None
    id: str | int | None = None
    phase: str | None = None
    smoke: bool | None = None
    public: bool | None = None


class AtrexTolerance(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    atol: float | None = Field(default=None, ge=0)
    rtol: float | None = Field(default=None, ge=0)


class AtrexMetadata(_Loose):
    description: str | None = None
    operator: str | None = None
    category: str | None = None
    dtype: str | list[str] | None = None
    dtypes: list[str] | None = None
    # one pair for every dtype, or pairs by dtype, or one number for both atol and rtol
    tolerance: float | AtrexTolerance | dict[str, AtrexTolerance] | None = None
    atol: float | None = Field(default=None, ge=0)
    rtol: float | None = Field(default=None, ge=0)
    flops: str | float | None = None  # an expression of the shape's params, or a number
    bytes: str | float | None = None
    phase: str | None = None
    source: str | None = None
    provenance: str | None = None


class AtrexWork(_Loose):
    flops: float | None = Field(default=None, ge=0)
    bytes: float | None = Field(default=None, gt=0)


def _operator_dirs(root: Path) -> list[Path]:
    if not root.is_dir():
        raise UsageError(f"{root}: not a folder", hint="pass the Atrex-Bench root folder")
    if (root / "reference.py").is_file():
        return [root]  # one operator's folder
    dirs = [d for d in sorted(root.iterdir()) if d.is_dir() and not d.name.startswith(".")
            and any((d / f).exists() for f in SOURCE_FILES)]
    if not dirs:
        raise ProblemError(f"{root}: no operator folder (one with reference.py, input.py and "
                           "shapes.json)", hint="pass the Atrex-Bench root folder")
    return dirs


def _shapes(op: Path, meta: AtrexMetadata, notes: list[str]
            ) -> tuple[list[ShapeDraft], list[str], list[str]]:
    """The shapes, the constructor's param names and the input generator's."""
    raw = read_json(op / "shapes.json")
    if not isinstance(raw, list):
        raise ProblemError(f"{op / 'shapes.json'}: is a JSON {type(raw).__name__}, expected a "
                           "list of shapes", hint='e.g. [{"init_kwargs": {}, "input_kwargs": '
                           '{"n": 4096}}]')
    if not raw:
        raise ProblemError(f"{op / 'shapes.json'}: lists no shape")
    taken: set[str] = set()
    shapes: list[ShapeDraft] = []
    init_names: dict[str, None] = {}
    input_names: dict[str, None] = {}
    assumed_phase: list[str] = []
    for i, item in enumerate(raw):
        where = f"{op / 'shapes.json'}: shape {i}"
        s: AtrexShape = validated(AtrexShape, item, where)
        init = {k: param_value(v, f"{where}: init_kwargs.{k}") for k, v in s.init_kwargs.items()}
        inputs = {k: param_value(v, f"{where}: input_kwargs.{k}")
                  for k, v in s.input_kwargs.items()}
        params: dict[str, Param] = merge_params(init, inputs, where)
        init_names.update(dict.fromkeys(init))
        input_names.update(dict.fromkeys(inputs))
        label = s.name if s.name is not None else s.id
        sid = shape_id(str(label) if label is not None else "", taken, f"shape{i}")
        phase = s.phase or meta.phase
        if phase not in PHASES:
            if phase is not None:
                notes.append(f"shape {sid}: phase {phase!r} is not prefill or decode")
            assumed_phase.append(sid)
            phase = "prefill"
        keys = tuple(dict.fromkeys(str(k) for k in (s.name, s.id, i, sid) if k is not None))
        shapes.append(ShapeDraft(id=sid, params=params, phase=phase,
                                 smoke=bool(s.smoke or s.public), keys=keys))
        if s.unknown():
            notes.append(f"shapes.json shape {i}: fields not imported: {', '.join(s.unknown())}")
    if assumed_phase:
        notes.append(f"phase prefill assumed for shapes {', '.join(assumed_phase)}")
    return shapes, list(init_names), list(input_names)


def _dtypes(meta: AtrexMetadata, where: str, notes: list[str]) -> list[str]:
    given = meta.dtypes or ([meta.dtype] if isinstance(meta.dtype, str) else meta.dtype)
    if not given:
        notes.append("dtype float32 assumed (metadata names none)")
        return ["float32"]
    return list(dict.fromkeys(dtype_name(d, f"{where}: dtype") for d in given))


def _tolerance(meta: AtrexMetadata, dtypes: list[str], where: str
               ) -> dict[str, dict[str, float]]:
    tol = meta.tolerance
    per: dict[str, AtrexTolerance] = {}
    if isinstance(tol, float | int):
        per = {d: AtrexTolerance(atol=float(tol), rtol=float(tol)) for d in dtypes}
    elif isinstance(tol, AtrexTolerance):
        per = dict.fromkeys(dtypes, tol)
    elif isinstance(tol, dict):
        per = {dtype_name(k, f"{where}: tolerance"): v for k, v in tol.items()}
    if meta.atol is not None or meta.rtol is not None:
        per = {d: AtrexTolerance(atol=meta.atol, rtol=meta.rtol) for d in dtypes} | per
    out = {}
    for dtype, t in per.items():
        default = DEFAULT_TOLERANCES.get(dtype)
        atol = t.atol if t.atol is not None else (default.atol if default else 0.0)
        rtol = t.rtol if t.rtol is not None else (default.rtol if default else 0.0)
        out[dtype] = {"atol": atol, "rtol": rtol}
    return out


def _expression(value: str | float | None, field: str, shapes: list[ShapeDraft],
                notes: list[str]) -> str | None:
    """metadata's flops/bytes as an expression, if it evaluates on every shape."""
    if value is None:
        return None
    expr = value if isinstance(value, str) else repr(value)
    for s in shapes:
        try:
            evaluate(expr, s.params)
        except ProblemError as exc:
            notes.append(f"metadata {field} {expr!r} does not evaluate on shape {s.id} "
                         f"({exc.message}); not used")
            return None
    return expr


def _roofline(op: Path, shapes: list[ShapeDraft], notes: list[str]) -> list[ShapeDraft]:
    """roofline.json's numbers: a list in the order of shapes.json, or an object by shape
    name, id or index."""
    path = op / "roofline.json"
    if not path.exists():
        return shapes
    raw = read_json(path)
    if isinstance(raw, list):
        if len(raw) != len(shapes):
            raise ProblemError(f"{path}: lists {len(raw)} entries for {len(shapes)} shapes",
                               hint="a list must follow shapes.json; or key entries by name")
        by_index = dict(enumerate(raw))
        found = {s.id: by_index[i] for i, s in enumerate(shapes)}
    elif isinstance(raw, dict):
        found = {}
        for s in shapes:
            key = next((k for k in s.keys if k in raw), None)
            if key is not None:
                found[s.id] = raw[key]
        extra = set(raw) - {k for s in shapes for k in s.keys}
        if extra:
            notes.append(f"roofline.json: entries for no shape: {', '.join(sorted(extra))}")
    else:
        raise ProblemError(f"{path}: is a JSON {type(raw).__name__}, expected an object by "
                           "shape or a list")
    out = []
    for s in shapes:
        if s.id in found:
            w: AtrexWork = validated(AtrexWork, found[s.id], f"{path}: shape {s.id}")
            s = replace(s, flops=w.flops, bytes=w.bytes)
        out.append(s)
    return out


def _operator(op: Path, taken: set[str]) -> ProblemDraft:
    notes: list[str] = []
    ref_bytes, ref_tree = read_python(op / "reference.py")
    model = top_class(ref_tree, "Model")
    if model is None:
        raise ProblemError(f"{op / 'reference.py'}: defines no class Model",
                           hint="an Atrex reference defines class Model(torch.nn.Module)")
    in_bytes, in_tree = read_python(op / "input.py")
    input_fn = next((n for n in INPUT_FUNCTIONS if top_function(in_tree, n)), None)
    if input_fn is None:
        raise ProblemError(f"{op / 'input.py'}: defines no _make_inputs()",
                           hint="an Atrex input.py defines _make_inputs(**input_kwargs)")
    meta = AtrexMetadata()
    if (op / "metadata.json").exists():
        meta = validated(AtrexMetadata, read_json(op / "metadata.json"), str(op / "metadata.json"))
        if meta.unknown():
            notes.append(f"metadata.json: fields not imported: {', '.join(meta.unknown())}")
    else:
        notes.append("no metadata.json")
    shapes, init_names, input_names = _shapes(op, meta, notes)
    shapes = _roofline(op, shapes, notes)
    dtypes = _dtypes(meta, str(op / "metadata.json"), notes)
    pid = problem_id(op.name, taken)
    if pid != op.name:
        notes.append(f"problem id {pid!r} from the folder name {op.name!r}")
    files = {
        "reference.py": render_template(
            "atrex_reference.py.tmpl", id=pid, source=op.name, ident=pid, input_fn=input_fn,
            input_params=repr(tuple(input_names))),
        "source_reference.py": ref_bytes,
        "source_input.py": in_bytes,
    }
    return ProblemDraft(
        id=pid, origin=str(op), operator=(meta.operator or meta.category or op.name)[:80],
        description=meta.description or docstring(model) or f"Atrex-Bench operator {op.name}",
        dtypes=dtypes, tolerance=_tolerance(meta, dtypes, str(op / "metadata.json")),
        flops_expr=_expression(meta.flops, "flops", shapes, notes),
        bytes_expr=_expression(meta.bytes, "bytes", shapes, notes),
        shapes=shapes, init_params=init_names, entry_classes=ENTRY_CLASSES, files=files,
        provenance=meta.provenance or meta.source or f"Atrex-Bench, operator folder {op.name}",
        notes=[f"imported from Atrex-Bench {op.name}", *notes])


def _weights(root: Path, problems: list[ProblemDraft], notes: list[str]
             ) -> tuple[list[Weight], str]:
    """operator_importance.json, in any of the forms docs/import.md lists; none: uniform."""
    path = root / IMPORTANCE
    if not path.exists():
        notes.append(f"no {IMPORTANCE}: every problem weighted 1.0")
        return [Weight(problem=p.id, weight=1.0) for p in problems], (
            "uniform: the source has no operator_importance.json")
    raw = read_json(path)
    if isinstance(raw, dict) and len(raw) == 1 and next(iter(raw)) in ("operators", "weights"):
        raw = next(iter(raw.values()))
    by_origin = {Path(p.origin).name: p for p in problems} | {p.id: p for p in problems}
    entries: list[tuple[str, str | None, Any]] = []  # (operator, shape key or None, weight)
    if isinstance(raw, list):
        for i, item in enumerate(raw):
            if not isinstance(item, dict) or "operator" not in item or "weight" not in item:
                raise ProblemError(f"{path}: entry {i}: expected an object with operator and "
                                   "weight (and optionally shape)")
            shape = item.get("shape")
            entries.append((str(item["operator"]), None if shape is None else str(shape),
                            item["weight"]))
    elif isinstance(raw, dict):
        for op, value in raw.items():
            if isinstance(value, dict) and ({"weight", "shapes"} & value.keys()):
                if "weight" in value:
                    entries.append((op, None, value["weight"]))
                shapes = value.get("shapes", {})
                if not isinstance(shapes, dict):
                    raise ProblemError(f"{path}: {op}.shapes: expected an object by shape")
                entries += [(op, str(k), v) for k, v in shapes.items()]
            elif isinstance(value, dict):
                entries += [(op, str(k), v) for k, v in value.items()]
            else:
                entries.append((op, None, value))
    else:
        raise ProblemError(f"{path}: is a JSON {type(raw).__name__}, expected an object by "
                           "operator or a list")
    weights: dict[tuple[str, str | None], float] = {}
    for op, key, value in entries:
        where = f"{path}: {op}" + (f", shape {key}" if key is not None else "")
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ProblemError(f"{where}: weight {value!r} is not a number >= 0")
        problem = by_origin.get(op)
        if problem is None:
            notes.append(f"{IMPORTANCE}: {op!r} is no imported operator; ignored")
            continue
        sid = None
        if key is not None:
            sid = next((s.id for s in problem.shapes if key in s.keys), None)
            if sid is None:
                notes.append(f"{IMPORTANCE}: {op} has no shape {key!r}; ignored")
                continue
        weights[(problem.id, sid)] = float(value)
    unweighted = [p.id for p in problems if not any(k[0] == p.id for k in weights)]
    if unweighted:
        notes.append(f"{IMPORTANCE} gives no weight to {', '.join(unweighted)}: not scored")
    return [Weight(problem=p, shape=s, weight=w) for (p, s), w in weights.items()], (
        f"Atrex-Bench {IMPORTANCE}")


def read(root: Path, *, skip_bad: bool = False) -> SuiteDraft:
    """The Atrex-Bench folder `root` as a suite draft; each bad operator a ProblemError
    (with `skip_bad`: left out, and listed in `skipped`)."""
    taken: set[str] = set()
    problems: list[ProblemDraft] = []
    skipped: list[str] = []
    for op in _operator_dirs(root):
        try:
            problems.append(_operator(op, taken))
        except ProblemError as exc:
            if not skip_bad:
                raise
            skipped.append(f"{op}: {exc.message}")
    notes: list[str] = []
    weights, source = _weights(root, problems, notes) if problems else ([], "")
    return SuiteDraft(kind="atrex", source=root,
                      description=f"Imported from Atrex-Bench ({root.name})",
                      problems=problems, weights=weights, weights_source=source, notes=notes,
                      skipped=skipped)
