"""The demo suite and the example entries: the suite loads, the manifests parse, and both
examples match the references on every smoke shape under Triton's CPU interpreter."""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from suite_checks import assert_matched, assert_seeded_inputs, run_interpreted, smoke_case

from grader.formats.submission import Manifest
from grader.suite.load import Suite, load_suite

ROOT = Path(__file__).resolve().parents[2]
SUITE_DIR = ROOT / "problem_bundles" / "demo"
EXAMPLES = {name: ROOT / "examples" / name for name in ("triton", "torch-fallback")}

SUITE: Suite = load_suite(SUITE_DIR)
SMOKE_CASES = [
    (example, pid, shape.id)
    for example in EXAMPLES
    for pid, bundle in SUITE.problems.items()
    for shape in bundle.problem.shapes
    if shape.smoke
]

@pytest.fixture(scope="module")
def smoke_results() -> dict[str, dict[str, Any]]:
    """Every smoke case of both examples, run once in one interpreter subprocess."""
    cases = []
    for example, pid, shape_id in SMOKE_CASES:
        bundle = SUITE.problems[pid]
        shape = next(s for s in bundle.problem.shapes if s.id == shape_id)
        cases.append(smoke_case(f"{example}/{pid}/{shape_id}", bundle, shape,
                                EXAMPLES[example] / "kernels" / f"{pid}.py"))
    return run_interpreted(cases, timeout=120)


def test_suite_loads() -> None:
    assert SUITE.id == "demo"
    assert list(SUITE.problems) == ["vector_add", "rmsnorm", "matmul"]
    for bundle in SUITE.problems.values():
        shapes = bundle.problem.shapes
        assert any(s.smoke for s in shapes), f"{bundle.id}: no smoke shape"
        assert any(not s.smoke for s in shapes), f"{bundle.id}: no GPU-sized shape"
        assert bundle.problem.hidden.provenance


def test_weights_cover_the_scored_shapes() -> None:
    weighted = {(w.problem, w.shape) for w in SUITE.weights.weights}
    scored = {(pid, s.id) for pid, b in SUITE.problems.items()
              for s in b.problem.shapes if not s.smoke}
    assert weighted == scored
    assert sum(w.weight for w in SUITE.weights.weights) == pytest.approx(1.0)
    assert SUITE.weights.source.startswith("demo:")


_EXPR_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Name, ast.Load, ast.Constant,
               ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow, ast.USub, ast.UAdd)


@pytest.mark.parametrize("pid", list(SUITE.problems))
def test_flops_and_bytes_are_plain_arithmetic(pid: str) -> None:
    problem = SUITE.problems[pid].problem
    for expr in (problem.flops, problem.bytes):
        tree = ast.parse(expr, mode="eval")
        assert all(isinstance(node, _EXPR_NODES) for node in ast.walk(tree)), expr
        for shape in problem.shapes:
            names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
            assert names <= set(shape.params), f"{expr}: unknown names for {shape.id}"
            value = eval(compile(tree, expr, "eval"), {"__builtins__": {}}, dict(shape.params))
            assert value > 0


@pytest.mark.parametrize("pid", list(SUITE.problems))
def test_reference_imports_only_torch_and_stdlib(pid: str) -> None:
    tree = ast.parse((SUITE.problems[pid].directory / "reference.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots = {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            roots = {(node.module or "").split(".")[0]}
        else:
            continue
        allowed = sys.stdlib_module_names | {"torch", "__future__"}
        assert roots <= allowed, f"{pid}/reference.py imports {roots - allowed}"


@pytest.mark.parametrize("pid", list(SUITE.problems))
def test_make_inputs_is_seeded(pid: str) -> None:
    assert_seeded_inputs(SUITE.problems[pid], "_demo")


@pytest.mark.parametrize("example", list(EXAMPLES))
def test_manifest_parses(example: str) -> None:
    data = tomllib.loads((EXAMPLES[example] / "submission.toml").read_text())
    manifest = Manifest.model_validate(data)
    assert manifest.submission.suite == "demo"
    assert manifest.submission.name == ("triton-example" if example == "triton" else example)
    assert set(manifest.problems) == set(SUITE.problems)
    for entry in manifest.problems.values():
        assert (EXAMPLES[example] / entry.file).is_file()


@pytest.mark.parametrize(("example", "pid", "shape_id"), SMOKE_CASES)
def test_example_matches_reference(smoke_results: dict[str, dict[str, Any]],
                                   example: str, pid: str, shape_id: str) -> None:
    assert_matched(smoke_results, f"{example}/{pid}/{shape_id}")
