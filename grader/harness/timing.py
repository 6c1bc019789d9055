"""Calling and timing an entry's kernel on a GPU (runs next to entry code: its numbers are
evidence).

Every call of an entry on a GPU goes through `Clock.call`, timed or not. Each gets fresh
buffers (a timed call's inputs are drawn for it alone, from a seed of its own, by
harness/fresh.py: neither a cache keyed by address nor one keyed by value pays), runs after
the L2 was flushed by writing a buffer at least twice its size (as the device reports it),
and is bracketed by CUDA events; a third event recorded after a device-wide synchronisation
bounds the call including any work hidden on another stream, which shows up as a gap.
Sampling stops when the relative standard error of the median (the score) falls below the
bound, or when the time budget is spent.
Standard library and torch only.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import torch

from .protocol import BUDGET_S, MAX_SAMPLES, MIN_SAMPLES, RSE_TARGET

SPIN_CYCLES = 1_000_000  # the shortest spin: about 0.5 ms at H100/H200 clocks
# The spin before a call's start event covers this many times the longest host time of the
# entry's last few calls (its Python wrapper, Triton's launcher, the recorder's hooks), up to
# a bound: a wrapper slower than the spin leaves the GPU idle inside the timed window, which
# times the host and reads as work no kernel explains (rule TM915). Seen on the H200,
# 2026-12-03: Liger's fused add+RMSNorm spends 380-630 µs of host time per call.
SPIN_HOST_FACTOR = 2.0
SPIN_HOST_WINDOW = 4
MAX_SPIN_US = 20_000.0
MAX_CYCLES_PER_US = 4_000.0  # a 4 GHz clock: above any GPU's (the H200's peaks near 2 GHz)


def _fresh(values: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(v.clone() if isinstance(v, torch.Tensor) else v for v in values)


def _rse(samples: list[float]) -> float:
    """The relative standard error of the samples' median, the score: 1.2533 sigma / sqrt(n)
    for a normal spread, sigma estimated from the inter-quartile range (IQR / 1.349). A host
    stall moves the median by one rank whatever its length, where it kept the mean's error
    above the bound until the sample cap: on the H200 (2026-12-04) a 3.9 µs kernel whose
    samples held a few stalls (IQR 0.1 µs, mean 65 µs) ran 501 calls; by its median, 10."""
    n = len(samples)
    if n < 4:
        return math.inf
    q1, median, q3 = statistics.quantiles(samples, n=4)
    return 1.2533 * (q3 - q1) / 1.349 / math.sqrt(n) / median if median > 0 else math.inf


def flush_bytes(configured: int, l2_bytes: int) -> int:
    """The L2 flush buffer: twice the device's L2 (as the device reports it), or the configured
    size where that is larger; 1 MiB at least."""
    return max(configured, 2 * l2_bytes, 1 << 20)


class Spin:
    """How long the GPU is kept busy before each call's start event: the shortest spin, or
    SPIN_HOST_FACTOR times the longest host time of the last SPIN_HOST_WINDOW calls, up to
    MAX_SPIN_US. Every call is sized the same way, timed or not. The spin's rate (cycles per
    µs) is read off the calls' own spins, never from spins of its own: the device record
    matches its spins with the calls (record.DeviceCalls)."""

    def __init__(self) -> None:
        self.cycles_per_us: float | None = None  # the fastest seen: the clock rises under load
        self.recent: deque[float] = deque(maxlen=SPIN_HOST_WINDOW)

    def cycles(self) -> int:
        if self.cycles_per_us is None:
            return SPIN_CYCLES
        want_us = min(SPIN_HOST_FACTOR * max(self.recent, default=0.0), MAX_SPIN_US)
        return max(SPIN_CYCLES, int(want_us * self.cycles_per_us))

    def saw(self, *, host_us: float, cycles: int, spin_us: float) -> None:
        """One call: its host time, and its spin's cycles and event-timed µs."""
        self.recent.append(host_us)
        if spin_us > 0:
            # Bounded by what a GPU's clock can do: an entry that patched the events' reading
            # (tests/cases/hostile_gpu/cuda_event_patch) would otherwise size spins of minutes.
            rate = min(cycles / spin_us, MAX_CYCLES_PER_US)
            self.cycles_per_us = max(rate, self.cycles_per_us or 0.0)


class _Unrecorded:
    device_calls = None

    def internal(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def call(self, _label: str) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()


class Clock:
    """The one way the harness calls an entry on a GPU: correctness, warm-up and timed calls
    alike (issue 17: an entry must not tell them apart from inside). Each call gets fresh
    copies of its inputs, the L2 flushed, a spin queued before its start event, events around
    it and a device-wide synchronisation after it, and is bracketed on the device's timeline
    for the recorder (record.DeviceCalls)."""

    def __init__(self, recorder: Any | None, l2_flush_bytes: int) -> None:
        """`recorder`: the entry's (record.Recorder); None for the reference, which runs no
        entry code and records nothing."""
        recorder = recorder if recorder is not None else _Unrecorded()
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        self.flush_bytes = flush_bytes(l2_flush_bytes, int(getattr(props, "L2_cache_size", 0)))
        self._rec = recorder
        with recorder.internal():
            self._flush = torch.empty(self.flush_bytes, dtype=torch.uint8, device="cuda")
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)
        self._settled = torch.cuda.Event(enable_timing=True)
        self._spun = torch.cuda.Event(enable_timing=True)  # recorded as the spin starts
        self._spin = Spin()
        self._n = 0

    def internal(self) -> contextlib.AbstractContextManager[None]:
        """The harness's own work between calls, left out of the entry's record."""
        return self._rec.internal()

    def call(self, fn: Callable[..., Any], values: tuple[Any, ...], label: str, *,
             copy: bool = True) -> tuple[Any, float, float]:
        """`fn(*values)` under `label` (on fresh copies of them unless `copy` is False: inputs
        made for this call alone): its output, the event-timed device µs, and the µs until the
        whole device had settled."""
        rec = self._rec
        with rec.internal():
            args = _fresh(values) if copy else values
            torch.cuda.synchronize()
            # The flush (a write over twice the L2) is queued just before the start event, so
            # the GPU is still busy with it while Python launches the kernel.
            self._flush.fill_(self._n & 0xFF)
            self._n += 1
            # Then keep the GPU busy a little longer, so even a slow Python wrapper has queued
            # its launches before the start event runs: otherwise short kernels time the
            # host's launch overhead (seen on the H200, 2026-11-29: a 2 µs rmsnorm timed at
            # 33 µs). The spin (Spin) also opens the call on the device's timeline.
            cycles = self._spin.cycles()
            self._spun.record()
            torch.cuda._sleep(cycles)
            self._start.record()
        began = time.perf_counter()
        try:
            with rec.call(label):
                out = fn(*args)
        finally:
            host_us = (time.perf_counter() - began) * 1e6
            with rec.internal():
                self._end.record()
                torch.cuda.synchronize()  # device-wide: waits for work on every stream
                self._settled.record()  # bounds work hidden on other streams
                self._settled.synchronize()
                self._spin.saw(host_us=host_us, cycles=cycles,
                               spin_us=self._spun.elapsed_time(self._start) * 1000.0)
                if rec.device_calls is not None:
                    rec.device_calls.end(label)
        return (out, self._start.elapsed_time(self._end) * 1000.0,
                self._start.elapsed_time(self._settled) * 1000.0)


Draw = Callable[[int], tuple[Callable[..., Any], tuple[Any, ...], bool]]


def time_kernel(clock: Clock, draw: Draw, label: str, *,
                keep: Callable[[int, Any], None] | None = None, closing: bool = False,
                rse_target: float = RSE_TARGET, min_samples: int = MIN_SAMPLES,
                max_samples: int = MAX_SAMPLES, budget_s: float = BUDGET_S
                ) -> tuple[dict[str, Any], list[str]]:
    """The raw samples and the labels the calls were recorded under (`label#i`).

    `draw(i)`: what call i runs, made for it: (what to call, its inputs, whether the clock
    must copy them first). `closing`: once sampling stops, one more timed call, `draw(-1)`,
    whose sample counts like the others (the grader checks it: harness/fresh.py).
    `keep(i, outputs)`: what the caller keeps of call i's outputs, run as the harness's own
    work right after the call (i = -1 for the closing call)."""
    device_us: list[float] = []
    host_us: list[float] = []
    labels: list[str] = []
    began = time.perf_counter()

    def one(i: int) -> None:
        with clock.internal():
            fn, values, copy = draw(i)
        labels.append(f"{label}#{len(labels)}")
        out, dev, host = clock.call(fn, values, labels[-1], copy=copy)
        del values
        device_us.append(dev)
        host_us.append(host)
        if keep is not None:
            with clock.internal():
                keep(i, out)

    i = 0
    while True:
        one(i)
        i += 1
        if i >= max_samples or (i >= min_samples and _rse(device_us) < rse_target):
            break
        if time.perf_counter() - began > budget_s and i >= min(min_samples, 3):
            break
    if closing:
        one(-1)
    return {"device_us": device_us, "host_us": host_us, "method": "cuda-events",
            "loop_s": time.perf_counter() - began, "flush_bytes": clock.flush_bytes}, labels


def time_bare(kernel: Callable[..., Any] | list[Callable[..., Any]],
              sets: list[tuple[Any, ...]], *, l2_flush_bytes: int, recorder: Any | None = None,
              **knobs: Any) -> tuple[dict[str, Any], dict[int, Any]]:
    """The grader's timed loop outside any container (bench/: fidelity, baselines, clocks),
    cycling through `sets` (fresh copies each call), with their last outputs. `recorder`: an
    installed record.Recorder to time with the entry's instruments on, as the grader does;
    None times with none."""
    calls = kernel if isinstance(kernel, list) else [kernel] * len(sets)
    last: dict[int, Any] = {}
    count = [0]

    def draw(_i: int) -> tuple[Callable[..., Any], tuple[Any, ...], bool]:
        k = count[0] % len(sets)
        return calls[k], sets[k], True

    def keep(_i: int, out: Any) -> None:
        last[count[0] % len(sets)] = out
        count[0] += 1

    raw, _labels = time_kernel(Clock(recorder, l2_flush_bytes), draw, "bare", keep=keep,
                               **knobs)
    return raw, last
