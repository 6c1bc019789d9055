"""Time a suite's implementations in one bare process on a GPU, with the grader's own timing
loop: the quick way to a baseline table when grading every problem in containers costs too much
device time (docs/benchmarks.md says which numbers came from where).

    python bench/baseline_bare.py [--suite problem_bundles/llm-inference] \
        [--entry triton=solutions/llm-inference/kernels --entry torch=...] \
        [--problem P ...] [--seeds 2] [--budget 2.0] -o results.json

For each scored (non-smoke) shape: the reference's make_inputs on the GPU for each seed (the
timing sets), the reference's outputs, then per entry: one warm-up call, its outputs checked
with grader.judge.outputs against the reference's, and its time from grader.harness.timing
(fresh inputs per call, L2 flushed, CUDA events, median). The reference itself is timed the
same way. Results are written after every shape (a run cut short keeps what it measured);
`python bench/baseline.py --bare results.json` prints the table.

No sandbox, no detection: this trusts the code it runs, so run only our own entries with it.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from grader.formats.problem import Shape
from grader.harness.timing import time_bare
from grader.judge.outputs import compare
from grader.scoring.derive import load_reference
from grader.suite.load import SuiteProblem, load_suite

L2_FLUSH_BYTES = 256 << 20


def _load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _as_list(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _measure_shape(sp: SuiteProblem, shape: Shape, ref: Any,
                   fns: dict[str, Callable[..., Any]], seeds: int, budget_s: float
                   ) -> dict[str, Any]:
    """One shape's row; its tensors die with this call."""
    row: dict[str, Any] = {"problem": sp.id, "shape": shape.id, "phase": shape.phase}
    try:
        sets = [tuple(ref.make_inputs(1000 + i, "cuda", **shape.params)) for i in range(seeds)]
        with torch.no_grad():
            expected = [_as_list(ref.reference(*s)) for s in sets]
    except Exception as exc:
        row["error"] = f"{type(exc).__name__}: {exc}"[:300]
        return row
    for name, fn in fns.items():
        try:
            fn(*sets[0])  # compile, autotune
            torch.cuda.synchronize()
            outcomes = [compare(e, _as_list(fn(*s)), sp.problem)
                        for e, s in zip(expected, sets, strict=True)]
            bad = [o.detail for o in outcomes if not o.ok]
            raw, _ = time_bare(fn, sets, l2_flush_bytes=L2_FLUSH_BYTES, budget_s=budget_s)
            row[name] = {"median_us": statistics.median(raw["device_us"]),
                         "samples": len(raw["device_us"]), "correct": not bad,
                         **({"detail": bad[0][:300]} if bad else {})}
        except Exception as exc:  # one entry failing must not stop the table
            row[name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    return row


def measure(suite_dir: Path, entries: dict[str, Path], problems: list[str], seeds: int,
            budget_s: float, out_path: Path) -> dict[str, Any]:
    suite = load_suite(suite_dir)
    results: dict[str, Any] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                               "date": time.strftime("%Y-%m-%d"), "shapes": []}
    unknown = sorted(set(problems) - set(suite.problems))
    if unknown:  # before any device time is spent
        sys.exit(f"not problems of suite {suite.id}: {', '.join(unknown)}")
    for pid in problems or list(suite.problems):
        sp = suite.problems[pid]
        ref = load_reference(sp.directory)
        fns = {"reference": ref.reference}
        for name, folder in entries.items():
            if (folder / f"{pid}.py").is_file():
                fns[name] = _load(folder / f"{pid}.py", f"_bare_{name}_{pid}").kernel
        for shape in (s for s in sp.problem.shapes if not s.smoke):
            row = _measure_shape(sp, shape, ref, fns, seeds, budget_s)
            results["shapes"].append(row)
            out_path.write_text(json.dumps(results, indent=1))
            print(json.dumps(row), flush=True)
            gc.collect()
            torch.cuda.empty_cache()
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", type=Path, default=Path("problem_bundles/llm-inference"))
    ap.add_argument("--entry", action="append", default=None,
                    help="NAME=KERNELS_DIR (default: triton and torch of llm-inference)")
    ap.add_argument("--problem", action="append", default=[])
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--budget", type=float, default=2.0, help="timing budget per shape (s)")
    ap.add_argument("-o", "--output", type=Path, required=True)
    args = ap.parse_args()
    pairs = args.entry or ["triton=solutions/llm-inference/kernels",
                           "torch=solutions/llm-inference-torch/kernels"]
    entries = {name: Path(folder) for name, folder in (p.split("=", 1) for p in pairs)}
    if not torch.cuda.is_available():
        sys.exit("baseline_bare.py needs a CUDA GPU")
    measure(args.suite, entries, args.problem, args.seeds, args.budget, args.output)


if __name__ == "__main__":
    main()
