"""Timing fidelity on a GPU: the grader's reported median against other clocks, in a bare
process, for the same kernel, shape and kind of inputs.

    python3 bench/fidelity.py REPORT [ENTRY_DIR] [--min-us 0] [--problem P] [--json F] [--suite S]

REPORT is the report.json of `grader run --device cuda` of ENTRY_DIR (default examples/triton),
or the checkpoint folder of a grading cut short (OUT/.checkpoint/problems; its suite is --suite,
default llm-inference). One row per timed shape:
- grader: the median the report holds (the entry's container, the harness's timed loop);
- bare: the same loop (harness/timing.py's time_bare, three fresh input sets) in this process,
  with no container: what the container itself adds;
- do_bench: triton.testing.do_bench(..., return_mode="median") on one input set;
- launch: host microseconds per call of the entry's Python function, launches queued without
  a synchronisation. do_bench queues, per call, its flush, two events and the call with no
  wait between calls: when that host work outlasts the flush and the kernel on the device, the
  GPU waits for the launch and do_bench times it (its excess over "bare", the last column);
- profiler: the device time per call that torch.profiler records for the kernels (warm L2:
  inputs re-read from the cache when they fit);
- sustained: device time per call of calls back to back for about do_bench's 200 ms (no
  flush, no wait), the later half's median: if the GPU lowers its clocks under a sustained
  load, this and do_bench show it and the grader's loop, which waits after every call, does not.
Then the ratios grader/do_bench and grader/bare, do_bench's excess over the bare loop, and
do_bench's flush time, measured here.
Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import torch
import triton.testing

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from grader.harness.timing import time_bare  # noqa: E402

FLUSH_BYTES = 256 << 20  # the grader's l2_flush_bytes (problem_run.TimingKnobs)


def _load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _profiled_us(fn: Any, inputs: tuple[Any, ...], calls: int = 20) -> float:
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
    return float(total) / calls


def _launch_us(fn: Any, inputs: tuple[Any, ...], calls: int = 50) -> float:
    """Host time per call with nothing waited for: the launch overhead alone (once the queue
    is long the host may block on it, which only makes this an overestimate)."""
    fn(*inputs)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn(*inputs)
    host = (time.perf_counter() - t0) / calls
    torch.cuda.synchronize()
    return host * 1e6


def sustained_us(fn: Any, inputs: tuple[Any, ...], per_call_us: float,
                  seconds: float = 0.2) -> float:
    """Device µs per call of back-to-back calls for about `seconds`, in batches of about 5 ms
    between CUDA events; the median of the later half of the batches."""
    k = max(1, round(5000 / max(per_call_us, 1.0)))
    batches = max(4, round(seconds * 1e6 / (k * max(per_call_us, 1.0))))
    events = [torch.cuda.Event(enable_timing=True) for _ in range(batches + 1)]
    fn(*inputs)
    torch.cuda.synchronize()
    events[0].record()
    for b in range(batches):
        for _ in range(k):
            fn(*inputs)
        events[b + 1].record()
    torch.cuda.synchronize()
    per_call = [events[b].elapsed_time(events[b + 1]) * 1000 / k for b in range(batches)]
    return statistics.median(per_call[batches // 2 :])


def _flush_us() -> float:
    """do_bench's L2 flush (zeroing 256 MiB) on this GPU, by CUDA events."""
    cache = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(20):
        start.record()
        cache.zero_()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1000)
    return sorted(times)[len(times) // 2]


def read_report(path: Path, suite: str) -> dict[str, Any]:
    """A report.json, or a checkpoint folder read as one (its problems, the given suite)."""
    if not path.is_dir():
        return json.loads(path.read_text())
    from grader.grading.checkpoint import Finished

    problems = [Finished.from_json(f.read_text()).result.model_dump(mode="json")
                for f in sorted(path.glob("*.json"))]
    return {"suite": {"id": suite}, "problems": problems}


def measure(report: dict[str, Any], entry: Path, min_us: float, only: list[str]
            ) -> list[dict[str, Any]]:
    suite = REPO / "problem_bundles" / report["suite"]["id"]
    rows = []
    for p in report["problems"]:
        if only and p["id"] not in only:
            continue
        problem = tomllib.loads((suite / p["id"] / "problem.toml").read_text())
        params = {s["id"]: s["params"] for s in problem["shapes"]}
        ref = _load(suite / p["id"] / "reference.py", f"ref_{p['id']}")
        kern = _load(entry / "kernels" / f"{p['id']}.py", f"k_{p['id']}")
        for s in p["shapes"]:
            if not s.get("timing") or s["timing"]["median_us"] < min_us:
                continue
            sets = [tuple(ref.make_inputs(12345 + k, "cuda", **params[s["id"]]))
                    for k in range(3)]
            inputs = sets[0]
            kern.kernel(*inputs)  # compile and autotune outside every clock
            torch.cuda.synchronize()
            raw, _ = time_bare(kern.kernel, sets, l2_flush_bytes=FLUSH_BYTES, budget_s=5.0)
            bare = statistics.median(raw["device_us"])
            ms = triton.testing.do_bench(lambda inputs=inputs, kern=kern: kern.kernel(*inputs),
                                         warmup=25, rep=200, return_mode="median")
            rows.append({"problem": p["id"], "shape": s["id"],
                         "grader_us": s["timing"]["median_us"], "bare_us": bare,
                         "do_bench_us": ms * 1000, "launch_us": _launch_us(kern.kernel, inputs),
                         "profiler_us": _profiled_us(kern.kernel, inputs),
                         "sustained_us": sustained_us(kern.kernel, inputs, bare)})
            del sets, inputs
            torch.cuda.empty_cache()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path)
    ap.add_argument("entry", type=Path, nargs="?", default=REPO / "examples" / "triton")
    ap.add_argument("--min-us", type=float, default=0.0,
                    help="only shapes whose graded median is at least this")
    ap.add_argument("--problem", action="append", default=[], help="only these problems")
    ap.add_argument("--json", type=Path, default=None, help="write the rows here too")
    ap.add_argument("--suite", default="llm-inference", help="a checkpoint folder's suite")
    args = ap.parse_args()
    report = read_report(args.report, args.suite)
    flush = _flush_us()
    rows = measure(report, args.entry, args.min_us, args.problem)
    print(f"{torch.cuda.get_device_name()}; do_bench's L2 flush (zero 256 MiB): {flush:.1f} us")
    print("| problem | shape | grader µs | bare µs | do_bench µs | launch µs | profiler µs | "
          "sustained µs | grader/do_bench | grader/bare | do_bench - bare µs |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['problem']} | {r['shape']} | {r['grader_us']:.2f} | {r['bare_us']:.2f} | "
              f"{r['do_bench_us']:.2f} | {r['launch_us']:.1f} | {r['profiler_us']:.2f} | "
              f"{r['sustained_us']:.2f} | "
              f"{r['grader_us'] / r['do_bench_us']:.3f} | {r['grader_us'] / r['bare_us']:.3f} | "
              f"{r['do_bench_us'] - r['bare_us']:.1f} |")
    if args.json:
        args.json.write_text(json.dumps({"flush_us": flush, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
