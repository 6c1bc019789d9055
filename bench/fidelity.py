"""Timing fidelity on a GPU: the grader's reported median vs triton.testing.do_bench (median)
in a bare process, for the same kernel, shape and kind of inputs.

    python3 bench/fidelity.py REPORT.json [ENTRY_DIR]

REPORT.json comes from `grader run --device cuda` of ENTRY_DIR (default examples/triton).
Prints one row per shape: the grader's median, do_bench's median, and the kernels' own device
time from torch.profiler (the ground truth of what the GPU spent), with the grader's ratio to
each. Results: docs/benchmarks.md.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import torch
import triton.testing

REPO = Path(__file__).resolve().parents[1]


def _load(path: Path, name: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _profiled_us(fn, inputs, calls: int = 20) -> float:  # type: ignore[no-untyped-def]
    """Device time per call of every kernel `fn` launches, from torch.profiler."""
    fn(*inputs)
    torch.cuda.synchronize()
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(calls):
            fn(*inputs)
        torch.cuda.synchronize()
    total = sum(e.device_time_total for e in prof.events()
                if e.device_type == torch.autograd.DeviceType.CUDA)
    return total / calls


def main() -> None:
    report = json.loads(Path(sys.argv[1]).read_text())
    entry = Path(sys.argv[2]) if len(sys.argv) > 2 else REPO / "examples" / "triton"
    suite = REPO / "problem_bundles" / report["suite"]["id"]
    print(f"{'problem':<11} {'shape':<26} {'grader us':>10} {'do_bench us':>12} "
          f"{'profiler us':>12} {'g/bench':>8} {'g/prof':>7}")
    for p in report["problems"]:
        import tomllib

        problem = tomllib.loads((suite / p["id"] / "problem.toml").read_text())
        params = {s["id"]: s["params"] for s in problem["shapes"]}
        ref = _load(suite / p["id"] / "reference.py", f"ref_{p['id']}")
        kern = _load(entry / "kernels" / f"{p['id']}.py", f"k_{p['id']}")
        for s in p["shapes"]:
            if not s.get("timing"):
                continue
            inputs = ref.make_inputs(12345, "cuda", **params[s["id"]])
            ms = triton.testing.do_bench(lambda inputs=inputs, kern=kern: kern.kernel(*inputs),
                                         warmup=100, rep=500, return_mode="median")
            ours = s["timing"]["median_us"]
            prof = _profiled_us(kern.kernel, inputs)
            print(f"{p['id']:<11} {s['id']:<26} {ours:>10.2f} {ms * 1000:>12.2f} {prof:>12.2f} "
                  f"{ours / (ms * 1000):>8.3f} {ours / prof:>7.3f}")
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
