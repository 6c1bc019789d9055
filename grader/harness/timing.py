"""Timing an entry's kernel on a GPU (runs next to entry code: its numbers are evidence).

Each timed call gets fresh buffers (a copy of one of several pre-generated input sets, so no
cache keyed by address pays), runs after the L2 was flushed by writing a buffer at least twice
its size (as the device reports it), and is bracketed by CUDA events; a third event recorded
after a device-wide synchronisation bounds the call including any work hidden on another
stream, which shows up as a gap.
Sampling stops when the relative standard error of the mean falls below the bound, or when
the time budget is spent.
Standard library and torch only.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import torch

SPIN_CYCLES = 1_000_000  # about 0.5 ms at H100/H200 clocks


def _fresh(values: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(v.clone() if isinstance(v, torch.Tensor) else v for v in values)


def _rse(samples: list[float]) -> float:
    n = len(samples)
    if n < 2:
        return math.inf
    mean = sum(samples) / n
    var = sum((s - mean) ** 2 for s in samples) / (n - 1)
    return math.sqrt(var / n) / mean if mean > 0 else math.inf


def flush_bytes(configured: int, l2_bytes: int) -> int:
    """The L2 flush buffer: twice the device's L2 (as the device reports it), or the configured
    size where that is larger; 1 MiB at least."""
    return max(configured, 2 * l2_bytes, 1 << 20)


def time_kernel(kernel: Callable[..., Any] | list[Callable[..., Any]],
                sets: list[tuple[Any, ...]], *, l2_flush_bytes: int, rse_target: float = 0.01,
                min_samples: int = 10, max_samples: int = 500, budget_s: float = 10.0
                ) -> tuple[dict[str, Any], dict[int, Any]]:
    """Returns the raw samples and, per input set, the output of its last timed call.
    `kernel` may be a list: one callable per input set (module problems build one per set)."""
    calls = kernel if isinstance(kernel, list) else [kernel] * len(sets)
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    n_flush = flush_bytes(l2_flush_bytes, int(getattr(props, "L2_cache_size", 0)))
    flush = torch.empty(n_flush, dtype=torch.uint8, device="cuda")
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    settled = torch.cuda.Event(enable_timing=True)
    device_us: list[float] = []
    host_us: list[float] = []
    last: dict[int, Any] = {}
    began = time.perf_counter()
    i = 0
    while True:
        k = i % len(sets)
        args = _fresh(sets[k])
        torch.cuda.synchronize()
        # The flush (a write over twice the L2) is queued just before the start event, so the
        # GPU is still busy with it while Python launches the kernel.
        flush.fill_(i & 0xFF)
        # Then keep the GPU busy a little longer, so even a slow Python wrapper has queued its
        # launches before the start event runs: otherwise short kernels time the host's launch
        # overhead (seen on the H200, 2026-11-29: a 2 µs rmsnorm timed at 33 µs).
        torch.cuda._sleep(SPIN_CYCLES)
        start.record()
        out = calls[k](*args)
        end.record()
        torch.cuda.synchronize()  # device-wide: waits for work on every stream
        settled.record()  # after the device-wide sync: bounds work hidden on other streams
        settled.synchronize()
        device_us.append(start.elapsed_time(end) * 1000.0)
        host_us.append(start.elapsed_time(settled) * 1000.0)
        last[k] = out
        i += 1
        if i >= max_samples or (i >= min_samples and _rse(device_us) < rse_target):
            break
        if time.perf_counter() - began > budget_s and i >= min(min_samples, 3):
            break
    return {"device_us": device_us, "host_us": host_us, "method": "cuda-events",
            "loop_s": time.perf_counter() - began, "flush_bytes": n_flush}, last
