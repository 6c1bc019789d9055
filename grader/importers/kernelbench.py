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
import sys
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
    reason,
    render_template,
    top_class,
    top_function,
)

FILE_NAME = re.compile(r"(\d+)_([\w.-]+)\.py")
# What an imported problem's image has besides the standard library (images/): a source that
# imports anything else cannot run there, and is refused with that reason.
AVAILABLE = {"torch", "triton", "numpy"}
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
    """The value of a constant expression over `known` names (a flat tuple or list of them
    too); _NotConstant otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, bool | int | float | str):
        return node.value
    if isinstance(node, ast.Name) and node.id in known:
        return known[node.id]
    if isinstance(node, ast.Tuple | ast.List):
        items = [_constant(e, known) for e in node.elts]
        if any(isinstance(v, list) for v in items):
            raise _NotConstant  # nested: no param can hold it
        return [v for v in items if not isinstance(v, list)]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        v = _constant(node.operand, known)
        if isinstance(v, int | float) and not isinstance(v, bool):
            return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        a, b = _constant(node.left, known), _constant(node.right, known)
        if isinstance(node.op, ast.Mult) and isinstance(a, list) and isinstance(b, int) \
                and not isinstance(b, bool) and 0 <= b <= 1024:
            return a * b  # [1024] * 16: a repeated list
        if isinstance(node.op, ast.Add) and isinstance(a, list) and isinstance(b, list):
            return a + b
        if not (_number(a) and _number(b)) or (
                isinstance(node.op, ast.Pow) and abs(b) > MAX_EXPONENT):  # type: ignore[arg-type]
            raise _NotConstant
        try:
            result = _BINARY[type(node.op)](a, b)
        except (ArithmeticError, ValueError):
            raise _NotConstant from None
        if isinstance(result, int | float):
            return result
    raise _NotConstant


def _number(v: Param) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _assignments(tree: ast.Module) -> list[tuple[str, ast.expr]]:
    """Module-level `NAME = <expression>`, in order."""
    out: list[tuple[str, ast.expr]] = []
    for stmt in tree.body:
        target: ast.expr | None = None
        value: ast.expr | None = None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            target, value = stmt.target, stmt.value
        if isinstance(target, ast.Name) and value is not None:
            out.append((target.id, value))
    return out


def _constants(assigned: list[tuple[str, ast.expr]], given: dict[str, Param] | None = None
               ) -> dict[str, Param]:
    """The constants, in order (a later one may use earlier ones); `given`: values that
    replace those of the free ones (a literal, not computed from others), which the others
    then follow (smoke shapes)."""
    known: dict[str, Param] = {}
    for name, value in assigned:
        try:
            known[name] = _constant(value, known)
            if given and name in given and not _uses_names(value):
                known[name] = given[name]
        except _NotConstant:
            known.pop(name, None)  # rebound to something else: no longer a constant
    return known


def _uses_names(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) for n in ast.walk(node))


def _foreign_imports(tree: ast.Module) -> list[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return sorted(n for n in names if n not in AVAILABLE and n not in sys.stdlib_module_names)


def _init_exprs(fn: ast.FunctionDef | None, where: str) -> list[ast.expr]:
    if fn is None:
        return []
    returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return)]
    value = returns[0].value if len(returns) == 1 else None
    if not isinstance(value, ast.List | ast.Tuple):
        raise ProblemError(f"{where}: get_init_inputs() does not return a list literal",
                           hint="the importer reads it without running it (docs/import.md)")
    return list(value.elts)


def _init_values(exprs: list[ast.expr], known: dict[str, Param], where: str) -> list[Param]:
    values = []
    for e in exprs:
        try:
            values.append(_constant(e, known))
        except _NotConstant:
            raise ProblemError(
                f"{where}: get_init_inputs() returns {ast.unparse(e)[:80]!r}, which is not a "
                "constant: a constructor argument must be a number, a string, a flat tuple or "
                "list of them, or a module-level constant computed from those",
                hint="a tensor or an object (a config) cannot be a shape param; give the "
                "value literally in the file (docs/import.md)") from None
    return values


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
    foreign = _foreign_imports(tree)
    if foreign:
        raise ProblemError(f"{where}: imports {', '.join(foreign)}, which the grader's images "
                           "do not have (they hold torch, triton and numpy)",
                           hint="a reference runs in a container without network or other "
                           "packages (docs/import.md)")
    init_fn = top_function(tree, "get_init_inputs")
    if init_fn is None:
        notes.append("no get_init_inputs(): Model() takes no arguments")
    assigned = _assignments(tree)
    known = _constants(assigned)
    exprs = _init_exprs(init_fn, where)
    values = _init_values(exprs, known, where)
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

    def recompute(given: dict[str, Param]) -> dict[str, Param]:
        # The file's constants again from the scaled free ones, then its constructor
        # arguments: a param that feeds another (N = 2 * dim) stays consistent.
        again = _constants(assigned, given)
        return {**dict(zip(names, _init_values(exprs, again, where), strict=False)), **again}

    free = tuple(n for n, v in assigned if n in known and not _uses_names(v))
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
        notes=[f"imported from KernelBench {rel.as_posix()}", *notes],
        scalable=free, recompute=recompute)


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
    if root.is_dir():  # no silent skip: a level folder's other .py files are listed
        skipped += [f"{p}: not named <n>_<Name>.py, so not read as a problem"
                    for p in sorted(root.rglob("*.py")) if not FILE_NAME.fullmatch(p.name)
                    and LEVEL_DIR.fullmatch(p.parent.name)]
    for path in problem_files(root):
        try:
            problems.append(_problem(path, base, taken))
        except ProblemError as exc:
            if not skip_bad:
                raise
            skipped.append(reason(path, exc.message))
    return SuiteDraft(
        kind="kernelbench", source=root, description=f"Imported from KernelBench ({root.name})",
        problems=problems, weights=[Weight(problem=p.id, weight=1.0) for p in problems],
        weights_source="uniform: KernelBench has no importance weights",
        notes=["every problem weighted 1.0: KernelBench has no weights"], skipped=skipped)
