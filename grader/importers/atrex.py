"""`grader import atrex DIR`: Atrex-Bench operator folders as a suite of ours.

DIR is the benchmark's checkout, its `data/` folder, or one operator's folder. An operator
folder holds reference.py (`class Model`), input.py (`_make_inputs(**input_kwargs)`, returning
a dict by forward() argument, a tuple or a tensor), shapes.json (an object keyed by shape id,
each `{"init_kwargs", "input_kwargs"}`), metadata.json and roofline.json; `data/` holds
operator_importance.json. Every field read, and what is assumed when it is missing, is in
docs/import.md; the JSON files' schemas are in atrex_files.py. Fields this module does not know
are kept, by name, in the problem's hidden notes, never silently dropped.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from grader.errors import ProblemError, UsageError
from grader.formats.expr import evaluate
from grader.formats.problem import DEFAULT_TOLERANCES, Weight
from grader.importers.atrex_files import (
    IMPORTANCE,
    AtrexMetadata,
    AtrexTolerance,
    Loose,
    read_importance,
    read_roofline,
)
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
    reason,
    render_template,
    shape_id,
    top_class,
    top_function,
    validated,
)
from grader.scoring.roofline import DTYPE_PEAK

SOURCE_FILES = ("reference.py", "input.py", "shapes.json")
INPUT_FUNCTIONS = ("_make_inputs", "make_inputs")  # the first input.py defines is called
ENTRY_CLASSES = ["Model", "ModelNew"]
PHASES = ("prefill", "decode")


class AtrexShape(Loose):
    init_kwargs: dict[str, Any] | None = None
    input_kwargs: dict[str, Any] | None = None
    name: str | int | None = None
    id: str | int | None = None
    phase: str | None = None
    smoke: bool | None = None
    public: bool | None = None


# `"phase": "prefill/decode"` (most operators): a shape is decode when its description says
# so, or when its token count is at most this (a decode step's batch of sequences).
DECODE_TOKENS = 256
TOKEN_PARAMS = ("token_count", "num_tokens", "total_tokens", "seq_len", "num_seqs", "m",
                "batch_size", "rows")


def _operator_dirs(root: Path) -> list[Path]:
    if not root.is_dir():
        raise UsageError(f"{root}: not a folder", hint="pass the Atrex-Bench checkout, its "
                         "data/ folder or one operator's folder")
    if (root / "reference.py").is_file():
        return [root]  # one operator's folder

    def found(d: Path) -> list[Path]:
        return [o for o in sorted(d.iterdir()) if o.is_dir() and not o.name.startswith(".")
                and any((o / f).exists() for f in SOURCE_FILES)]

    dirs = found(root) or (found(root / "data") if (root / "data").is_dir() else [])
    if not dirs:
        raise ProblemError(f"{root}: no operator folder (one with reference.py, input.py and "
                           "shapes.json)", hint="pass the Atrex-Bench checkout or its data/")
    return dirs


def _phase(given: str | None, params: dict[str, Param], description: str
           ) -> tuple[str, bool]:
    """A shape's phase, and whether it was guessed (from prefill/decode)."""
    if given in PHASES:
        return given, False
    text = description.lower()
    for phase in PHASES:
        if phase in text:
            return phase, False
    tokens = next((v for k in TOKEN_PARAMS if isinstance(v := params.get(k), int)), None)
    if tokens is None and isinstance(shape := params.get("shape"), list) and shape:
        tokens = shape[0] if isinstance(shape[0], int) else None
    if tokens is None and isinstance(lens := params.get("seq_lens"), list):
        tokens = sum(x for x in lens if isinstance(x, int))
    return ("decode" if tokens is not None and tokens <= DECODE_TOKENS else "prefill"), True


def _shapes(op: Path, meta: AtrexMetadata, notes: list[str]
            ) -> tuple[list[ShapeDraft], list[str], list[str]]:
    """The shapes, the constructor's param names and the input generator's."""
    path = op / "shapes.json"
    raw = read_json(path)
    if isinstance(raw, dict):  # as shipped: keyed by shape id
        items: list[tuple[str | None, Any]] = list(raw.items())
    elif isinstance(raw, list):
        items = [(None, v) for v in raw]
    else:
        raise ProblemError(f"{path}: is a JSON {type(raw).__name__}, expected an object of "
                           "shapes by id", hint='e.g. {"0": {"init_kwargs": {}, '
                           '"input_kwargs": {"n": 4096}}}')
    if not items:
        raise ProblemError(f"{path}: lists no shape")
    taken: set[str] = set()
    shapes: list[ShapeDraft] = []
    init_names: dict[str, None] = {}
    input_names: dict[str, None] = {}
    guessed: list[str] = []
    for i, (key, item) in enumerate(items):
        where = f"{path}: shape {key if key is not None else i}"
        s: AtrexShape = validated(AtrexShape, item, where)
        init = {k: param_value(v, f"{where}: init_kwargs.{k}")
                for k, v in (s.init_kwargs or {}).items()}
        inputs = {k: param_value(v, f"{where}: input_kwargs.{k}")
                  for k, v in (s.input_kwargs or {}).items()}
        params: dict[str, Param] = merge_params(init, inputs, where)
        init_names.update(dict.fromkeys(init))
        input_names.update(dict.fromkeys(inputs))
        label = key if key is not None else (s.name if s.name is not None else s.id)
        sid = shape_id(str(label) if label is not None else "", taken, f"shape{i}")
        info = meta.shapes.get(str(key if key is not None else label), {})
        text = str(info.get("description", "")) if isinstance(info, dict) else ""
        phase, guess = _phase(s.phase or (meta.phase if meta.phase in PHASES else None),
                              params, text)
        if guess:
            guessed.append(f"{sid}={phase}")
        if s.phase is not None and s.phase not in PHASES:
            notes.append(f"shape {sid}: phase {s.phase!r} is not prefill or decode")
        keys = tuple(dict.fromkeys(str(k) for k in (key, s.name, s.id, i, sid) if k is not None))
        shapes.append(ShapeDraft(id=sid, params=params, phase=phase,
                                 smoke=bool(s.smoke or s.public), keys=keys))
        if s.unknown():
            notes.append(f"shapes.json shape {sid}: fields not imported: "
                         f"{', '.join(s.unknown())}")
    if guessed:
        notes.append(f"phase guessed (metadata says {meta.phase or 'none'}: decode when the "
                     f"description says so or at most {DECODE_TOKENS} tokens): "
                     + ", ".join(guessed))
    return shapes, list(init_names), list(input_names)


def _dtypes(meta: AtrexMetadata, where: str, notes: list[str]) -> list[str]:
    given = meta.dtypes or ([meta.dtype] if isinstance(meta.dtype, str) else meta.dtype) or []
    # "bf16/fp16": either, by shape; the outputs' dtypes are those compared
    given = [d for g in [*given, *meta.output_dtypes.values()] for d in g.split("/")]
    if not given:
        notes.append("dtype float32 assumed (metadata names none)")
        return ["float32"]
    dtypes = list(dict.fromkeys(dtype_name(d, f"{where}: dtype") for d in given))
    if not any(d in DTYPE_PEAK for d in dtypes):
        # integer routing ops (moe_align_block_size): a roofline charges FLOPs to a compute
        # dtype; theirs are ~0, so the most conservative peak, fp32, is charged
        notes.append(f"dtypes {', '.join(dtypes)} have no compute dtype: float32 added for the "
                     "roofline's peak")
        dtypes.append("float32")
    return dtypes


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


def _metadata_notes(meta: AtrexMetadata, notes: list[str]) -> None:
    """What metadata.json says that has no field of ours: kept, hidden, in the notes."""
    if meta.unknown():
        notes.append(f"metadata.json: fields not imported: {', '.join(meta.unknown())}")
    for what, value in (("id", meta.id), ("status", meta.status), ("phase", meta.phase),
                        ("importance_score", meta.importance_score)):
        if value is not None:
            notes.append(f"metadata.json {what}: {value}")
    for what, dtypes in (("input", meta.input_dtypes), ("output", meta.output_dtypes)):
        if dtypes:
            notes.append(f"metadata.json {what} dtypes: "
                         + ", ".join(f"{k} {v}" for k, v in dtypes.items()))
    for sid, info in meta.shapes.items():
        if isinstance(info, dict) and info:
            notes.append(f"metadata.json shape {sid}: " + "; ".join(
                f"{k} {v}" for k, v in info.items())[:400])


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
        _metadata_notes(meta, notes)
    else:
        notes.append("no metadata.json")
    shapes, init_names, input_names = _shapes(op, meta, notes)
    work = read_roofline(op, shapes, notes)
    for i, s in enumerate(shapes):
        if s.id in work:
            flops, nbytes = work[s.id].numbers()
            shapes[i] = replace(s, flops=flops, bytes=nbytes)
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
    origin = meta.origin
    upstream = " ".join(x for x in (origin.framework, origin.symbol) if x) if origin else ""
    provenance = meta.provenance or meta.source or (
        f"Atrex-Bench {meta.id or op.name}" + (f", from {upstream}" if upstream else "")
        + (f" ({origin.module})" if origin and origin.module else "")
        + f", operator folder {op.name}")
    return ProblemDraft(
        id=pid, origin=str(op), operator=(meta.operator or meta.category or op.name)[:80],
        description=meta.description or docstring(model) or f"Atrex-Bench operator {op.name}",
        dtypes=dtypes, tolerance=_tolerance(meta, dtypes, str(op / "metadata.json")),
        flops_expr=_expression(meta.flops, "flops", shapes, notes),
        bytes_expr=_expression(meta.bytes, "bytes", shapes, notes),
        shapes=shapes, init_params=init_names, entry_classes=ENTRY_CLASSES, files=files,
        provenance=provenance, notes=[f"imported from Atrex-Bench {op.name}", *notes])


def _weights(root: Path, problems: list[ProblemDraft], notes: list[str]
             ) -> tuple[list[Weight], str]:
    """operator_importance.json, in any of the forms docs/import.md lists; none: uniform.
    Weights are kept as the file gives them (un-normalised): scores normalise (scoring)."""
    found = read_importance(root, notes)
    if found is None and (root / "data" / IMPORTANCE).exists():
        root = root / "data"
        found = read_importance(root, notes)
    if found is None:
        notes.append(f"no {IMPORTANCE}: every problem weighted 1.0")
        return [Weight(problem=p.id, weight=1.0) for p in problems], (
            "uniform: the source has no operator_importance.json")
    entries, about = found
    path = root / IMPORTANCE
    by_origin = {Path(p.origin).name: p for p in problems} | {p.id: p for p in problems}
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
        f"Atrex-Bench {IMPORTANCE}, as given (scores normalise)" + (
            f"; {about}" if about else ""))


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
            skipped.append(reason(op, exc.message))
    notes: list[str] = []
    weights, source = _weights(root, problems, notes) if problems else ([], "")
    return SuiteDraft(kind="atrex", source=root,
                      description=f"Imported from Atrex-Bench ({root.name})",
                      problems=problems, weights=weights, weights_source=source, notes=notes,
                      skipped=skipped)
