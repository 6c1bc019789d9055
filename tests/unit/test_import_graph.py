"""The tree shows the architecture (issue 21): no module of grader/ imports, however indirectly,
one that imports it back. Every import counts: at module level, inside a function (a lazy
import hides a circle, it does not remove it) and under TYPE_CHECKING. The layers below the
command line never reach up into it, and the run layer never into rounds."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

from grader.paths import REPO

PACKAGE = REPO / "grader"


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(REPO).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The grader modules `name` imports (an imported name that is a module counts as one)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            targets = [base, *(f"{base}.{a.name}" for a in node.names)]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            # A package's __init__ holds docstrings only; importing a submodule is not a use.
            if target and target != name and not name.startswith(target + "."):
                out.add(target)
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imported(name, path, modules) for name, path in modules.items()}


def test_the_graph_is_read_from_real_imports() -> None:
    graph = _graph()
    assert "grader.results" in graph["grader.run.grading"]
    assert "grader.harness.main" in graph["grader.harness.entry"]  # relative imports too
    assert len(graph) > 100


def test_no_module_imports_itself_back() -> None:
    try:
        order = list(graphlib.TopologicalSorter(_graph()).static_order())
    except graphlib.CycleError as exc:
        raise AssertionError(f"an import circle: {' -> '.join(exc.args[1])}") from None
    assert len(order) == len(_modules())


def test_layers_do_not_reach_up() -> None:
    """Below the command line nothing imports grader.cli; the run layer knows nothing of
    rounds; the container side (harness) imports nothing of the host's."""
    graph = _graph()
    for name, deps in graph.items():
        if not name.startswith(("grader.cli", "grader.__main__")):
            assert not {d for d in deps if d.startswith("grader.cli")}, name
        if name.startswith(("grader.run", "grader.judge", "grader.sandbox", "grader.images")):
            assert not {d for d in deps if d.startswith("grader.round")}, name
        if name.startswith("grader.harness"):
            assert all(d.startswith("grader.harness") for d in deps), (name, deps)
