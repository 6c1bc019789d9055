"""Checks shared by the suite tests (demo, llm-inference): seeded inputs, and solutions run
against references under Triton's CPU interpreter with the grader's own comparison."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from grader.formats.problem import Shape
from grader.paths import REPO
from grader.suite.load import SuiteProblem

SEEDS = (11, 12)

# Run in a fresh interpreter with TRITON_INTERPRET=1 (it must be set before triton is imported).
# Reads a JSON list of cases on stdin; prints one JSON object per case on stdout.
_CHECK_SCRIPT = r"""
import importlib.util, json, sys, time
from pathlib import Path
from grader.judge.outputs import compare
from grader.suite.load import load_problem

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

as_list = lambda v: list(v) if isinstance(v, (tuple, list)) else [v]
for n, case in enumerate(json.load(sys.stdin)):
    problem = load_problem(Path(case["problem_dir"])).problem
    ref = load(Path(case["problem_dir"]) / "reference.py", f"_check_ref_{n}")
    ker = load(case["kernel"], f"_check_kernel_{n}")
    problems, secs = [], []
    for seed in case["seeds"]:
        inputs = ref.make_inputs(seed, "cpu", **case["params"])
        expected = ref.reference(*inputs)
        start = time.perf_counter()
        got = ker.kernel(*inputs)
        secs.append(time.perf_counter() - start)
        outcome = compare(as_list(expected), as_list(got), problem)
        if not outcome.ok:
            problems.append(f"seed {seed}: {outcome.detail}")
    print(json.dumps({"key": case["key"], "problems": problems, "secs": secs}), flush=True)
"""


def load_module(path: Path, prefix: str) -> ModuleType:
    """A file imported as a module of its own (registered: dataclasses look their module up)."""
    name = f"{prefix}_{path.parent.name}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def smoke_case(key: str, bundle: SuiteProblem, shape: Shape, kernel: Path) -> dict[str, Any]:
    return {"key": key, "problem_dir": str(bundle.directory), "kernel": str(kernel),
            "params": shape.params, "seeds": list(SEEDS)}


def run_interpreted(cases: list[dict[str, Any]], timeout: int) -> dict[str, dict[str, Any]]:
    """Every case in one interpreter subprocess; results by case key."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "2",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-c", _CHECK_SCRIPT], input=json.dumps(cases),
                          capture_output=True, text=True, env=env, timeout=timeout, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return {r["key"]: r for r in results}


def assert_matched(results: dict[str, dict[str, Any]], key: str) -> None:
    assert key in results, f"{key}: the checker printed nothing (crashed?)"
    assert not results[key]["problems"], f"{key}: " + "; ".join(results[key]["problems"])
    assert len(results[key]["secs"]) == len(SEEDS)


def assert_seeded_inputs(bundle: SuiteProblem, prefix: str,
                         seed_independent: frozenset[int] = frozenset(),
                         device: str = "cpu") -> None:
    """On every smoke shape: the same seed gives the same inputs, another seed other ones
    (but for the inputs listed in `seed_independent`), on `device`, never all zeros, without
    touching the global RNG (nor, on a GPU, the device's); the reference's outputs have the
    problem's dtypes."""
    ref = load_module(bundle.directory / "reference.py", prefix)
    on_gpu = device.startswith("cuda")
    for shape in (s for s in bundle.problem.shapes if s.smoke):
        state = torch.random.get_rng_state()
        gpu_state = torch.cuda.get_rng_state() if on_gpu else None
        a = ref.make_inputs(1, device, **shape.params)
        b = ref.make_inputs(1, device, **shape.params)
        c = ref.make_inputs(2, device, **shape.params)
        assert torch.equal(state, torch.random.get_rng_state()), "make_inputs used the global RNG"
        if gpu_state is not None:
            assert torch.equal(gpu_state, torch.cuda.get_rng_state()), \
                "make_inputs used the device's global RNG"
        assert any(isinstance(x, torch.Tensor) for x in a)
        for i, (x, y, z) in enumerate(zip(a, b, c, strict=True)):
            if not isinstance(x, torch.Tensor):
                assert x == y == z
                continue
            if x.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
                # torch's CPU equal/max have no fp8 kernels; fp8 -> fp32 is exact.
                x, y, z = (t.to(torch.float32) for t in (x, y, z))
            assert x.device.type == torch.device(device).type
            assert torch.equal(x, y), f"{shape.id} input {i}: same seed, different values"
            assert x.abs().max() > 0, f"{shape.id} input {i} is all zeros"
            if i not in seed_independent:
                assert not torch.equal(x, z), f"{shape.id} input {i}: seeds agree"
        out = ref.reference(*a)
        outs = out if isinstance(out, tuple) else (out,)
        assert {o.dtype for o in outs} <= {getattr(torch, d) for d in bundle.problem.dtypes}
