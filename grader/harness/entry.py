"""The entry's side of the harness: load the entry's file, call it on every case, time it.

Everything here runs in the entry's own process, so its records are evidence, never verdicts
(harness/main.py has the protocol). Two rules shape it (issue 17):
- Watched and timed calls are the same calls. The recorder (record.Recorder) is installed
  before the entry's module is loaded and stays on to the end; warm-up, correctness and timed
  calls all go through one path (timing.Clock.call on a GPU), so nothing the entry can observe
  from inside tells them apart, and every timed call's own device kernels are in the record.
- Evidence leaves before entry code can run again: the result is sent as the harness's last
  act, and the process then ends without running finalisers or exit hooks (os._exit).
Standard library, torch and triton only.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from .loading import check_outputs
from .main import (
    ENTRY,
    IN,
    JOB_WAIT_S,
    OUT,
    Phases,
    _as_tuple,
    _callables,
    _excerpt,
    _jit_names,
    _load_module,
    _prepare_cuda,
    _shape_of,
    _signal_host,
    _standby,
    _sync,
    _wait_for,
    _wait_for_job,
)
from .protocol import (
    ARMED_FILE,
    DEVICE_ENV,
    GO_FILE,
    L2_FLUSH_BYTES,
    OUTPUTS,
    READY_FILE,
    RECIPE_DIR,
    REFERENCE_FILE,
    RESULT_FILE,
    STACK_SIGNAL,
    TRACED_FILE,
    WORKER_ENV,
    case_file,
)


class _Caller:
    """One call of the entry, the same way whatever the call is for."""

    def __init__(self, recorder: Any, device: str, job: dict[str, Any]) -> None:
        self.recorder = recorder
        self.clock: Any = None
        if device.startswith("cuda"):
            from .timing import Clock

            self.clock = Clock(recorder, job.get("l2_flush_bytes", L2_FLUSH_BYTES))

    def __call__(self, fn: Callable[..., Any], values: tuple[Any, ...], label: str, *,
                 copy: bool = True) -> tuple[Any, float, float]:
        if self.clock is not None:
            return self.clock.call(fn, values, label, copy=copy)
        from .timing import _fresh

        with self.recorder.internal():
            args = _fresh(values) if copy else values
        start = time.perf_counter()
        with self.recorder.call(label):
            out = fn(*args)
        wall = (time.perf_counter() - start) * 1e6
        return out, wall, wall


def run_entry(classes: list[str] | None = None) -> int:
    """`classes`: a module problem's entry class names (the first found is built). Its steps:
    the set-up before any entry code (_prepare, _install_recorder), the entry's import
    (_import_entry, then "ready"), the job (_run_job: warm-up, traced calls, timed loops,
    their records), and the result as the harness's last act (_send_result)."""
    _stacks_on_signal()
    from .record import OUTSIDE, Recorder  # before any entry code runs

    phase = Phases()
    device = _prepare(phase)
    recorder = _install_recorder(Recorder(device, str(ENTRY)), phase)
    if recorder is None:
        return 4
    # Set up, and no entry code has run: the host's wall-clock limit counts from here.
    _signal_host(ARMED_FILE, {"ok": True})
    kernel = _import_entry(classes)
    if kernel is None:
        return 3
    with phase("job_wait"):
        job = _wait_for_job()
    result = _run_job(job, kernel, classes, recorder, phase)
    result["outside"] = recorder.trace(OUTSIDE)
    result["phases_s"] = phase.seconds
    _send_result(result)


def _stacks_on_signal() -> None:
    """At the entry's deadline the host has the warden pass protocol.STACK_SIGNAL here, a
    moment before the kill: every thread's stack goes to stderr, the container's logs
    (issue 34: a timeout said nothing of where the entry hung). Registered first, before any
    import that could hang."""
    import faulthandler
    import signal

    faulthandler.register(signal.Signals[STACK_SIGNAL], all_threads=True)


def _prepare(phase: Phases) -> str:
    """The device ("cuda" or "cpu"); on a GPU its context and the device profiler's one-time
    set-up, made at the standby's gate when started ahead (main._standby), else here."""
    prepared = _standby(phase, _prepare_cuda)
    if os.environ.get(WORKER_ENV):  # released: dumpable as any worker (boot.py, zygote.py)
        from .sweep import set_dumpable

        set_dumpable(True)
    device = "cuda" if os.environ.get(DEVICE_ENV) == "cuda" else "cpu"
    if device == "cuda" and not prepared:
        with phase("prepare"):
            try:
                _prepare_cuda()
            except Exception:  # the calls meet the same failure, and report it
                pass
    return device


def _install_recorder(recorder: Any, phase: Phases) -> Any:
    """The recorder of every call, installed before any entry code runs and on for the rest
    of the process; None once its failure has been sent as the ready frame."""
    with phase("record"):
        try:
            recorder.install()
        except Exception as exc:
            _signal_host(READY_FILE, {"ok": False, "error": "the harness could not start its "
                                     "recorder: " + _excerpt(exc)})
            return None
    return recorder


def _import_entry(classes: list[str] | None) -> Any:
    """Load the entry's file and find what the job calls, then send "ready" (only then does
    the host place the inputs). The kernel() function, or for a module problem the module
    (its class is looked up again, and built, per case); None once the failure has been sent
    as the ready frame."""
    t0 = time.monotonic()
    try:
        module = _load_module(ENTRY, "entry_kernel")
        if classes:
            from .modules import find_class

            find_class(module, classes)
            kernel: Any = module
        else:
            kernel = getattr(module, "kernel", None)
            if not callable(kernel):
                raise AttributeError("the kernel file defines no callable kernel()")
    except BaseException as exc:  # the entry may raise anything, SystemExit included
        _signal_host(READY_FILE, {"ok": False, "error": _excerpt(exc)})
        return None
    _signal_host(READY_FILE, {"ok": True, "import_s": time.monotonic() - t0,
                             "jit_functions": _jit_names(module)})
    return kernel


def _send_result(result: dict[str, Any]) -> NoReturn:
    """The harness's last act: no finaliser, exit hook or `atexit` of the entry's runs after
    it (issue 17: one rewrote the result and trace files once the harness had written them)."""
    _signal_host(RESULT_FILE, result)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@dataclass(frozen=True, kw_only=True)
class _Job:
    """One job and what every step of it calls through."""

    spec: dict[str, Any]  # the job file
    build: Callable[[str], Callable[..., Any]]  # case id -> what to call
    call: _Caller
    recorder: Any
    phase: Phases
    _recipe: list[Any] = field(default_factory=list)

    @property
    def device(self) -> str:
        return str(self.spec["device"])

    @property
    def timing(self) -> dict[str, dict[str, Any]]:
        """Per shape, its timed loop's plan (model/timed.py; none on a CPU)."""
        timing: dict[str, dict[str, Any]] = self.spec.get("timing", {})
        return timing

    def inputs(self, case_id: str) -> tuple[Any, ...]:
        """A correctness case's inputs, drawn here from its seed by the problem's public
        recipe, as the reference drew them (issue 32: no input travels between containers)."""
        from .fresh import make

        case = next(c for c in self.spec["cases"] if c["id"] == case_id)
        values = make(self.recipe(), int(case["seed"]), self.device, case["params"])
        _sync(self.device)  # drawn, not only queued: the call's time is its own
        return values

    def recipe(self) -> Any:
        """The problem's public input recipe, placed with the job (loaded once)."""
        if not self._recipe:
            from .fresh import load_recipe

            with self.recorder.internal():
                self._recipe.append(load_recipe(IN / RECIPE_DIR / REFERENCE_FILE))
        return self._recipe[0]


def _run_job(spec: dict[str, Any], kernel: Any, classes: list[str] | None, recorder: Any,
             phase: Phases) -> dict[str, Any]:
    """The job's steps: warm-up, the traced correctness calls, the host's go when held, the
    timed loops, and the record of every call attached to what it was for."""
    job = _Job(spec=spec, build=_callables(spec, kernel, classes or None),
               call=_Caller(recorder, spec["device"], spec), recorder=recorder, phase=phase)
    case_ids = [case["id"] for case in spec["cases"]]
    warm_errors = _warm_up(job, case_ids)
    results, warm_failed = _traced_calls(job, case_ids, warm_errors)
    _wait_to_time(job)
    timings, labels = _timed_loops(job)
    _attach_records(job, results, warm_failed, timings, labels)
    result: dict[str, Any] = {"cases": results, "timings": timings}
    if recorder.device_calls is not None:
        result["device_record"] = {"consistent": recorder.device_calls.consistent,
                                   "problem": recorder.device_calls.problem}
    return result


def _warm_up(job: _Job, case_ids: list[str]) -> dict[str, str]:
    """One call per shape first, on inputs of its own (drawn from the plan's warm seed):
    autotuning and compilation on a shape's first call would otherwise drown the kernel's
    own device time (seen on the H200, 2026-11-29). Recorded like every call, judged on
    nothing: never on a correctness case's inputs, where a fallback could compute once and
    replay. Returns the error per shape whose warm-up failed."""
    from .fresh import make

    warm_errors: dict[str, str] = {}
    with job.phase("warm"):
        for shape, plan in job.timing.items():
            if not any(_shape_of(cid) == shape for cid in case_ids):
                continue
            try:
                fn = _built(job.build, plan["build"], job.recorder)
                with job.recorder.internal():
                    values = make(job.recipe(), int(plan["warm"]), job.device, plan["params"])
                job.call(fn, values, f"warm:{shape}", copy=False)
            except Exception as exc:
                warm_errors[shape] = _excerpt(exc)
    return warm_errors


def _traced_calls(job: _Job, case_ids: list[str], warm_errors: dict[str, str]
                  ) -> tuple[dict[str, Any], set[str]]:
    """Each correctness case called once, recorded, its outputs saved for the host to check.
    Returns each case's record and the cases whose shape failed at its warm-up (not called:
    they carry that failure)."""
    from . import tensors

    results: dict[str, Any] = {}
    warm_failed: set[str] = set()
    phase, recorder = job.phase, job.recorder
    for cid in case_ids:
        if _shape_of(cid) in warm_errors:
            results[cid] = {"ok": False, "error": warm_errors[_shape_of(cid)]}
            warm_failed.add(cid)
            continue
        try:
            # A module problem's class is built before this case's inputs are loaded, so its
            # constructor cannot find them (through gc, say) and compute there.
            with phase("build"):
                fn = _built(job.build, cid, recorder)
            with phase("inputs"), recorder.internal():
                values = job.inputs(cid)
            with phase("call"):
                out, _dev, host = job.call(fn, values, cid)
                out = _as_tuple(out)
            check_outputs(out)
            with phase("save"), recorder.internal():
                tensors.save(OUT / case_file(cid, OUTPUTS), out)
            results[cid] = {"ok": True, "wall_s": host / 1e6}
        except Exception as exc:
            results[cid] = {"ok": False, "error": _excerpt(exc)}
    return results, warm_failed


def _wait_to_time(job: _Job) -> None:
    """Beside a standby's imports (batch.run_pair), the job says "hold": the timed loops wait
    for the host's go."""
    if job.spec.get("hold") and job.timing:
        _signal_host(TRACED_FILE, {"ok": True})
        with job.phase("timing_wait"):
            _wait_for(IN / GO_FILE, JOB_WAIT_S)


def _timed_loops(job: _Job) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """Each shape's timed loop: its samples, and the labels of its timed calls."""
    labels: dict[str, list[str]] = {}
    timings: dict[str, Any] = {}
    with job.phase("timing"):
        for shape, plan in job.timing.items():
            timings[shape], labels[shape] = _time_shape(job, shape, plan)
    return timings, labels


def _attach_records(job: _Job, results: dict[str, Any], warm_failed: set[str],
                    timings: dict[str, Any], labels: dict[str, list[str]]) -> None:
    """The recorder read at the end: each case's record of its call, each timed loop's of
    its calls (and on a GPU the time its recorded kernels covered)."""
    recorder = job.recorder
    with job.phase("record"):
        recorder.finish()
        for cid, rec in results.items():
            # A case whose shape failed at its warm-up carries that call's record.
            rec["trace"] = recorder.trace(f"warm:{_shape_of(cid)}" if cid in warm_failed
                                          else cid)
        for shape, rec in timings.items():
            if rec.get("ok"):
                rec["trace"] = recorder.merged(labels[shape])
                calls = recorder.device_calls
                if calls is not None:
                    rec["covered_us"] = [calls.covered(lb, us) for lb, us in
                                         zip(labels[shape], rec["device_us"], strict=True)]
                    rec["busy_us"] = [calls.busy(lb) for lb in labels[shape]]


def _built(build: Callable[[str], Callable[..., Any]], cid: str, recorder: Any
           ) -> Callable[..., Any]:
    with recorder.call(f"build:{cid}"):
        return build(cid)


def _time_shape(job: _Job, shape: str, plan: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Time the shape by its plan: every call on inputs drawn for it alone, every call's
    outputs sampled alike right after it (fresh.sample) and all the samples kept on the
    device to the loop's end, so that nothing the entry can observe (memory in use, say)
    tells a checked call from another; then the checked calls' samples are saved for the
    host."""
    from . import tensors
    from .fresh import sample, timed_loop

    taken: list[tuple[str | None, list[Any]]] = []

    def keep(seed: int, cid: str | None, out: Any) -> None:
        taken.append((cid, sample(_as_tuple(out), seed)))

    try:
        fn = _built(job.build, plan["build"], job.recorder)  # before any input exists
        raw, labels = timed_loop(job.call.clock, fn, job.recipe(), job.device, plan, job.spec,
                                 f"time:{shape}", keep, job.phase)
        with job.recorder.internal():
            for cid, samples in taken:
                if cid is not None:
                    tensors.save(OUT / case_file(cid, OUTPUTS), [t.cpu() for t in samples])
        return {"ok": True, **raw}, labels
    except Exception as exc:
        return {"ok": False, "error": _excerpt(exc)}, []
