"""llm-inference problems rms_norm, fused_add_rms_norm, silu_and_mul, rope and softmax: each
problem folder loads, make_inputs is seeded, and our Triton solutions match the references on
every smoke shape under Triton's CPU interpreter (one subprocess for all cases)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from grader.suite import ProblemBundle, load_problem

ROOT = Path(__file__).resolve().parents[2]
SUITE_DIR = ROOT / "problem_bundles" / "llm-inference"
KERNELS = ROOT / "solutions" / "llm-inference" / "kernels"
PROBLEMS = ("rms_norm", "fused_add_rms_norm", "silu_and_mul", "rope", "softmax")
SEEDS = (11, 12)

BUNDLES: dict[str, ProblemBundle] = {pid: load_problem(SUITE_DIR / pid) for pid in PROBLEMS}
SMOKE_CASES = [(pid, s.id) for pid, b in BUNDLES.items() for s in b.problem.shapes if s.smoke]

# Run in a fresh interpreter with TRITON_INTERPRET=1 (it must be set before triton is imported).
# Reads a JSON list of cases on stdin; prints one JSON object per case on stdout.
_CHECK_SCRIPT = r"""
import importlib.util, json, sys, time
from pathlib import Path
import torch
from grader.compare import compare
from grader.suite import load_problem

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

for n, case in enumerate(json.load(sys.stdin)):
    problem = load_problem(Path(case["problem_dir"])).problem
    ref = load(Path(case["problem_dir"]) / "reference.py", f"_llm_ref_{n}")
    ker = load(case["kernel"], f"_llm_kernel_{n}")
    problems, secs = [], []
    for seed in case["seeds"]:
        inputs = ref.make_inputs(seed, "cpu", **case["params"])
        expected = ref.reference(*inputs)
        start = time.perf_counter()
        got = ker.kernel(*inputs)
        secs.append(time.perf_counter() - start)
        as_list = lambda v: list(v) if isinstance(v, (tuple, list)) else [v]
        outcome = compare(as_list(expected), as_list(got), problem)
        if not outcome.ok:
            problems.append(f"seed {seed}: {outcome.detail}")
    print(json.dumps({"key": case["key"], "problems": problems, "secs": secs}), flush=True)
"""


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_llm_a_{path.parent.name}_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def smoke_results() -> dict[str, dict[str, Any]]:
    """Every smoke case of every problem, run once in one interpreter subprocess."""
    cases = []
    for pid, shape_id in SMOKE_CASES:
        bundle = BUNDLES[pid]
        shape = next(s for s in bundle.problem.shapes if s.id == shape_id)
        cases.append({"key": f"{pid}/{shape_id}", "problem_dir": str(bundle.directory),
                      "kernel": str(KERNELS / f"{pid}.py"), "params": shape.params,
                      "seeds": list(SEEDS)})
    env = {**os.environ, "TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "2",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-c", _CHECK_SCRIPT], input=json.dumps(cases),
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return {r["key"]: r for r in results}


@pytest.mark.parametrize("pid", PROBLEMS)
def test_problem_loads(pid: str) -> None:
    problem = BUNDLES[pid].problem
    assert problem.id == pid
    phases = {(s.phase, s.smoke) for s in problem.shapes}
    assert ("prefill", False) in phases and ("decode", False) in phases
    assert sum(1 for s in problem.shapes if not s.smoke and s.phase == "prefill") >= 2
    assert sum(1 for s in problem.shapes if not s.smoke and s.phase == "decode") >= 2
    assert any(s.smoke for s in problem.shapes)
    assert problem.hidden.provenance
    assert (KERNELS / f"{pid}.py").is_file()


@pytest.mark.parametrize("pid", PROBLEMS)
def test_make_inputs_is_seeded(pid: str) -> None:
    bundle = BUNDLES[pid]
    ref = _load(bundle.directory / "reference.py")
    shape = next(s for s in bundle.problem.shapes if s.smoke)
    state = torch.random.get_rng_state()
    a = ref.make_inputs(1, "cpu", **shape.params)
    b = ref.make_inputs(1, "cpu", **shape.params)
    c = ref.make_inputs(2, "cpu", **shape.params)
    assert torch.equal(state, torch.random.get_rng_state()), "make_inputs used the global RNG"
    for i, (x, y, z) in enumerate(zip(a, b, c, strict=True)):
        if isinstance(x, torch.Tensor):
            assert x.device.type == "cpu"
            assert torch.equal(x, y), f"input {i}: same seed, different values"
            assert x.abs().max() > 0, f"input {i} is all zeros"
            if x.is_floating_point() and x.numel() > 64:  # inv_freq depends on theta only
                assert not torch.equal(x, z), f"input {i}: different seeds, same values"
        else:
            assert x == y == z
    outputs = ref.reference(*a)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    dtypes = {getattr(torch, d) for d in bundle.problem.dtypes}
    assert all(o.dtype in dtypes for o in outputs)


@pytest.mark.parametrize(("pid", "shape_id"), SMOKE_CASES)
def test_solution_matches_reference(smoke_results: dict[str, dict[str, Any]],
                                    pid: str, shape_id: str) -> None:
    key = f"{pid}/{shape_id}"
    assert key in smoke_results, f"{key}: the checker printed nothing (crashed?)"
    result = smoke_results[key]
    assert not result["problems"], f"{key}: " + "; ".join(result["problems"])
    assert len(result["secs"]) == len(SEEDS)
