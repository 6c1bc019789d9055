"""Where the harness's recorder meets Triton: every launch, its arguments, and Triton's own
torch work (which is not the entry's).

Installed once, before the entry's module is loaded, and never removed while entry code can
run (harness/record.py says why). Runs inside the entry's process: standard library, torch and
triton only; what it records is evidence for the host.

Known limitations (docs/detection.md):
- The dispatch mode sees only the thread that entered it: torch ops run by a worker thread
  are not counted. Triton launches are recorded from every thread, and on CUDA the device
  record sees every thread's kernels, which is the cross-check.
- Code that reaches a device library without the dispatcher (ctypes into cuBLAS) shows up
  only in the device record (CUDA), never in the torch ops.
- Only Triton's own argument copies (interpreter) and its autotuner's L2-flush buffer are left
  out of the torch ops. Entry callbacks that Triton calls (`heuristics` lambdas, config
  `pre_hook`s, the autotuner's `restore_value`/`reset_to_zero`) are recorded on purpose.
- The first call for a new autotune key benchmarks every config (on an H200, 786 launches
  and 36 ms of L2-flush fills for one call): the harness makes one warm-up call per shape
  before the calls whose records are judged.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any

Wrap = Callable[[Callable[..., Any]], Callable[..., Any]]


def patch(stack: contextlib.ExitStack, owner: type, name: str, make: Wrap) -> None:
    """Replace ``owner.name`` by ``make(original)`` until ``stack`` closes. Patching the class
    reaches kernels the entry created at import time."""
    own = name in owner.__dict__
    original = owner.__dict__[name] if own else getattr(owner, name)
    setattr(owner, name, make(original))
    if own:
        stack.callback(setattr, owner, name, original)
    else:
        stack.callback(delattr, owner, name)


def defined_in(jit: Any, own_file: str) -> bool:
    """Whether the Triton function `jit` (a JITFunction or InterpretedFunction) was defined in
    `own_file`: its Python function's source file, as the interpreter compiled it."""
    code = getattr(getattr(jit, "fn", None), "__code__", None)
    return getattr(code, "co_filename", None) == own_file


def install_triton_hooks(stack: contextlib.ExitStack, on_launch: Callable[[str, bool], None],
                         check_args: Callable[[tuple[Any, ...], dict[str, Any]], None],
                         internal: Wrap, *, cuda: bool, own_file: str) -> None:
    """`on_launch(name, own)` for every real launch, `own` when it came through a Triton
    function defined in `own_file` (the entry's file: issue 31, a kernel an installed library
    or a compiler generated is not the entry's work, whatever its name); `check_args(args,
    kwargs)` for every launch's arguments, and `internal` around Triton's own torch work."""
    import threading

    import triton
    from triton import knobs
    from triton.runtime import interpreter
    from triton.runtime.jit import JITFunction

    # The Triton function whose run() is on this thread's stack (None: a launch that came
    # through none, as generated code's launchers do).
    launching = threading.local()

    def on_compiled_launch(metadata: Any) -> None:
        # The raw dict: LazyDict.get() would run the entry's launch_metadata callback.
        data = getattr(metadata, "data", None)
        name = data.get("name") if isinstance(data, dict) else None
        jit = getattr(launching, "jit", None)
        on_launch(str(name) if name else "<unnamed>",
                  jit is not None and defined_in(jit, own_file))

    # Compiled kernels (CUDA): Triton's own launch hook, called by the launcher right before
    # each real launch, whatever wrapper led there (autotune, heuristics, CompiledKernel[grid]),
    # and never for warm-up or compile-only calls. The name is the one the device shows.
    hooks = knobs.runtime.launch_enter_hook
    if hasattr(hooks, "add"):  # a HookChain (triton 3.6 and later)
        hooks.add(on_compiled_launch)
        stack.callback(hooks.remove, on_compiled_launch)
    else:  # one callable or None (earlier 3.x): chain in front of it
        previous = hooks

        def enter_hook(metadata: Any) -> None:
            on_compiled_launch(metadata)
            if previous is not None:
                previous(metadata)

        knobs.runtime.launch_enter_hook = enter_hook
        stack.callback(setattr, knobs.runtime, "launch_enter_hook", previous)

    def checked(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not kwargs.get("warmup", False):
                check_args(args, {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")})
            outer = getattr(launching, "jit", None)
            launching.jit = self
            try:
                return original(self, *args, **kwargs)
            finally:
                launching.jit = outer

        return run

    patch(stack, JITFunction, "run", checked)

    # Interpreted kernels (TRITON_INTERPRET=1) never reach the driver, so the hook above is
    # silent: InterpretedFunction.run is where every grid launch passes.
    def interpreted(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not kwargs.get("warmup", False):
                on_launch(getattr(self.fn, "__name__", "<unnamed>"), defined_in(self, own_file))
                check_args(args, {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")})
            return original(self, *args, **kwargs)

        return run

    patch(stack, interpreter.InterpretedFunction, "run", interpreted)
    # The interpreter copies every tensor argument to host storage and back (new_empty, set_,
    # empty, copy_): Triton's doing, left out by where it runs, not by op name. Arguments are
    # checked to be plain tensors and scalars first, so no entry object computes in here.
    for name in ("_init_args_hst", "_restore_args_dev"):
        if hasattr(interpreter.GridExecutor, name):
            patch(stack, interpreter.GridExecutor, name, internal)
    # The autotuner's benchmarker allocates and zeroes a 256 MB buffer to flush L2.
    if cuda and not knobs.runtime.interpret:
        driver_cls = type(triton.runtime.driver.active)
        for name in ("get_empty_cache_for_benchmark", "clear_cache"):
            if hasattr(driver_cls, name):
                patch(stack, driver_cls, name, internal)


# numpy ufuncs the interpreter applies to raw bits on purpose: these are right on bf16 too.
_BITWISE = ("bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift", "invert")


def install_bf16_watch(stack: contextlib.ExitStack, on_bf16: Callable[[str], None]) -> None:
    """`on_bf16(op)` whenever Triton's CPU interpreter computes on bf16 operands: it holds
    bf16 as raw 16-bit patterns and applies numpy's arithmetic to them (triton 3.9: `+`,
    `tl.sum`, `tl.dot` all wrong; upstream triton-lang/triton#11584), so an honest kernel that
    computes in bf16 is wrong here and right on a GPU. Evidence for the host (judge/
    interpreter.py), which then calls such a shape unverified rather than incorrect."""
    from triton import language as tl
    from triton.runtime import interpreter

    def bf16(handle: Any) -> bool:
        return getattr(getattr(handle, "dtype", None), "scalar", None) == tl.bfloat16

    def binary(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def run(self: Any, lhs: Any, rhs: Any, op: Any) -> Any:
            name = getattr(op, "__name__", "op")
            if name not in _BITWISE and (bf16(lhs) or bf16(rhs)):
                on_bf16(name)
            return original(self, lhs, rhs, op)

        return run

    def unary(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def run(self: Any, arg: Any, op: Any) -> Any:
            name = getattr(op, "__name__", "op")
            if name not in _BITWISE and bf16(arg):
                on_bf16(name)
            return original(self, arg, op)

        return run

    def dot(original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def run(self: Any, a: Any, b: Any, *args: Any, **kwargs: Any) -> Any:
            if bf16(a) or bf16(b):
                on_bf16("dot")
            return original(self, a, b, *args, **kwargs)

        return run

    builder = interpreter.InterpreterBuilder
    for name, wrap in (("binary_op", binary), ("unary_op", unary), ("create_dot", dot)):
        if hasattr(builder, name):
            patch(stack, builder, name, wrap)
