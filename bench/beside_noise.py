"""Does a standby's set-up disturb a timed loop beside it? (issue 32)

    python3 bench/beside_noise.py [--rounds 6] [--json FILE]

A batch's timed loops wait until the standbys started beside it are at their gates
(run.ahead.Beside): each served worker makes its CUDA context and the device profiler's
first session there (harness.main._prepare_cuda, about 5 s), and on the H100, 2026-12-05,
a later entry's timed loops waited 22.9 s in all for that (docs/benchmarks.md, seventeenth
session). This measures what the wait protects: kernels timed by the grader's own loop
(harness.timing.time_bare: fresh copies, L2 flush, spin, events, device-wide
synchronisation) in three conditions, interleaved round by round (about 20 s a round on an H100):

- quiet: nothing else runs;
- prepare: two processes at a time, again and again, each doing exactly a standby's set-up
  (`_prepare_cuda`: `torch.cuda.init()` and a throwaway profiler session) and exiting, as
  `--ahead-depth 2` starts them;
- judging: the host's judging beside it (float64 comparisons of two 64 MiB outputs on the
  grader's own process, as grading/judging.py runs them on a thread).

Per kernel and condition: the median of the rounds' medians, its shift from quiet, and the
spread of the rounds' medians (max/min - 1). A condition whose shifts and spreads stay
within quiet's own spread disturbs nothing the grader can see; the timed loops could then
run beside it. Needs a CUDA device.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from grader.harness.timing import time_bare  # noqa: E402

FLUSH_BYTES = 256 << 20
CONDITIONS = ("quiet", "prepare", "judging")
PREPARE = ("import sys; sys.path.insert(0, {repo!r}); "
           "from grader.harness.main import _prepare_cuda; _prepare_cuda()")


def kernels() -> dict[str, tuple[Callable[..., Any], list[tuple[Any, ...]]]]:
    """Launch-bound to compute-bound: a 4 µs add, a 1 GiB add, a bf16 GEMM; three input sets
    each (time_bare copies them fresh for every call)."""
    dev = "cuda"

    def sets(*shape: int, dtype: torch.dtype = torch.bfloat16) -> list[tuple[Any, ...]]:
        return [(torch.randn(*shape, device=dev, dtype=dtype),
                 torch.randn(*shape, device=dev, dtype=dtype)) for _ in range(3)]

    return {
        "add_64k": (torch.add, sets(1 << 16)),
        "add_1g": (torch.add, sets(1 << 29)),
        "gemm_4096": (torch.mm, sets(4096, 4096)),
    }


@contextmanager
def beside(condition: str) -> Iterator[None]:
    """`condition` kept running on the host while the block runs."""
    stop = threading.Event()

    def prepare() -> None:  # two standbys' set-up at a time, again and again
        code = PREPARE.format(repo=str(REPO))
        while not stop.is_set():
            procs = [subprocess.Popen([sys.executable, "-W", "ignore", "-c", code])
                     for _ in range(2)]
            for p in procs:
                p.wait()

    def judging() -> None:  # the judge's float64 comparisons, on a thread of this process
        a = torch.randn(1 << 24, dtype=torch.float32)
        b = a + 1e-3 * torch.randn(1 << 24, dtype=torch.float32)
        while not stop.is_set():
            diff = (a.double() - b.double()).abs()
            bool((diff <= 1e-2 + 1e-2 * b.double().abs()).all())

    work = {"prepare": prepare, "judging": judging}.get(condition)
    thread = threading.Thread(target=work, daemon=True) if work else None
    if thread is not None:
        thread.start()
        time.sleep(1.0)  # under way before the first timed call
    try:
        yield
    finally:
        stop.set()
        if thread is not None:
            thread.join()


def measure(rounds: int) -> dict[str, dict[str, list[float]]]:
    """Each kernel's median µs per condition and round (conditions interleaved per round)."""
    ks = kernels()
    for fn, s in ks.values():  # warm: cuBLAS handles, the caching allocator
        fn(*s[0])
    torch.cuda.synchronize()
    out: dict[str, dict[str, list[float]]] = {k: {c: [] for c in CONDITIONS} for k in ks}
    for r in range(rounds):
        for condition in CONDITIONS:
            with beside(condition):
                for name, (fn, s) in ks.items():
                    raw, _ = time_bare(fn, s, l2_flush_bytes=FLUSH_BYTES, min_samples=30,
                                       max_samples=200, rse_target=0.0, budget_s=1.0)
                    out[name][condition].append(statistics.median(raw["device_us"]))
                    # as it goes: a run cut short still shows what it measured
                    print(f"round {r + 1}/{rounds} {condition} {name}: "
                          f"{out[name][condition][-1]:.2f} µs", flush=True)
    return out


def summary(got: dict[str, dict[str, list[float]]]) -> list[dict[str, Any]]:
    rows = []
    for name, by in got.items():
        quiet = statistics.median(by["quiet"])
        for condition, meds in by.items():
            m = statistics.median(meds)
            rows.append({"kernel": name, "condition": condition, "median_us": m,
                         "shift": m / quiet - 1, "spread": max(meds) / min(meds) - 1,
                         "medians_us": meds})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("beside_noise: needs a CUDA device", file=sys.stderr)
        return 2
    rows = summary(measure(args.rounds))
    print(f"{torch.cuda.get_device_name()}, {args.rounds} rounds")
    print("| kernel | condition | median µs | shift from quiet | spread of round medians |")
    print("| --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['kernel']} | {r['condition']} | {r['median_us']:.2f} | "
              f"{100 * r['shift']:+.2f}% | {100 * r['spread']:.2f}% |")
    if args.json:
        args.json.write_text(json.dumps({"device": torch.cuda.get_device_name(),
                                         "rounds": args.rounds, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
