"""What `grader bundle check` can tell about a kernel file without running it: whether it
parses, and whether it binds the name the harness will look up (`kernel`, or for a module
problem one of its entry classes).

Issue 23: `bundle check` said "ok" for a file that did not parse or had no `kernel()`, and
`grader run` then graded it `compile_error`. Both are visible from the source alone, so the
check refuses them. The look is generous: any top-level binding of the name counts (a `def`,
a `class`, an assignment, an import, inside a top-level `if`/`try`/`with` too), since only
the import in the sandbox can say whether it is callable.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence


def _bound_names(body: Sequence[ast.stmt]) -> Iterator[str]:
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for sub in ast.walk(t):
                    if isinstance(sub, ast.Name):
                        yield sub.id
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                yield alias.asname or alias.name.split(".")[0]
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            for field in ("body", "orelse", "finalbody"):
                yield from _bound_names(getattr(node, field, []))
            for handler in getattr(node, "handlers", []):
                yield from _bound_names(handler.body)


def kernel_problem(source: str, filename: str, entry_names: Sequence[str]) -> str | None:
    """Why the harness would fail to import `source` or find its entry point, or None.

    `entry_names`: ("kernel",) for a function problem, the entry classes for a module one.
    """
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        where = f"{filename}:{exc.lineno or 0}"
        return f"{where}: does not parse: {exc.msg}"
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, absurd nesting
        return f"{filename}: does not parse: {type(exc).__name__}"
    if "*" in set(_bound_names(tree.body)) or set(_bound_names(tree.body)) & set(entry_names):
        return None
    want = ("function kernel()" if tuple(entry_names) == ("kernel",)
            else "kernel() nor class " + " or ".join(n for n in entry_names if n != "kernel")
            if "kernel" in entry_names else "class " + " or ".join(entry_names))
    return f"{filename}: defines no {want} at the top level"
