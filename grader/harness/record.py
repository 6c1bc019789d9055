"""Instruments that stay on for the whole life of an entry's process (issue 17).

An entry shares this process, so it can see any instrument the harness turns on or off: a
launch hook that sits in Triton's chain only while tracing, a dispatch mode that is pushed for
some calls and not others, a profiler that runs for the traced calls only. It could then run
its own Triton kernel when watched and a vendor kernel otherwise. So nothing here is switched
per call: `Recorder.install` puts every instrument in place before the entry's module is
loaded, and they stay until the process ends. Every call of the entry (warm-up, correctness
and timed alike) is recorded the same way; what differs is only the label the counts are kept
under, and that label is never visible to the entry.

    rec = Recorder(device)
    rec.install()                      # before the entry's import
    with rec.call("rmsnorm.s1.0"):     # one call of the entry
        out = kernel(*inputs)
    with rec.internal():               # the harness's own torch work: never counted
        save(out)
    rec.finish()                       # device kernels split per call (CUDA)

On CUDA the device record is a torch.profiler session with CUDA activity only (the same CUPTI
activity records; on the H200 recording device kernels cost nothing measurable, CPU activity
made a 3.65 us add 10.1 us: issue 17). Calls are delimited on the device's own timeline by the
harness's spin kernels (`DeviceCalls`): each call is bracketed by a spin before it and a
one-cycle spin after a device-wide synchronisation, so a kernel belongs to the call whose
brackets hold its start, whatever stream or thread launched it.

Standard library, torch and triton only. What this records is evidence for the host.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

OUTSIDE = "outside"  # the entry's activity outside its calls: import time, between calls
# Launch arguments a Triton kernel needs: tensors, Python scalars and compile-time constants.
# Anything else (a subclass, an object with a data_ptr property) can compute while Triton
# reads it, where the harness counts nothing (issue 17, class 3).
_PLAIN = (int, float, bool, str, type(None), torch.dtype)
# Tensor methods that hand a tensor's memory to another array library (numpy views, DLPack):
# whatever computes there, no dispatch mode or profiler sees it.
_EXPORTS = ("numpy", "__array__", "__dlpack__", "__array_wrap__")


class _Counts:
    def __init__(self) -> None:
        self.ops: Counter[str] = Counter()
        self.launches: Counter[str] = Counter()
        self.foreign: Counter[str] = Counter()  # launches of Triton code not the entry's file's
        self.bad_args: Counter[str] = Counter()
        self.exports: Counter[str] = Counter()
        self.bf16: Counter[str] = Counter()  # interpreter ops on bf16 (trace.install_bf16_watch)

    def as_trace(self, kernels: list[dict[str, Any]]) -> dict[str, Any]:
        return {"torch_ops": dict(sorted(self.ops.items())),
                "triton_launches": dict(sorted(self.launches.items())),
                "foreign_triton": dict(sorted(self.foreign.items())),
                "device_kernels": kernels,
                "launch_arg_types": dict(sorted(self.bad_args.items())),
                "array_exports": dict(sorted(self.exports.items())),
                "interpreter_bf16": dict(sorted(self.bf16.items()))}


class Recorder:
    """Torch ops (this thread's dispatch mode), Triton launches (every thread), launch
    argument types, tensor memory handed to other libraries, and on CUDA the device kernels,
    counted per call label, from `install` to the end of the process."""

    def __init__(self, device: str, own_file: str = "") -> None:
        """`own_file`: the entry's kernel file; a Triton launch counts as the entry's own only
        through a Triton function defined there (trace.defined_in)."""
        self.device = device
        self.own_file = own_file
        self._label = OUTSIDE
        self._counts: dict[str, _Counts] = {}
        self._lock = threading.Lock()
        self._local = threading.local()  # depth of the harness's (or Triton's) own work
        self._stack = contextlib.ExitStack()
        self.device_calls: DeviceCalls | None = None
        self._allowed: frozenset[type] = frozenset()

    # --- what the entry sees: nothing that changes ----------------------------------------

    def install(self) -> None:
        from .trace import install_triton_hooks

        self._allowed = _triton_types()
        if self.device == "cuda":
            self.device_calls = DeviceCalls()
            self.device_calls.start()
        install_triton_hooks(self._stack, self._on_launch, self._check_args, self._internal_wrap,
                             cuda=self.device == "cuda", own_file=self.own_file)
        if self.device != "cuda":  # Triton's CPU interpreter: its bf16 arithmetic is wrong
            from .trace import install_bf16_watch

            install_bf16_watch(self._stack, self._on_bf16)
        for name in _EXPORTS:
            if hasattr(torch.Tensor, name):
                self._stack.callback(setattr, torch.Tensor, name, getattr(torch.Tensor, name))
                setattr(torch.Tensor, name, self._export_wrap(name, getattr(torch.Tensor, name)))
        # marked here too: a torch that never asks _should_skip_dynamo leaves it unmarked
        _skipped_by_dynamo(inspect.unwrap(_OpRecorder.__torch_dispatch__).__code__)
        self._stack.enter_context(_OpRecorder(self))

    # --- labels ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def call(self, label: str) -> Iterator[None]:
        self._label = label
        try:
            yield
        finally:
            self._label = OUTSIDE

    @contextlib.contextmanager
    def internal(self) -> Iterator[None]:
        self._local.depth = getattr(self._local, "depth", 0) + 1
        try:
            yield
        finally:
            self._local.depth -= 1

    def _inside(self) -> bool:
        return getattr(self._local, "depth", 0) > 0

    def _counts_now(self) -> _Counts:
        with self._lock:
            return self._counts.setdefault(self._label, _Counts())

    # --- hooks ----------------------------------------------------------------------------

    def _on_op(self, name: str) -> None:
        if not self._inside():
            self._counts_now().ops[name] += 1

    def _on_bf16(self, op: str) -> None:
        counts = self._counts_now()
        with self._lock:
            counts.bf16[op[:40]] += 1

    def _on_launch(self, name: str, own: bool) -> None:
        counts = self._counts_now()
        with self._lock:
            counts.launches[name] += 1
            if not own:
                counts.foreign[name] += 1

    def _check_args(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        bad = [type(a).__name__[:60] for a in (*args, *kwargs.values())
               if not _plain(a, self._allowed)]
        if bad:
            counts = self._counts_now()
            with self._lock:
                counts.bad_args.update(bad)

    def _internal_wrap(self, original: Callable[..., Any]) -> Callable[..., Any]:
        recorder = self

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with recorder.internal():
                return original(*args, **kwargs)

        return wrapper

    def _export_wrap(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        recorder = self

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not recorder._inside():
                counts = recorder._counts_now()
                with recorder._lock:
                    counts.exports[name] += 1
            return original(*args, **kwargs)

        return wrapper

    # --- results --------------------------------------------------------------------------

    def finish(self) -> None:
        """Ends the device record (CUDA) and splits it per call; the host-side hooks stay."""
        if self.device_calls is not None:
            self.device_calls.stop()

    def trace(self, label: str) -> dict[str, Any]:
        """One call's record (or OUTSIDE's), JSON-able."""
        counts = self._counts.get(label) or _Counts()
        kernels = self.device_calls.kernels(label) if self.device_calls is not None else []
        return counts.as_trace(kernels)

    def merged(self, labels: list[str]) -> dict[str, Any]:
        """Several calls' records summed (a shape's timed calls)."""
        total = _Counts()
        kernels: dict[str, list[float]] = {}
        for label in labels:
            counts = self._counts.get(label)
            if counts is not None:
                total.ops.update(counts.ops)
                total.launches.update(counts.launches)
                total.foreign.update(counts.foreign)
                total.bad_args.update(counts.bad_args)
                total.exports.update(counts.exports)
            for k in self.device_calls.kernels(label) if self.device_calls is not None else []:
                _add(kernels, k["name"], k["device_us"], k["calls"])
        return total.as_trace(_kernel_list(kernels))


def _triton_types() -> frozenset[type]:
    """Triton's own argument types (constexpr, dtypes, tensor descriptors), collected from its
    modules before the entry is loaded, so that no class of the entry's can join them."""
    import importlib

    found: set[type] = set()
    for name in ("triton.language.core", "triton.tools.tensor_descriptor"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        found.update(v for v in vars(module).values()
                     if isinstance(v, type) and v.__module__ == name)
    return frozenset(found)


def _plain(value: Any, allowed: frozenset[type], depth: int = 0) -> bool:
    kind = type(value)
    if kind is torch.Tensor or kind is torch.nn.Parameter or kind in _PLAIN or kind in allowed:
        return True
    if kind in (tuple, list) and depth < 2:  # Triton 3 takes tuples of arguments
        return all(_plain(v, allowed, depth + 1) for v in value)
    return False


def _skipped_by_dynamo(code: Any) -> bool:
    """Mark `code` so that dynamo's frame evaluation never traces it nor what it calls.
    False where this torch has no such mark."""
    try:
        from torch._C._dynamo import eval_frame
    except ImportError:
        return False
    try:
        skip = eval_frame._FrameAction.SKIP
        eval_frame.set_code_exec_strategy(code, eval_frame._FrameExecStrategy(skip, skip))
    except (AttributeError, TypeError):
        return False
    return True


class _OpRecorder(TorchDispatchMode):
    """Counts every op dispatched on the thread that entered it, unless the harness (or
    Triton's own machinery) is doing it."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """Whether torch is to put its own guard around `__torch_dispatch__`: the guard
        that keeps the method out of a torch.compile trace, whose first call imports
        torch._dynamo (1.1-1.7 s of CPU in every entry container on the CI host, more than
        the rest of a small batch's job; on a GPU the profiler's start imports it anyway,
        before the entry's import). Where this torch can mark the method's code for dynamo
        to skip, it and all it calls (a mark in C, no import), the mark does the guard's
        work and there is no guard; elsewhere, torch's guard. And the entry's container
        runs with dynamo off besides (TORCHDYNAMO_DISABLE, run/jobs.py)."""
        own = cls.__dict__.get("__torch_dispatch__")
        return own is None or not _skipped_by_dynamo(own.__code__)

    def __init__(self, recorder: Recorder) -> None:
        super().__init__()
        self._recorder = recorder

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        self._recorder._on_op(f"{func.namespace}.{func.overloadpacket.__name__}")
        return func(*args, **(kwargs or {}))


def _add(acc: dict[str, list[float]], name: str, us: float, calls: int) -> None:
    """Device µs and calls summed per kernel name."""
    entry = acc.setdefault(name, [0.0, 0])
    entry[0] += us
    entry[1] += calls


def _kernel_list(acc: dict[str, list[float]]) -> list[dict[str, Any]]:
    return [{"name": name, "device_us": round(us, 3), "calls": int(n)}
            for name, (us, n) in sorted(acc.items(), key=lambda kv: -kv[1][0])]


class DeviceCalls:
    """The device record, and each call's place on the device's timeline.

    The spin that timing.Clock queues before each call (on the current stream) opens it;
    `end()`, after the call once the whole device has synchronised, queues a one-cycle spin
    that closes it. At `stop()` the spin kernels are matched, in order, with the calls: a
    kernel that started between a call's two spins is that call's. The first two kernels of
    the record are the harness's own calibration (a fill and a spin) and give the names to
    look for. An entry that launches spins of its own upsets the count, which the record then
    says (`consistent`), for the host to judge.
    """

    def __init__(self) -> None:
        self._profiler: Any = None
        self._labels: list[str] = []  # the calls, in order
        self._by_label: dict[str, list[dict[str, Any]]] = {}
        self._inside: dict[str, list[tuple[float, float, str]]] = {}  # (start, µs, name)
        self._opened: dict[str, float] = {}  # per call: when its opening spin ended
        self.consistent = True
        self.problem = ""

    def start(self) -> None:
        activities = [torch.profiler.ProfilerActivity.CUDA]
        self._profiler = torch.profiler.profile(activities=activities)
        self._profiler.start()
        calib = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
        calib.fill_(1)
        torch.cuda._sleep(1)
        torch.cuda.synchronize()

    def end(self, label: str) -> None:
        torch.cuda._sleep(1)
        self._labels.append(label)

    def stop(self) -> None:
        profiler, self._profiler = self._profiler, None
        if profiler is None:
            return
        profiler.stop()
        events = []
        for e in profiler.profiler.kineto_results.events():
            if e.device_type() != torch.autograd.DeviceType.CUDA or e.is_user_annotation():
                continue
            events.append((e.start_ns() / 1000.0, e.duration_ns() / 1000.0, e.name()))
        events.sort()
        self._split(events)

    def _split(self, events: list[tuple[float, float, str]]) -> None:
        if len(events) < 2:
            self.consistent = bool(not self._labels)
            self.problem = "no device record"
            return
        spin = events[1][2]
        body = events[2:]
        spins = [i for i, (_s, _d, name) in enumerate(body) if name == spin]
        if len(spins) != 2 * len(self._labels):
            self.consistent = False
            self.problem = (f"{len(spins)} bracketing spins on the device for "
                            f"{len(self._labels)} calls")
            return
        for k, label in enumerate(self._labels):
            lo, hi = spins[2 * k], spins[2 * k + 1]
            opened = body[lo][0] + body[lo][1]
            inside = [ev for ev in body[lo + 1:hi] if ev[2] != spin]
            acc: dict[str, list[float]] = {}
            for _s, dur, name in inside:
                _add(acc, name, dur, 1)
            self._by_label[label] = _kernel_list(acc)
            self._inside[label] = inside
            self._opened[label] = opened

    def kernels(self, label: str) -> list[dict[str, Any]]:
        return list(self._by_label.get(label, []))

    def covered(self, label: str, device_us: float) -> float:
        """Of the call's event-timed `device_us` (which starts as its opening spin ends), the
        µs during which some recorded kernel ran."""
        opened = self._opened.get(label)
        if opened is None:
            return 0.0
        return _union_within(self._inside.get(label, []), opened, opened + device_us)

    def busy(self, label: str) -> float:
        """µs during which some kernel of the call ran, wherever it fell: beyond the call's
        events when it ran on a stream they do not wait for."""
        return _union_within(self._inside.get(label, []), float("-inf"), float("inf"))


def _union_within(events: list[tuple[float, float, str]], lo: float, hi: float) -> float:
    """µs of [lo, hi] during which at least one of `events` (start, duration) ran."""
    spans = sorted((max(s, lo), min(s + d, hi)) for s, d, _n in events)
    total = 0.0
    cur_lo = cur_hi = None
    for a, b in spans:
        if b <= a:
            continue
        if cur_hi is None or a > cur_hi:
            if cur_hi is not None and cur_lo is not None:
                total += cur_hi - cur_lo
            cur_lo, cur_hi = a, b
        else:
            cur_hi = max(cur_hi, b)
    if cur_hi is not None and cur_lo is not None:
        total += cur_hi - cur_lo
    return total
