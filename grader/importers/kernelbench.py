"""`grader import kernelbench DIR`: KernelBench problem files as a suite of ours.

A problem is one file `<level>/<n>_<Name>.py` defining `class Model(nn.Module)`, `get_inputs()`
and `get_init_inputs()`, sized by module-level constants. It becomes one problem with one
shape: the file as it is. The file is read, never run, here: the constants and
get_init_inputs()'s values are evaluated from the syntax tree (numbers, strings, names of
earlier constants and arithmetic). What is assumed (phase, dtype, tolerance, weights) is in
docs/import.md.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grader.errors import ProblemError, UsageError
from grader.formats.problem import Weight
from grader.importers.common import (
    Param,
    ProblemDraft,
    ShapeDraft,
    SuiteDraft,
    constructor_args,
    docstring,
    merge_params,
    problem_id,
    read_python,
    render_template,
    top_class,
    top_function,
)

FILE_NAME = re.compile(r"(\d+)_(\w+)\.py")
LEVEL_DIR = re.compile(r"level[_-]?\d+", re.IGNORECASE)
ENTRY_CLASSES = ["ModelNew", "Model"]
# KernelBench's own correctness check: torch.allclose(atol=1e-2, rtol=1e-2), every dtype.
TOLERANCE = {d: {"atol": 1e-2, "rtol": 1e-2} for d in ("float32", "float16", "bfloat16")}
MAX_EXPONENT = 64

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}


class _NotConstant(Exception):
    pass


def _constant(node: ast.AST, known: dict[str, Param]) -> Param:
    """The value of a constant expression over `known` names; _NotConstant otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, bool | int | float | str):
        return node.value
    if isinstance(node, ast.Name) and node.id in known:
        return known[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        v = _constant(node.operand, known)
        if isinstance(v, int | float) and not isinstance(v, bool):
            return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        a, b = _constant(node.left, known), _constant(node.right, known)
        if isinstance(a, str) or isinstance(b, str) or isinstance(a, bool) or isinstance(
                b, bool) or (isinstance(node.op, ast.Pow) and abs(b) > MAX_EXPONENT):
            raise _NotConstant
        try:
            result = _BINARY[type(node.op)](a, b)
        except (ArithmeticError, ValueError):
            raise _NotConstant from None
        if isinstance(result, int | float):
            return result
    raise _NotConstant


def _constants(tree: ast.Module) -> dict[str, Param]:
    """Module-level `NAME = <constant expression>`, in order (a later one may use earlier)."""
    known: dict[str, Param] = {}
    for stmt in tree.body:
        target: ast.expr | None = None
        value: ast.expr | None = None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            target, value = stmt.target, stmt.value
        if not isinstance(target, ast.Name) or value is None:
            continue
        try:
            known[target.id] = _constant(value, known)
        except _NotConstant:
            known.pop(target.id, None)  # rebound to something else: no longer a constant
    return known


def _init_values(fn: ast.FunctionDef | None, known: dict[str, Param], where: str
                 ) -> list[Param]:
    if fn is None:
        return []
    returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return)]
    value = returns[0].value if len(returns) == 1 else None
    if not isinstance(value, ast.List | ast.Tuple):
        raise ProblemError(f"{where}: get_init_inputs() does not return a list literal",
                           hint="the importer reads it without running it (docs/import.md)")
    try:
        return [_constant(e, known) for e in value.elts]
    except _NotConstant:
        raise ProblemError(
            f"{where}: get_init_inputs() returns {ast.unparse(value)[:120]}: only numbers, "
            "strings and module-level constants can be shape params",
            hint="a tuple or tensor constructor argument cannot be imported (docs/import.md)"
        ) from None


def _problem(path: Path, root: Path, taken: set[str]) -> ProblemDraft:
    notes: list[str] = []
    data, tree = read_python(path)
    where = str(path)
    model = top_class(tree, "Model")
    if model is None:
        raise ProblemError(f"{where}: defines no class Model",
                           hint="a KernelBench problem defines class Model(nn.Module)")
    if top_function(tree, "get_inputs") is None:
        raise ProblemError(f"{where}: defines no get_inputs()")
    init_fn = top_function(tree, "get_init_inputs")
    if init_fn is None:
        notes.append("no get_init_inputs(): Model() takes no arguments")
    known = _constants(tree)
    values = _init_values(init_fn, known, where)
    names, required, varargs = constructor_args(model)
    if varargs or len(values) > len(names):
        raise ProblemError(f"{where}: get_init_inputs() gives {len(values)} value(s), "
                           f"Model.__init__ names {len(names)} argument(s)",
                           hint="constructor arguments are passed by name: *args cannot be")
    if len(values) < required:
        raise ProblemError(f"{where}: get_init_inputs() gives {len(values)} value(s), "
                           f"Model.__init__ needs {required}")
    init = dict(zip(names, values, strict=False))
    params = merge_params(init, known, f"{where}: shape")
    rel = path.relative_to(root) if path != root else Path(path.name)
    level = next((p for p in reversed(rel.parts[:-1]) if LEVEL_DIR.fullmatch(p)), None)
    if level is None and len(rel.parts) > 1:
        level = rel.parts[-2]
    stem_match = FILE_NAME.fullmatch(path.name)
    name = stem_match.group(2) if stem_match else path.stem
    pid = problem_id(f"{level}_{path.stem}" if level else path.stem, taken)
    shape = ShapeDraft(id="default", params=params, phase="prefill", keys=("default",))
    notes += ["one shape, the file as it is; phase prefill assumed",
              "dtype float32 assumed; tolerance atol = rtol = 1e-2 (KernelBench's check)"]
    files = {"reference.py": render_template("kernelbench_reference.py.tmpl", id=pid,
                                             source=rel.as_posix(), ident=pid,
                                             constants=repr(tuple(known))),
             "source_problem.py": data}
    return ProblemDraft(
        id=pid, origin=where, operator=name[:80],
        description=docstring(model) or docstring(tree) or f"{name} (KernelBench)",
        dtypes=["float32"], tolerance=TOLERANCE, flops_expr=None, bytes_expr=None,
        shapes=[shape],
        init_params=list(init), entry_classes=ENTRY_CLASSES, files=files,
        provenance=f"KernelBench {rel.as_posix()}",
        notes=[f"imported from KernelBench {rel.as_posix()}", *notes])


def problem_files(root: Path) -> list[Path]:
    """`<n>_<Name>.py` files under `root` (or `root` itself), by level then number."""
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise UsageError(f"{root}: no such file or folder",
                         hint="pass a KernelBench folder (e.g. KernelBench/ or level1/)")
    found = [p for p in root.rglob("*.py") if FILE_NAME.fullmatch(p.name)
             and not any(part.startswith(".") for part in p.relative_to(root).parts)]

    def order(p: Path) -> tuple[str, int, str]:
        m = FILE_NAME.fullmatch(p.name)
        return (p.parent.as_posix(), int(m.group(1)) if m else 0, p.name)

    if not found:
        raise ProblemError(f"{root}: no KernelBench problem file (<level>/<n>_<Name>.py)")
    return sorted(found, key=order)


def read(root: Path, *, skip_bad: bool = False) -> SuiteDraft:
    """The KernelBench files under `root` as a suite draft; each bad file a ProblemError
    (with `skip_bad`: left out, and listed in `skipped`)."""
    taken: set[str] = set()
    problems: list[ProblemDraft] = []
    skipped: list[str] = []
    base = root if root.is_dir() else root.parent
    for path in problem_files(root):
        try:
            problems.append(_problem(path, base, taken))
        except ProblemError as exc:
            if not skip_bad:
                raise
            skipped.append(f"{path}: {exc.message}")
    return SuiteDraft(
        kind="kernelbench", source=root, description=f"Imported from KernelBench ({root.name})",
        problems=problems, weights=[Weight(problem=p.id, weight=1.0) for p in problems],
        weights_source="uniform: KernelBench has no importance weights",
        notes=["every problem weighted 1.0: KernelBench has no weights"], skipped=skipped)
