"""The in-container harness: runs the reference (trusted) or an entry (untrusted).

Everything this process writes is *evidence* for the host to validate, never a verdict: in
entry mode the entry's code shares this process and can rewrite any of it.

Protocol (paths are fixed container paths; every name is protocol.py's):
  reference: /grader/in/job.json lists cases {id, params, seed}; for each case draw its
             inputs (make_inputs) and write <id>.ref (reference outputs) to /grader/out, and
             the problem's public files as the recipe the entry draws the same inputs with
             (inputs are made where they are used: none travels, issue 32). With
             "hold" in the job (its container overlaps the entry's), write .cases.json once
             the cases are done and time only once /grader/in/go.json exists (the host writes
             it when the entry's container has exited); then result.json.
  entry:     import /grader/entry/kernel.py, then send "ready"; only then does the host
             place the recipe and /grader/in/job.json with each case's seed (so nothing the
             entry does at import time can see them); for each case draw its inputs from its
             seed, call, write <id>.out, and finally send "result".
             With "hold" in the job (a standby beside it still importing), send "traced"
             after the traced calls and time only once /grader/in/go.json exists.
             The entry's harness runs under the warden (warden.py, the container's pid 1):
             "ready", "traced", "result" and the standby gate are frames on fd 3, each with
             the token the warden handed over on fd 4 (read here before any entry code runs),
             never files; the warden checks their order and relays them on the container's
             stdout, and after "result" ends every process of the container before the host
             sees it. `_signal_host` is the one seam: protocol names become frames under the
             warden (CHANNEL_ENV set), files otherwise (the reference, and tests that run
             this module directly).
Standby (GRADER_STANDBY=1 in the environment; run.ahead.Standby): either role first imports
             torch (and Triton); on a GPU the entry's harness then makes its CUDA context and
             the device profiler's one-time set-up; then it signals the gate (the entry a
             "standby" frame, the reference /grader/out/.standby.json) and waits for
             /grader/in/start.json (a served worker: its own); only then does it go on. Nothing
             before the gate loads the entry's file or reads an input: the host starts a
             batch's containers while the batch before it still runs, and holds that batch's
             timed loops until these are idle here (at the gate, all of the above done).
Module problems (`boot.py entry CLASS...`): the job's "module" maps each case id to the
constructor's keyword arguments and a seed; both sides build their class per case with them
(modules.build_module), outside the trace and the timed loop, and call it in place of
reference() / kernel().
Standard library, torch and triton only.
"""

from __future__ import annotations

import json
import os
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .loading import as_tuple as _as_tuple
from .loading import load_module as _load_module
from .protocol import (
    CASES_FILE,
    CHANNEL_ENV,
    DEVICE_ENV,
    EXPECTED,
    FRAMES,
    GATE_FILE,
    GO_FILE,
    JOB_FILE,
    OUTPUTS,
    PROBLEM_TOML,
    RECIPE_FILE,
    REFERENCE_FILE,
    RESULT,
    RESULT_FILE,
    STANDBY_ENV,
    TOKEN_FD,
    WORKER_ENV,
    case_file,
    gate_file,
)
from .protocol import ENTRY_FILE as _ENTRY_FILE
from .protocol import IN as _IN
from .protocol import OUT as _OUT
from .protocol import PROBLEM as _PROBLEM

# Module attributes, so that tests can run this module outside a container on folders of
# their own (tests/unit/test_module_interface.py).
IN = Path(_IN)
OUT = Path(_OUT)
PROBLEM = Path(_PROBLEM)
ENTRY = Path(_ENTRY_FILE)
EXCERPT = 4000
# The host kills a container at its own deadline; these only end a harness the host forgot.
# An entry may wait for its job while the reference computes (run.pair.run_pair), and a
# held reference for the whole entry run.
JOB_WAIT_S = 3600.0
HOLD_WAIT_S = 86400.0
# A standby's wait at its gate (run.ahead.Standby). Short: if the grader dies, a standby
# ends on its own within this (issue 19: two standbys of a killed grader still waited, up to
# a day). A batch whose turn comes later finds its standby gone and starts afresh.
STANDBY_WAIT_S = 600.0


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


MAX_OUTPUTS = 20000


def _open_channel() -> tuple[int, bytes] | None:
    """The frame pipe and the warden's token, or None outside the warden. Runs when this
    module is imported, before the entry's file is loaded: the token's pipe is read to its
    end and closed, so entry code finds neither fd 4 nor the token anywhere but in this
    process's memory (and reading that is introspection, a static violation)."""
    fd = os.environ.get(CHANNEL_ENV)
    if fd is None:
        return None
    chunks = []
    while chunk := os.read(TOKEN_FD, 256):
        chunks.append(chunk)
    os.close(TOKEN_FD)
    os.set_inheritable(int(fd), False)  # compilers and other exec'd children get no handle
    return int(fd), b"".join(chunks).strip()


_CHANNEL = _open_channel()


def _hash_outputs() -> dict[str, str]:
    """The digest (digest.file_digest) of each <case>.out as it is when the result goes out:
    the host refuses output files that differ (rewritten after the harness's last act, before
    the warden ended the process) or that the result does not list."""
    from .digest import file_digest

    hashes: dict[str, str] = {}
    for entry in sorted(os.scandir(OUT), key=lambda e: e.name)[:MAX_OUTPUTS]:
        if not entry.name.endswith("." + OUTPUTS) or not entry.is_file(follow_symlinks=False):
            continue
        hashes[entry.name] = file_digest(entry.path)
    return hashes


def _signal_host(name: str, data: dict[str, Any]) -> None:
    """The harness's one way to signal the host (see the protocol above): the names in
    protocol.FRAMES become frames under the warden."""
    kind = FRAMES.get(name)
    if _CHANNEL is not None and kind is not None:
        fd, token = _CHANNEL
        frame: dict[str, Any] = {"frame": kind, "token": token.decode(), "data": data}
        if kind == RESULT:
            frame["outputs"] = _hash_outputs()
        view = memoryview(json.dumps(frame, separators=(",", ":")).encode() + b"\n")
        while view:
            view = view[os.write(fd, view):]
        return
    tmp = OUT / f".{name}.part"
    tmp.write_text(json.dumps(data))
    os.replace(tmp, OUT / name)


def _wait_for(path: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path.name} did not arrive")
        time.sleep(0.02)


def _wait_for_job() -> dict[str, Any]:
    job = IN / JOB_FILE
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
    if gpu_setup is not None and os.environ.get(DEVICE_ENV) == "cuda":
        # Trusted set-up, no entry code: done before GATE_FILE, so the host's wait for
        # this standby to be idle covers it and no timed loop beside runs during it.
        with phase("standby_prepare"):
            try:
                gpu_setup()
                prepared = True
            except Exception:  # tried again after the gate, where the cases meet it
                pass
    _signal_host(GATE_FILE, {"ok": True, "cuda_initialized": torch.cuda.is_initialized(),
                          "prepared": prepared})  # evidence for tests/gpu, no more
    with phase("gate"):
        _wait_for(IN / gate_file(os.environ.get(WORKER_ENV)), STANDBY_WAIT_S)
    return prepared


def _prepare_cuda() -> None:
    import torch

    torch.cuda.init()
    # A throwaway session: the device profiler's set-up is paid once a process, and the
    # entry's recorder (record.Recorder) starts its own session before the entry is loaded.
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]):
        torch.ones(1, device="cuda").add_(1)
        torch.cuda.synchronize()


def _shape_of(case_id: str) -> str:
    return case_id.rsplit(".", 1)[0]


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _callables(job: dict[str, Any], entry: Any, classes: list[str] | None, *,
               share: bool = False) -> Callable[[str], Callable[..., Any]]:
    """Case id -> what to call: `entry` itself (a function), or for module problems the first
    of `classes` in `entry` built with the case's arguments and seed (a fresh one per call;
    with `share`, one per arguments and seed: the reference's checked timed calls share
    their shape's)."""
    spec = job.get("module")
    if spec is None or classes is None:
        return lambda _cid: entry
    from .modules import as_function, build_module, find_class

    cls = find_class(entry, classes)
    built: dict[str, Callable[..., Any]] = {}

    def build(cid: str) -> Callable[..., Any]:
        key = json.dumps([spec[cid]["init"], spec[cid]["seed"]], sort_keys=True, default=str)
        if share and key in built:
            return built[key]
        fn = as_function(build_module(cls, spec[cid]["init"], spec[cid]["seed"], job["device"]))
        if share:
            built[key] = fn
        return fn

    return build


def run_reference() -> int:
    phase = Phases()
    _standby(phase)
    with phase("import"):
        import torch

        job = json.loads((IN / JOB_FILE).read_text())
        ref = _load_module(PROBLEM / REFERENCE_FILE, "problem_reference")
    device = job["device"]
    module_problem = "module" in job
    build = _callables(job, ref if module_problem else ref.reference,
                       ["Model"] if module_problem else None, share=True)
    _pack_recipe()
    results = _reference_cases(ref, build, job, phase)
    if job.get("hold"):
        # Overlapped with the entry's container (run.pair.run_pair): the cases are written,
        # and the timed loop waits until the entry has exited, so that no entry code shares
        # the GPU with it. The case tensors are gone with _reference_cases's frame.
        _signal_host(CASES_FILE, {"cases": results})
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
        _wait_for(IN / GO_FILE, HOLD_WAIT_S)
        # The checked timed calls the entry's loops reached beyond the job's (run.pair):
        # computed here, warm, before the timed loop.
        more = json.loads((IN / GO_FILE).read_text()).get("cases") or []
        if more:
            results.update(_reference_cases(ref, build, {**job, "cases": more}, phase))
    with phase("timing"):
        timings = {shape: _time_shape(build, ref, plan, job)
                   for shape, plan in job.get("timing", {}).items()}
    name = torch.cuda.get_device_name() if device.startswith("cuda") else "cpu"
    _signal_host(RESULT_FILE, {"cases": results, "timings": timings, "device_name": name,
                                "phases_s": phase.seconds})
    return 0


def _reference_cases(ref: Any, build: Callable[[str], Callable[..., Any]], job: dict[str, Any],
                     phase: Phases) -> dict[str, Any]:
    """Each case's expected outputs, written to OUT, on inputs drawn here (make_inputs) as
    the entry's harness draws them from the same seed; a checked timed call's ("sampled")
    expected samples only (fresh.sample). Each ok case's record says how many bytes its
    inputs hold (the entry's memory is sized from them: run.plan.entry_limits)."""
    import torch

    from . import tensors
    from .fresh import sample

    device = job["device"]
    results: dict[str, Any] = {}
    for case in job["cases"]:
        cid = case["id"]
        try:
            with phase("inputs"):
                inputs = _as_tuple(ref.make_inputs(case["seed"], device, **case["params"]))
            input_bytes = sum(t.numel() * t.element_size() for t in inputs
                              if isinstance(t, torch.Tensor))
            record: dict[str, Any] = {"ok": True, "input_bytes": input_bytes}
            if job.get("input_digests"):
                record["input_digest"] = _digest(inputs)
            with phase("reference"):
                call = build(cid)
                with torch.no_grad():
                    expected = _as_tuple(call(*inputs))
                _sync(device)
                if case.get("sampled"):
                    expected = tuple(t.cpu() for t in sample(expected, case["seed"]))
                tensors.save(OUT / case_file(cid, EXPECTED), expected)
            results[cid] = record
        except Exception as exc:
            results[cid] = {"ok": False, "error": _excerpt(exc)}
    return results


def _digest(values: tuple[Any, ...]) -> str:
    """The sha256 of a case's inputs: each tensor's dtype, shape and bytes, other values'
    repr (suite check compares two runs' digests: the entry draws the same inputs itself)."""
    import hashlib

    import torch

    h = hashlib.sha256()
    for v in values:
        if isinstance(v, torch.Tensor):
            t = v.detach().contiguous().cpu()
            h.update(f"{t.dtype}{tuple(t.shape)}".encode())
            if t.numel():
                h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
        else:
            h.update(repr(v).encode())
    return h.hexdigest()


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


def _time_shape(build: Callable[[str], Callable[..., Any]], ref: Any, plan: dict[str, Any],
                job: dict[str, Any]) -> dict[str, Any]:
    """The reference's timed loop (for the report's speed-up column), on inputs drawn per
    call as the entry's are (fresh.timed_loop); the entry's is harness/entry.py's."""
    from .fresh import timed_loop
    from .timing import Clock

    try:
        clock = Clock(None, job["l2_flush_bytes"])
        raw, _labels = timed_loop(clock, build(plan["build"]), ref, job["device"], plan, job,
                                  "reference")
        return {"ok": True, **raw}
    except Exception as exc:
        return {"ok": False, "error": _excerpt(exc)}


def _pack_recipe() -> None:
    """The problem's public files (all but problem.toml) as RECIPE_FILE in OUT: what the
    host unpacks for the entry's harness to draw its inputs with."""
    import tarfile

    tmp = OUT / f"{RECIPE_FILE}.part"
    with tarfile.open(tmp, "w") as tar:
        for path in sorted(PROBLEM.iterdir()):
            if path.name != PROBLEM_TOML and path.is_file() and not path.is_symlink():
                tar.add(path, arcname=path.name, recursive=False)
    os.replace(tmp, OUT / RECIPE_FILE)
