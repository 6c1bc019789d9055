"""Does the GPU's clock follow the load? One kernel timed three ways while NVML samples the SM
clock, the power draw and the reasons the driver gives for holding the clock down.

    python3 bench/clocks.py [--seconds 1.5] [--json FILE]

The three ways differ in how busy the GPU is between calls:
- grader: the harness's own loop (harness/timing.py: fresh inputs, L2 flush, a 0.5 ms spin,
  one call between events, a device-wide synchronisation): the GPU idles between calls;
- do_bench: `triton.testing.do_bench(..., return_mode="median")`: a flush and the call, queued
  back to back;
- sustained: calls back to back with no flush (bench/fidelity.py's "sustained" column).
Kernels: cuBLAS bf16 GEMMs (compute-bound, 4096³ and 8192³) and a 1 GiB bf16 add
(memory-bound). If the clock drops from the first way to the last for the GEMMs only, the
grader's median and do_bench's differ by the GPU's power management, not by either's
method (docs/benchmarks.md, "Timing fidelity").
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
import triton.testing

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from fidelity import FLUSH_BYTES, sustained_us  # noqa: E402

from grader.harness.timing import time_bare  # noqa: E402

# NVML's clock-event reasons (nvml.h, nvmlClocksEventReason*), the ones that slow a clock.
REASONS = {0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x20: "sw_thermal", 0x40: "hw_thermal",
           0x80: "hw_power_brake"}


def reason_names(mask: int) -> list[str]:
    return [name for bit, name in REASONS.items() if mask & bit]


@contextmanager
def sampled(period_s: float = 0.01) -> Iterator[dict[str, Any]]:
    """NVML's SM clock (MHz), power (W) and clock-event reasons, sampled every `period_s`
    while the block runs; their medians (and the reasons seen) in the yielded dict after."""
    import pynvml

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
    reasons_of = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
        pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
    clocks: list[float] = []
    watts: list[float] = []
    seen = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal seen
        while not stop.is_set():
            clocks.append(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
            watts.append(pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0)
            seen |= reasons_of(handle)
            time.sleep(period_s)

    out: dict[str, Any] = {}
    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield out
    finally:
        stop.set()
        thread.join()
        out.update(sm_mhz=statistics.median(clocks), sm_mhz_min=min(clocks),
                   power_w=statistics.median(watts), power_w_max=max(watts),
                   reasons=reason_names(seen), samples=len(clocks))
        pynvml.nvmlShutdown()


def kernels() -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    def mm(n: int) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        return torch.matmul, (a, torch.randn_like(a))

    x = torch.randn(1 << 29, device="cuda", dtype=torch.bfloat16)  # 1 GiB
    return {"gemm_bf16_4096": mm(4096), "gemm_bf16_8192": mm(8192),
            "add_bf16_1GiB": (torch.add, (x, torch.randn_like(x)))}


def measure(fn: Callable[..., Any], inputs: tuple[Any, ...], seconds: float
            ) -> list[dict[str, Any]]:
    rows = []
    with sampled() as s:
        raw, _ = time_bare(fn, [inputs], l2_flush_bytes=FLUSH_BYTES, rse_target=0.0,
                             max_samples=1 << 30, budget_s=seconds)
    per_call = statistics.median(raw["device_us"])
    rows.append({"way": "grader", "us": per_call, **s})
    with sampled() as s:
        ms = triton.testing.do_bench(lambda: fn(*inputs), warmup=25, rep=int(seconds * 1000),
                                     return_mode="median")
    rows.append({"way": "do_bench", "us": ms * 1000, **s})
    with sampled() as s:
        us = sustained_us(fn, inputs, per_call, seconds=seconds)
    rows.append({"way": "sustained", "us": us, **s})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=1.5, help="per kernel and way")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    print(f"{torch.cuda.get_device_name()}; each way {args.seconds} s, NVML sampled every 10 ms")
    print("| kernel | way | µs per call | SM MHz (median / min) | power W (median / max) | "
          "clock held down by |")
    print("| --- | --- | --- | --- | --- | --- |")
    results = []
    for name, (fn, inputs) in kernels().items():
        for row in measure(fn, inputs, args.seconds):
            results.append({"kernel": name, **row})
            print(f"| {name} | {row['way']} | {row['us']:.2f} | {row['sm_mhz']:.0f} / "
                  f"{row['sm_mhz_min']:.0f} | {row['power_w']:.0f} / {row['power_w_max']:.0f} | "
                  f"{', '.join(row['reasons']) or '-'} |")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
