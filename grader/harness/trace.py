"""Record what one call of an entry's kernel ran: torch ops, Triton launches, device kernels.

This module runs inside the untrusted entry's container, in the entry's own process, so it
imports only the standard library, torch and triton, and whatever it reports is evidence for
the host to judge, never a verdict (DESIGN.md, "Trust split"): the entry can patch any of
this back out.

    with DeviceProfile() as profile:       # on CUDA: one device profiler for every call
        tracer = Tracer(device="cuda", profile=profile, label="case-1")
        with tracer:
            out = kernel(*inputs)
            torch.cuda.synchronize()
    tracer.result()  # {"torch_ops": {...}, "triton_launches": {...}, "device_kernels": [...]}
    profile.kernels("case-1")  # the device kernels that ran inside that call's range

Known limitations (see also issue 3, "Dynamic analysis"):
- The TorchDispatchMode sees only the thread that entered it: torch ops run by a worker
  thread are not in ``torch_ops``. Triton launches are recorded from every thread, and on
  CUDA the device profiler sees every thread's kernels, which is the cross-check.
- Code that reaches a device library without the dispatcher (ctypes into cuBLAS, cupy) shows
  up only in ``device_kernels`` (CUDA, with a DeviceProfile), never in ``torch_ops``.
- Only Triton's own argument copies (interpreter) and autotuning L2-flush buffer are left
  out of ``torch_ops``. Entry callbacks that Triton calls (``heuristics`` lambdas, config
  ``pre_hook``s, autotuner ``restore_value``/``reset_to_zero``) are recorded on purpose: a
  fallback hidden there is still a fallback.
- The first call for a new autotune key benchmarks every config. On an H200 (triton 3.6) one
  such call recorded 786 launches of the tuned kernel and 36 ms of L2-flush fills
  (at::native FillFunctor, torch_native) against 3.5 ms of the kernel: a DSL share taken
  from that call would call an honest entry a fallback. Trace a call after a warm-up call.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# How deep the current thread is inside Triton's own machinery. Thread-local on purpose: a
# global counter would let a worker thread that keeps launching kernels hide the main
# thread's torch ops from the dispatch mode.
_local = threading.local()


def _inside_triton() -> bool:
    return getattr(_local, "depth", 0) > 0


@contextlib.contextmanager
def _triton_internals() -> Iterator[None]:
    _local.depth = getattr(_local, "depth", 0) + 1
    try:
        yield
    finally:
        _local.depth -= 1


class _OpRecorder(TorchDispatchMode):
    """Counts every aten (or other namespace) op dispatched on this thread."""

    def __init__(self, counts: Counter[str]) -> None:
        super().__init__()
        self._counts = counts

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        # Triton's interpreter copies every tensor argument to host storage and back
        # (new_empty/set_/empty/copy_); counting those would flag every honest kernel.
        # They are left out by *where* they run, not by op name, so an entry calling
        # torch.empty or copy_ itself is still recorded.
        if not _inside_triton():
            self._counts[f"{func.namespace}.{func.overloadpacket.__name__}"] += 1
        return func(*args, **(kwargs or {}))


def _patch(stack: contextlib.ExitStack, owner: type, name: str, make: Callable[[Any], Any]) -> None:
    """Replace ``owner.name`` by ``make(original)`` until ``stack`` closes.

    Patching the class (not instances) reaches kernels the entry created at import time,
    before the Tracer started.
    """
    own = name in owner.__dict__
    original = owner.__dict__[name] if own else getattr(owner, name)
    setattr(owner, name, make(original))
    if own:
        stack.callback(setattr, owner, name, original)
    else:
        stack.callback(delattr, owner, name)


def _as_internal(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _triton_internals():
            return original(*args, **kwargs)

    return wrapper


class DeviceProfile:
    """One torch.profiler session (CPU and CUDA activity) around every traced call of a
    process, each call marked by a record_function range that its Tracer opens.

    With one profiler per call, the traced calls took 5.0-5.5 s of a 13-16 s entry container
    on the H200 (2026-12-01), nearly all of it the profiler's set-up, which a process pays
    once (harness.main._prepare_cuda pays it while the entry waits for its job). A device
    kernel belongs to every call whose range holds its start: the caller synchronises inside
    the range, so each kernel a call launched runs inside it, and a range the entry opens
    under the same name can only add kernels to a call, never take them away.
    """

    PREFIX = "grader_call:"

    def __init__(self) -> None:
        self._profiler: torch.profiler.profile | None = None
        self._by_label: dict[str, list[dict[str, Any]]] = {}

    def start(self) -> None:
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        self._profiler = torch.profiler.profile(activities=activities)
        self._profiler.start()

    def stop(self) -> None:
        profiler, self._profiler = self._profiler, None
        if profiler is not None:
            profiler.stop()
            self._by_label = _kernels_by_range(profiler, self.PREFIX)

    def __enter__(self) -> DeviceProfile:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def range(self, label: str) -> contextlib.AbstractContextManager[Any]:
        return torch.profiler.record_function(self.PREFIX + label)

    def kernels(self, label: str) -> list[dict[str, Any]]:
        """The device activity inside `label`'s range(s), once the session has ended."""
        return list(self._by_label.get(label, []))


class Tracer:
    """Context manager recording torch ops, Triton launches and (with a DeviceProfile on
    CUDA) the range of the call's device kernels.

    The Triton interpreter on CPU runs no device kernels: there is no profile there. A
    Tracer is single-use; on CUDA the caller synchronises inside the ``with`` block so that
    the call's kernels finish inside its range.
    """

    def __init__(self, device: str = "cpu", profile: DeviceProfile | None = None,
                 label: str = "call") -> None:
        if device not in ("cpu", "cuda"):
            raise ValueError(f"device must be 'cpu' or 'cuda', not {device!r}")
        self.device = device
        self.profile = profile if device == "cuda" else None
        self.label = label
        self._ops: Counter[str] = Counter()
        self._launches: Counter[str] = Counter()
        self._launch_lock = threading.Lock()  # launches may come from any thread
        self._stack: contextlib.ExitStack | None = None
        self._used = False

    # --- recording ---------------------------------------------------------------------

    def _record_launch(self, name: str) -> None:
        with self._launch_lock:
            self._launches[name] += 1

    def _on_compiled_launch(self, metadata: Any) -> None:
        # Read the raw dict: LazyDict.get() would run the entry's launch_metadata callback.
        data = getattr(metadata, "data", None)
        name = data.get("name") if isinstance(data, dict) else None
        self._record_launch(str(name) if name else "<unnamed>")

    def _install_triton_hooks(self, stack: contextlib.ExitStack) -> None:
        import triton
        from triton import knobs
        from triton.runtime import interpreter

        # Compiled kernels (CUDA): Triton's own launch hook, called by the driver's launcher
        # right before each real launch. It fires for JITFunction.run, for autotune and
        # heuristics wrappers (they end in JITFunction.run) and for CompiledKernel[grid]
        # launches that bypass JITFunction, and never for warmup/compile-only calls. The
        # name is the compiled kernel's, which is what the device profiler shows.
        hooks = knobs.runtime.launch_enter_hook
        if hasattr(hooks, "add"):  # a HookChain (triton 3.6 and later): share it politely
            hooks.add(self._on_compiled_launch)
            stack.callback(hooks.remove, self._on_compiled_launch)
        else:  # one callable or None (earlier 3.x): chain in front of it, put it back after
            previous = hooks

            def enter_hook(metadata: Any) -> None:
                self._on_compiled_launch(metadata)
                if previous is not None:
                    previous(metadata)

            knobs.runtime.launch_enter_hook = enter_hook
            stack.callback(setattr, knobs.runtime, "launch_enter_hook", previous)

        # Interpreted kernels (TRITON_INTERPRET=1) never reach the driver, so the hook above
        # is silent; InterpretedFunction.run is the one place every grid launch passes
        # through (autotune/heuristics wrappers call it), and self.fn is the jit function.
        record = self._record_launch

        def wrap_run(original: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(original)
            def run(self: Any, *args: Any, **kwargs: Any) -> Any:
                if not kwargs.get("warmup", False):
                    record(getattr(self.fn, "__name__", "<unnamed>"))
                return original(self, *args, **kwargs)

            return run

        _patch(stack, interpreter.InterpretedFunction, "run", wrap_run)
        for name in ("_init_args_hst", "_restore_args_dev"):
            if hasattr(interpreter.GridExecutor, name):
                _patch(stack, interpreter.GridExecutor, name, _as_internal)

        # The autotuner's benchmarker allocates and zeroes a 256 MB buffer to flush L2
        # between runs (torch.empty, zero_): Triton's doing, not the entry's.
        if self.device == "cuda" and not knobs.runtime.interpret:
            driver_cls = type(triton.runtime.driver.active)
            for name in ("get_empty_cache_for_benchmark", "clear_cache"):
                if hasattr(driver_cls, name):
                    _patch(stack, driver_cls, name, _as_internal)

    # --- context manager -----------------------------------------------------------------

    def __enter__(self) -> Tracer:
        if self._used:
            raise RuntimeError("a Tracer can be entered only once; make a new one")
        self._used = True
        with contextlib.ExitStack() as stack:
            self._install_triton_hooks(stack)
            if self.profile is not None:
                stack.enter_context(self.profile.range(self.label))
            # Entered last so that it is exited first: nothing of the tracer's own
            # teardown is recorded as the entry's.
            stack.enter_context(_OpRecorder(self._ops))
            self._stack = stack.pop_all()  # keep everything installed past this block
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            stack.close()  # mode exited, range closed, hooks and patches removed
        # Returning None: the entry's exception, if any, propagates.

    def result(self) -> dict[str, Any]:
        """JSON-able record; keys sorted so that equal runs give equal documents. The device
        kernels are the profile's, read once its session has ended."""
        kernels = self.profile.kernels(self.label) if self.profile is not None else []
        return {
            "torch_ops": dict(sorted(self._ops.items())),
            "triton_launches": dict(sorted(self._launches.items())),
            "device_kernels": kernels,
        }


def _is_annotation(event: Any, prefix: str) -> bool:
    return bool(getattr(event, "is_user_annotation", False)) or event.name.startswith(prefix) \
        or "user_annotation" in str(getattr(event, "activity_type", "")).lower()


def _kernels_by_range(profiler: torch.profiler.profile, prefix: str
                      ) -> dict[str, list[dict[str, Any]]]:
    """Per range label: each device activity (kernels, Memcpy, Memset) that started inside a
    range of that label, by name, with its total device µs and calls."""
    from torch.autograd import DeviceType

    events = list(profiler.events())
    ranges = [(e.name[len(prefix):], e.time_range.start, e.time_range.end) for e in events
              if e.device_type == DeviceType.CPU and e.name.startswith(prefix)]
    totals: dict[str, dict[str, list[float]]] = {}
    for event in events:
        # A record_function range is mirrored on the device's timeline as a CUDA-typed user
        # annotation spanning the kernels inside it (seen on the H200, 2026-12-01: our own
        # range took "50%" of device time). It is no kernel: counted, an entry could name a
        # range after its own Triton kernel and wrap a vendor call in it.
        if event.device_type != DeviceType.CUDA or _is_annotation(event, prefix):
            continue
        start = event.time_range.start
        for label in {lb for lb, lo, hi in ranges if lo <= start <= hi}:
            entry = totals.setdefault(label, {}).setdefault(event.name, [0.0, 0])
            entry[0] += float(event.device_time_total)
            entry[1] += 1
    return {label: [{"name": name, "device_us": round(us, 3), "calls": int(calls)}
                    for name, (us, calls) in sorted(names.items(), key=lambda kv: -kv[1][0])]
            for label, names in totals.items()}
