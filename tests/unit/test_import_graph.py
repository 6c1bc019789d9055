"""The tree shows the architecture (issue 21): no module of grader/ imports, however indirectly,
one that imports it back. Every import counts: at module level, inside a function (a lazy
import hides a circle, it does not remove it) and under TYPE_CHECKING. The layers below the
command line never reach up into it, and the run layer never into rounds."""

from __future__ import annotations

import ast
import graphlib
import re
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
    assert "grader.model.results" in graph["grader.grading.grader"]
    assert "grader.harness.main" in graph["grader.harness.entry"]  # relative imports too
    assert len(graph) > 100


def test_no_module_imports_itself_back() -> None:
    try:
        order = list(graphlib.TopologicalSorter(_graph()).static_order())
    except graphlib.CycleError as exc:
        raise AssertionError(f"an import circle: {' -> '.join(exc.args[1])}") from None
    assert len(order) == len(_modules())


# The packages (and top-level modules) of grader/, lowest first: the data's order of one
# grading (intake → images → sandbox → run → judge → scoring → report), under it what every
# layer shares (the container side, the file formats, the domain model and evidence types, the
# suite, detection), over it what drives a grading and what is built on it (issue 33). A name
# may import only names before it in this list, and modules of its own package.
LAYERS = (
    "harness",  # the container side: standard library, torch and triton only
    "paths", "errors", "verdicts", "files", "terminal",
    "formats",  # the files users write
    "model",  # results, findings, the score card, the evidence types: run and judge share them
    "suite",  # finding and loading suites
    "detect",  # policies, static analysis, the trace judge
    "intake", "images", "sandbox", "run", "judge", "scoring", "report",
    "grading",  # one grading driven from its options to its Report
    "organiser",  # suite check, the release kit
    "round", "importers", "cli", "__main__",
)


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def test_every_package_has_its_layer() -> None:
    unknown = {_layer(m) for m in _graph()} - set(LAYERS) - {"grader"}
    assert not unknown, f"place {sorted(unknown)} in LAYERS"


def _upward(graph: dict[str, set[str]]) -> list[str]:
    """Each import of `graph` from one package into the same layer's or a later one's."""
    rank = {name: k for k, name in enumerate(LAYERS)}
    return sorted(
        f"{m} -> {d}" for m, deps in graph.items() for d in deps
        if _layer(m) != _layer(d) and rank.get(_layer(d), -1) >= rank.get(_layer(m), -1))


def test_packages_import_only_the_layers_before_them() -> None:
    """No package imports a later layer: no package-level circle, no upward import, with
    imports inside functions and under TYPE_CHECKING counted (issue 33)."""
    upward = _upward(_graph())
    assert not upward, "imports that reach up:\n" + "\n".join(upward)


def test_the_layer_check_sees_an_upward_import() -> None:
    graph = {"grader.run.batch": {"grader.judge.problem", "grader.model.runs"},
             "grader.judge.problem": {"grader.model.runs"}, "grader.model.runs": set(),
             "grader.model.results": {"grader.model.runs"}}
    assert _upward(graph) == ["grader.run.batch -> grader.judge.problem"]


def test_the_judge_sees_no_container() -> None:
    """The judge is pure: evidence in, verdicts out. It imports no sandbox, run or Docker
    module, and nothing that does."""
    graph = _graph()
    for name, deps in graph.items():
        if _layer(name) == "judge":
            assert not {d for d in deps if _layer(d) in {"sandbox", "run"}}, name


def test_package_docstrings_name_only_modules_that_exist() -> None:
    """A package's docstring lists its modules: each name it gives without a folder is a
    module of that package (issue 33 found two listing modules long gone)."""
    for init in PACKAGE.rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        for name in re.findall(r"(?<![\w/.])([a-z_]+\.py)\b", doc):
            assert (init.parent / name).is_file(), f"{init}: {name}"
