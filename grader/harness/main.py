"""The in-container harness: runs the reference (trusted) or an entry (untrusted).

Everything this process writes is *evidence* for the host to validate, never a verdict: in
entry mode the entry's code shares this process and can rewrite any of it.

Protocol (paths are fixed container paths):
  reference: /grader/in/job.json lists cases {id, params, seed}; for each case write
             <id>.in (make_inputs) and <id>.ref (reference outputs) to /grader/out. With
             "hold" in the job (its container overlaps the entry's), write .cases.json once
             the cases are done and time only once /grader/in/go.json exists (the host writes
             it when the entry's container has exited); then result.json.
  entry:     import /grader/entry/kernel.py, then write /grader/out/ready.json; only then does
             the host place the inputs and /grader/in/job.json (so nothing the entry does at
             import time can see them); for each case write <id>.out and finally result.json.
             With "hold" in the job (a standby beside it still importing), write .traced.json
             after the traced calls and time only once /grader/in/go.json exists.
Standby (GRADER_STANDBY=1 in the environment; problem_run.Standby): either role first imports
             torch (and Triton); on a GPU the entry's harness then makes its CUDA context and
             the device profiler's one-time set-up; then it writes /grader/out/.standby.json
             and waits for /grader/in/start.json; only then does it go on as above. Nothing
             before the gate loads the entry's file or reads an input: the host starts a
             batch's containers while the batch before it still runs, and holds that batch's
             timed loops until these are idle here (at the gate, all of the above done).
Module problems (`main.py entry CLASS...`): the job's "module" maps each case id to the
constructor's keyword arguments and a seed; both sides build their class per case with them
(modules.build_module), outside the trace and the timed loop, and call it in place of
reference() / kernel().
Standard library, torch and triton only.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

IN = Path("/grader/in")
OUT = Path("/grader/out")
PROBLEM = Path("/grader/problem")
ENTRY = Path("/grader/entry/kernel.py")
EXCERPT = 4000
# The host kills a container at its own deadline; these only end a harness the host forgot.
# An entry may wait for its job while the reference computes (problem_run.run_pair), and a
# held reference for the whole entry run.
JOB_WAIT_S = 3600.0
HOLD_WAIT_S = 86400.0
CASES_DONE = ".cases.json"  # a held reference's case results (a dot: not an output file)
STANDBY_ENV = "GRADER_STANDBY"
AT_GATE = ".standby.json"  # in OUT: imported, waiting for START
START = "start.json"  # in IN: the host's release of a standby container
GO = "go.json"  # in IN: the host's release of a held timed loop
TRACED = ".traced.json"  # in OUT: a held entry's traced calls are done, its timed loops wait


class Phases:
    """Seconds spent per phase of this process (for the overhead benchmark: evidence of where
    grading time goes, not of anything a verdict rests on)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0


def _excerpt(exc: BaseException) -> str:
    text = "".join(traceback.format_exception(exc))
    return text[-EXCERPT:]


def _write_json(name: str, data: dict[str, Any]) -> None:
    tmp = OUT / f".{name}.part"
    tmp.write_text(json.dumps(data))
    os.replace(tmp, OUT / name)


def _load_module(path: Path, name: str) -> Any:
    # Loaded by path, with its folder kept off sys.path: a `torch.py` beside the kernel
    # shadows nothing.
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _wait_for(path: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path.name} did not arrive")
        time.sleep(0.02)


def _wait_for_job() -> dict[str, Any]:
    job = IN / "job.json"
    _wait_for(job, JOB_WAIT_S)
    data: dict[str, Any] = json.loads(job.read_text())
    return data


def _standby(phase: Phases, gpu_setup: Callable[[], None] | None = None) -> bool:
    """With STANDBY_ENV set: the cold imports, then (on a GPU) `gpu_setup`, then wait at the
    gate for the host's START. Returns whether `gpu_setup` ran to its end here."""
    if os.environ.get(STANDBY_ENV) != "1":
        return False
    with phase("standby"):
        import torch  # CPU only: CUDA initialises lazily

        try:
            import triton  # noqa: F401
        except ImportError:  # a runtime without Triton: the entry's own import says so
            pass
    prepared = False
    if gpu_setup is not None and os.environ.get("GRADER_DEVICE") == "cuda":
        # Trusted set-up, no entry code: done before .standby.json, so the host's wait for
        # this standby to be idle covers it and no timed loop beside runs during it.
        with phase("standby_prepare"):
            try:
                gpu_setup()
                prepared = True
            except Exception:  # tried again after the gate, where the cases meet it
                pass
    # Evidence for tests/gpu (the host decides nothing on it).
    _write_json(AT_GATE, {"ok": True, "cuda_initialized": torch.cuda.is_initialized(),
                          "prepared": prepared})
    with phase("gate"):
        _wait_for(IN / START, HOLD_WAIT_S)
    return prepared


def _prepare_cuda() -> None:
    import torch

    from .trace import DeviceProfile

    torch.cuda.init()
    with DeviceProfile():  # a throwaway session: the profiler's set-up is paid once a process
        torch.ones(1, device="cuda").add_(1)
        torch.cuda.synchronize()


def _shape_of(case_id: str) -> str:
    return case_id.rsplit(".", 1)[0]


def _as_tuple(out: Any) -> tuple[Any, ...]:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _callables(job: dict[str, Any], entry: Any, classes: list[str] | None
               ) -> Callable[[str], Callable[..., Any]]:
    """Case id -> what to call: `entry` itself (a function), or for module problems the first
    of `classes` in `entry` built with the case's arguments and seed (a fresh one per call)."""
    spec = job.get("module")
    if spec is None or classes is None:
        return lambda _cid: entry
    from .modules import as_function, build_module, find_class

    cls = find_class(entry, classes)
    return lambda cid: as_function(build_module(cls, spec[cid]["init"], spec[cid]["seed"],
                                                job["device"]))


def run_reference() -> int:
    phase = Phases()
    _standby(phase)
    with phase("import"):
        import torch

        job = json.loads((IN / "job.json").read_text())
        ref = _load_module(PROBLEM / "reference.py", "problem_reference")
    device = job["device"]
    module_problem = "module" in job
    build = _callables(job, ref if module_problem else ref.reference,
                       ["Model"] if module_problem else None)
    results = _reference_cases(ref, build, job, phase)
    if job.get("hold"):
        # Overlapped with the entry's container (problem_run.run_pair): the cases are written,
        # and the timed loop waits until the entry has exited, so that no entry code shares
        # the GPU with it. The case tensors are gone with _reference_cases's frame.
        _write_json(CASES_DONE, {"cases": results})
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
        _wait_for(IN / GO, HOLD_WAIT_S)
    with phase("timing"):
        timings = {shape: _time_shape(build, ids, job, OUT)
                   for shape, ids in job.get("timing", {}).items()}
    name = torch.cuda.get_device_name() if device.startswith("cuda") else "cpu"
    _write_json("result.json", {"cases": results, "timings": timings, "device_name": name,
                                "phases_s": phase.seconds})
    return 0


def _reference_cases(ref: Any, build: Callable[[str], Callable[..., Any]], job: dict[str, Any],
                     phase: Phases) -> dict[str, Any]:
    """Each case's inputs (make_inputs) and expected outputs, written to OUT."""
    import torch

    from . import tensors

    device = job["device"]
    results: dict[str, Any] = {}
    for case in job["cases"]:
        cid = case["id"]
        try:
            with phase("inputs"):
                inputs = ref.make_inputs(case["seed"], device, **case["params"])
                tensors.save(OUT / f"{cid}.in", _as_tuple(inputs))
            with phase("reference"):
                call = build(cid)
                with torch.no_grad():
                    expected = _as_tuple(call(*inputs))
                _sync(device)
                tensors.save(OUT / f"{cid}.ref", expected)
            results[cid] = {"ok": True}
        except Exception as exc:
            results[cid] = {"ok": False, "error": _excerpt(exc)}
    return results


def _jit_names(module: Any) -> list[str]:
    """Names of the module's Triton kernels (JITFunction, possibly under autotune wrappers)."""
    names = []
    for value in vars(module).values():
        fn = value
        for _ in range(4):  # Autotuner/Heuristics wrap the JITFunction in `.fn`
            if type(fn).__name__ == "JITFunction":
                names.append(getattr(fn, "__name__", None) or fn.fn.__name__)
                break
            fn = getattr(fn, "fn", None)
            if fn is None:
                break
    return sorted(set(names))


def run_entry(classes: list[str] | None = None) -> int:
    """`classes`: a module problem's entry class names (the first found is built)."""
    phase = Phases()
    # Started ahead, the CUDA context and the device profiler's set-up are made at the standby.
    prepared = _standby(phase, _prepare_cuda)
    t0 = time.monotonic()
    try:
        module = _load_module(ENTRY, "entry_kernel")
        if classes:
            from .modules import find_class

            find_class(module, classes)
            kernel: Any = module  # the class is looked up again, and built, per case
        else:
            kernel = getattr(module, "kernel", None)
            if not callable(kernel):
                raise AttributeError("the kernel file defines no callable kernel()")
    except BaseException as exc:  # the entry may raise anything, SystemExit included
        _write_json("ready.json", {"ok": False, "error": _excerpt(exc)})
        return 3
    _write_json("ready.json", {"ok": True, "import_s": time.monotonic() - t0,
                               "jit_functions": _jit_names(module)})

    import torch

    from . import tensors
    from .trace import DeviceProfile, Tracer

    if os.environ.get("GRADER_DEVICE") == "cuda" and not prepared:
        # While the job is not there yet (the reference may still be computing beside us):
        # the CUDA context, and the device profiler's one-time set-up, which took 4.4 s of a
        # 10-13 s entry container on the H200 (2026-12-01) when paid inside the first session.
        with phase("prepare"):
            try:
                _prepare_cuda()
            except Exception:  # the cases meet the same failure, and report it
                pass
    with phase("job_wait"):
        job = _wait_for_job()
    device = job["device"]
    build = _callables(job, kernel, classes or None)
    case_ids = [case["id"] for case in job["cases"]]
    # One untraced call per shape first: autotuning and compilation on a shape's first call
    # would otherwise drown the kernel's own device time (seen on the H200, 2026-11-29). On a
    # timing set, never on a traced case's inputs: an untraced call on them would let a
    # fallback compute there and replay it when traced. All of them before the device profile
    # starts, so that autotuning's hundreds of launches are not profiled.
    warm_errors: dict[str, str] = {}
    with phase("warm"):
        for shape, warm_ids in job.get("timing", {}).items():
            if not warm_ids or not any(_shape_of(cid) == shape for cid in case_ids):
                continue
            try:
                build(warm_ids[0])(*tensors.load(IN / f"{warm_ids[0]}.in", device=device))
                _sync(device)
            except Exception as exc:
                warm_errors[shape] = _excerpt(exc)
    results: dict[str, Any] = {}
    tracers: dict[str, Tracer] = {}
    profile = DeviceProfile() if device.startswith("cuda") else None
    with phase("profile"):
        if profile is not None:
            profile.start()
    try:
        for cid in case_ids:
            if _shape_of(cid) in warm_errors:
                results[cid] = {"ok": False, "error": warm_errors[_shape_of(cid)]}
                continue
            try:
                # A module problem's class is built here: outside the trace, and before this
                # case's inputs are loaded, so its constructor cannot find them (through gc,
                # say) and compute there, untraced.
                with phase("build"):
                    call = build(cid)
                with phase("load"):
                    inputs = tensors.load(IN / f"{cid}.in", device=device)
                with phase("trace"):
                    tracer = Tracer(device=device, profile=profile, label=cid)
                    start = time.perf_counter()
                    with tracer:
                        out = _as_tuple(call(*inputs))
                        _sync(device)
                    wall = time.perf_counter() - start
                # Exactly torch.Tensor: a subclass could compute lazily when the harness saves
                # it, after the trace ended (tests/cases/hostile/evasive_lazy_tensor_subclass).
                bad = [type(o).__name__ for o in out if type(o) is not torch.Tensor]
                if bad:
                    raise TypeError(f"kernel() returned {', '.join(bad)} where plain "
                                    "torch.Tensor outputs were expected")
                with phase("save"):
                    tensors.save(OUT / f"{cid}.out", out)
                results[cid] = {"ok": True, "wall_s": wall}
                tracers[cid] = tracer
            except Exception as exc:
                results[cid] = {"ok": False, "error": _excerpt(exc)}
    finally:
        with phase("profile"):  # stopped, and its events read
            if profile is not None:
                profile.stop()
    with phase("trace"):
        for cid, tracer in tracers.items():
            results[cid]["trace"] = tracer.result()
    if job.get("hold") and job.get("timing"):
        # Beside a standby's imports (problem_run.run_pair): the timed loops wait for them.
        _write_json(TRACED, {"ok": True})
        with phase("timing_wait"):
            _wait_for(IN / GO, JOB_WAIT_S)
    with phase("timing"):
        timings = {shape: _time_shape(build, ids, job, IN, save=True)
                   for shape, ids in job.get("timing", {}).items()}
    _write_json("result.json", {"cases": results, "timings": timings,
                                "phases_s": phase.seconds})
    return 0


def _time_shape(build: Callable[[str], Callable[..., Any]], ids: list[str],
                job: dict[str, Any], inputs: Path, save: bool = False) -> dict[str, Any]:
    """Time what `build` gives for each of the shape's input sets (built before the loop);
    with `save`, keep the outputs for checking."""
    from . import tensors
    from .timing import time_kernel

    try:
        calls = [build(cid) for cid in ids]  # before the inputs exist (see run_entry)
        sets = [tuple(tensors.load(inputs / f"{cid}.in", device=job["device"])) for cid in ids]
        raw, last = time_kernel(calls, sets, l2_flush_bytes=job["l2_flush_bytes"],
                                rse_target=job["rse_target"], budget_s=job["budget_s"])
        for k, out in last.items() if save else ():
            tensors.save(OUT / f"{ids[k]}.out", _as_tuple(out))
        return {"ok": True, **raw}
    except Exception as exc:
        return {"ok": False, "error": _excerpt(exc)}


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if args == ["reference"]:
        return run_reference()
    if args[:1] == ["entry"]:
        return run_entry(args[1:] or None)
    print("usage: main.py reference | entry [CLASS ...]", file=sys.stderr)
    return 2
