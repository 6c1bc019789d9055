"""The demo suite and the example entries: the suite loads, the manifests parse, and both
examples match the references on every smoke shape under Triton's CPU interpreter."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from grader.formats.submission import Manifest
from grader.suite import Suite, load_suite

ROOT = Path(__file__).resolve().parents[2]
SUITE_DIR = ROOT / "problem_bundles" / "demo"
EXAMPLES = {name: ROOT / "examples" / name for name in ("triton", "torch-fallback")}
SEEDS = (11, 12)

SUITE: Suite = load_suite(SUITE_DIR)
SMOKE_CASES = [
    (example, pid, shape.id)
    for example in EXAMPLES
    for pid, bundle in SUITE.problems.items()
    for shape in bundle.problem.shapes
    if shape.smoke
]

# Run in a fresh interpreter with TRITON_INTERPRET=1 (it must be set before triton is imported).
# Reads a JSON list of cases on stdin; prints one JSON object per case on stdout.
_CHECK_SCRIPT = r"""
import importlib.util, json, sys, time
import torch

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

modules = {}
for n, case in enumerate(json.load(sys.stdin)):
    for path in (case["reference"], case["kernel"]):
        if path not in modules:
            modules[path] = load(path, f"_demo_mod_{len(modules)}")
    ref, ker = modules[case["reference"]], modules[case["kernel"]]
    problems, secs = [], []
    for seed in case["seeds"]:
        inputs = ref.make_inputs(seed, "cpu", **case["params"])
        expected = ref.reference(*inputs)
        start = time.perf_counter()
        got = ker.kernel(*inputs)
        secs.append(time.perf_counter() - start)
        if not isinstance(got, torch.Tensor) or got.shape != expected.shape \
                or got.dtype != expected.dtype:
            problems.append(f"seed {seed}: got {type(got).__name__} "
                            f"{getattr(got, 'dtype', None)} {tuple(getattr(got, 'shape', ()))}, "
                            f"expected {expected.dtype} {tuple(expected.shape)}")
            continue
        tol = case["tolerance"][str(expected.dtype).removeprefix("torch.")]
        g, e = got.double(), expected.double()
        bad = ~((g - e).abs() <= tol["atol"] + tol["rtol"] * e.abs())  # NaN counts as bad
        if bad.any():
            problems.append(f"seed {seed}: {int(bad.sum())} of {bad.numel()} elements out of "
                            f"tolerance {tol}; max abs err {float((g - e).abs().max())}")
    print(json.dumps({"key": case["key"], "problems": problems, "secs": secs}), flush=True)
"""


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_demo_{path.parent.name}_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def smoke_results() -> dict[str, dict[str, Any]]:
    """Every smoke case of both examples, run once in one interpreter subprocess."""
    cases = []
    for example, pid, shape_id in SMOKE_CASES:
        bundle = SUITE.problems[pid]
        shape = next(s for s in bundle.problem.shapes if s.id == shape_id)
        cases.append({
            "key": f"{example}/{pid}/{shape_id}",
            "reference": str(bundle.directory / "reference.py"),
            "kernel": str(EXAMPLES[example] / "kernels" / f"{pid}.py"),
            "params": shape.params,
            "seeds": list(SEEDS),
            "tolerance": {d: bundle.problem.tolerance_for(d).model_dump()
                          for d in ("float32", "float16", "bfloat16")},
        })
    env = {**os.environ, "TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "2"}
    proc = subprocess.run([sys.executable, "-c", _CHECK_SCRIPT], input=json.dumps(cases),
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return {r["key"]: r for r in results}


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
    bundle = SUITE.problems[pid]
    ref = _load(bundle.directory / "reference.py")
    shape = next(s for s in bundle.problem.shapes if s.smoke)
    state = torch.random.get_rng_state()
    a = ref.make_inputs(1, "cpu", **shape.params)
    b = ref.make_inputs(1, "cpu", **shape.params)
    c = ref.make_inputs(2, "cpu", **shape.params)
    assert torch.equal(state, torch.random.get_rng_state()), "make_inputs used the global RNG"
    tensors = [i for i, x in enumerate(a) if isinstance(x, torch.Tensor)]
    assert tensors
    for i in range(len(a)):
        if i in tensors:
            assert a[i].device.type == "cpu"
            assert torch.equal(a[i], b[i]), f"input {i}: same seed, different values"
            assert not torch.equal(a[i], c[i]), f"input {i}: different seeds, same values"
            assert a[i].abs().max() > 0, f"input {i} is all zeros"
        else:
            assert a[i] == b[i] == c[i]
    out = ref.reference(*a)
    assert out.dtype in {getattr(torch, d) for d in bundle.problem.dtypes}


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
    key = f"{example}/{pid}/{shape_id}"
    assert key in smoke_results, f"{key}: the checker printed nothing (crashed?)"
    result = smoke_results[key]
    assert not result["problems"], f"{key}: " + "; ".join(result["problems"])
    assert len(result["secs"]) == len(SEEDS)
