"""An engine that plays containers without Docker (grader.sandbox.engine.ContainerEngine), so
that the run layer's logic is unit-tested on its own: which containers a batch starts and with
what, the handshake between them, what is removed when something fails, and what a dying
container turns into.

A container's harness is a script: a generator function given the FakeContainer, run one step
each time the host looks at the container (poll, running), acting on the host folders its
spec binds at the protocol's paths as the real harness does on its side (grader/harness/main.py,
entry.py): the reference reads its job and writes inputs, expected outputs and its result; the
entry sends frames (encoded as the warden would) and writes its outputs. A script's return value
is the container's exit code. `reference()` and `entry()` make the usual scripts of an
elementwise add (x + y), with knobs for the ways a container goes wrong.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from grader.errors import InfraError
from grader.harness import tensors
from grader.harness.digest import file_digest
from grader.harness.fresh import sample
from grader.harness.protocol import (
    ARMED,
    CASES_FILE,
    ENTRY,
    EXPECTED,
    GATE_FILE,
    GO_FILE,
    IN,
    JOB_FILE,
    OUT,
    OUTPUTS,
    READY,
    READY_FILE,
    RECIPE_FILE,
    REFERENCE_FILE,
    RESULT,
    RESULT_FILE,
    STANDBY,
    STANDBY_ENV,
    START_FILE,
    TRACED,
    case_file,
)
from grader.harness.warden import encode_frame
from grader.model.runs import ExitState
from grader.sandbox.engine import poll_to_exit
from grader.sandbox.spec import ContainerSpec, Role

Steps = Generator[None, None, int]
Script = Callable[["FakeContainer"], Steps]
N = 64  # elements per input, whatever the shape says: small and quick
KERNEL = "add_kernel"  # the Triton kernel the fake entry "launches"


class FakeContainer:
    """engine.Container, its harness a script."""

    def __init__(self, engine: FakeEngine, spec: ContainerSpec, script: Script) -> None:
        self.engine = engine
        self.spec = spec
        binds = {b.container: Path(b.host) for b in spec.binds}
        self.in_dir, self.out_dir = binds[IN], binds[OUT]
        self.code_dir = binds.get(ENTRY)
        self.gated = spec.env.get(STANDBY_ENV) == "1"
        self.started = time.monotonic()
        self.deadline = self.started + spec.limits.setup_s + spec.limits.wall_s
        self.held_s = 0.0
        self.frames = bytearray()
        self.log_lines: list[str] = []
        self.oom = False  # set by a script before it returns: killed by the memory limit
        self.removed = False
        self.seen_at_import: list[str] = []  # an entry's IN when its module was imported
        self._steps: Steps | None = script(self)
        self._exit: ExitState | None = None

    @property
    def role(self) -> Role:
        return self.spec.role

    # -- what a script does -------------------------------------------------------------------
    def note(self, event: str) -> None:
        self.engine.events.append(f"{self.role}: {event}")

    def has(self, name: str) -> bool:
        return (self.in_dir / name).exists()

    def job(self) -> dict[str, Any]:
        job: dict[str, Any] = json.loads((self.in_dir / JOB_FILE).read_text())
        return job

    def write(self, name: str, data: dict[str, Any]) -> None:
        """A protocol file in OUT (the reference's way to signal the host)."""
        (self.out_dir / name).write_text(json.dumps(data))

    def send(self, kind: str, data: dict[str, Any], outputs: dict[str, str] | None = None
             ) -> None:
        """A frame, as the warden relays it on stdout."""
        body: dict[str, Any] = {"data": data}
        if outputs is not None:
            body["outputs"] = outputs
        self.frames += encode_frame(kind, body)

    def wait_for(self, name: str) -> Generator[None, None, None]:
        while not self.has(name):
            yield

    def gate(self) -> Generator[None, None, None]:
        """A standby's imports done: at the gate until the host's start."""
        if self.gated:
            if self.role == Role.ENTRY:
                self.send(STANDBY, {"ok": True})
            else:
                self.write(GATE_FILE, {"ok": True})
            self.note("at the gate")
            yield from self.wait_for(START_FILE)

    # -- engine.Container ---------------------------------------------------------------------
    def _step(self) -> None:
        if self._steps is None:
            return
        try:
            next(self._steps)
        except StopIteration as stop:
            self._steps = None
            self._finish(int(stop.value or 0), timed_out=False)

    def _finish(self, code: int | None, *, timed_out: bool) -> None:
        self.note(f"exit {code}")
        self._exit = ExitState(exit_code=code, timed_out=timed_out, oom_killed=self.oom,
                               wall_s=time.monotonic() - self.started - self.held_s,
                               held_s=self.held_s, logs="".join(self.log_lines),
                               logs_truncated=False,
                               stdout=bytes(self.frames) if self.spec.stdout_bytes else b"")

    def running(self) -> bool:
        self._step()
        return self._exit is None

    def poll(self) -> ExitState | None:
        self._step()
        if self._exit is None and time.monotonic() >= self.deadline:
            self._kill(timed_out=True)
        return self._exit

    def wait(self, on_poll: Callable[[], None] | None = None,
             wall_s: float | None = None) -> ExitState:
        if wall_s is not None:
            self.deadline = self.started + wall_s
        return poll_to_exit(self.poll, on_poll)

    def kill(self) -> None:
        if self._exit is None:
            self._kill(timed_out=False)

    def _kill(self, *, timed_out: bool) -> None:
        if self._steps is not None:
            self._steps.close()
            self._steps = None
        self._finish(None if timed_out else 137, timed_out=timed_out)

    def extend(self, seconds: float) -> None:
        self.held_s += seconds
        self.deadline += seconds

    def rebase(self) -> None:
        self.started = time.monotonic()
        self.deadline = self.started + self.spec.limits.wall_s

    def stdout(self) -> bytes:
        return bytes(self.frames[:self.spec.stdout_bytes + 1])

    def logs_since(self, since: float) -> tuple[str, bool]:
        return "".join(self.log_lines), False

    def last_words(self) -> None:
        self.note("stack signal")

    def set_memory(self, memory_bytes: int) -> None:
        self.note(f"memory {memory_bytes}")

    def remove(self) -> None:
        self.kill()
        self.removed = True


class FakeEngine:
    """engine.ContainerEngine over FakeContainers. `scripts`: per role, the script of each
    container of that role in turn (the last one again for any further container)."""

    def __init__(self, scripts: dict[Role, list[Script]], *, refuse: Role | None = None
                 ) -> None:
        self.scripts = scripts
        self.refuse = refuse  # a role whose containers the engine cannot start
        self.started: list[FakeContainer] = []
        self.events: list[str] = []
        self.images: dict[str, str] = {}
        self.built: list[str] = []

    def of(self, role: Role) -> list[FakeContainer]:
        return [c for c in self.started if c.role == role]

    def left(self) -> list[FakeContainer]:
        """Containers not removed."""
        return [c for c in self.started if not c.removed]

    def info(self) -> dict[str, Any]:
        return {"Runtimes": {"runc": {}}}

    def version(self) -> str:
        return "fake"

    def image_id(self, tag: str) -> str | None:
        return self.images.get(tag)

    def build(self, context: Path, tag: str, kind: str) -> str:
        dockerfile = (context / "Dockerfile").read_bytes()
        self.images[tag] = "sha256:" + hashlib.sha256(dockerfile).hexdigest()
        self.built.append(tag)
        return self.images[tag]

    def import_rootfs(self, tarball: Path, tag: str, kind: str) -> str:
        self.images[tag] = "sha256:" + hashlib.sha256(tarball.read_bytes()).hexdigest()
        self.built.append(tag)
        return self.images[tag]

    @contextmanager
    def start(self, spec: ContainerSpec) -> Iterator[FakeContainer]:
        if spec.role == self.refuse:
            raise InfraError(f"cannot start a {spec.role} container: the engine refused")
        done = len(self.of(spec.role))
        queue = self.scripts[spec.role]
        container = FakeContainer(self, spec, queue[min(done, len(queue) - 1)])
        self.started.append(container)
        try:
            yield container
        finally:
            container.remove()

    def run(self, spec: ContainerSpec, on_poll: Callable[[], None] | None = None
            ) -> ExitState:
        with self.start(spec) as running:
            return running.wait(on_poll=on_poll)

    def reap(self, session: str | None = None) -> int:
        gone = [c for c in self.left() if session is None or c.spec.session == session]
        for c in gone:
            c.remove()
        return len(gone)

    def clone(self) -> FakeEngine:
        return self


# -- the usual scripts ------------------------------------------------------------------------
def _inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(N, generator=gen), torch.randn(N, generator=gen)


def _pack_recipe(path: Path) -> None:
    """The problem's public files as the real reference packs them (harness.main): here the
    recipe _inputs stands for."""
    data = b"def make_inputs(seed, device, **params): ...\n"
    with tarfile.open(path, "w") as tar:
        info = tarfile.TarInfo(REFERENCE_FILE)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def _samples(n: int, us: float) -> dict[str, Any]:
    return {"ok": True, "device_us": [us] * n, "host_us": [us + 2] * n, "method": "fake"}


def _expect(c: FakeContainer, case: dict[str, Any]) -> dict[str, Any]:
    """The reference's x + y on one case of its job (its samples for a checked timed call),
    saved; the case's record."""
    x, y = _inputs(case["seed"])
    expected = sample((x + y,), case["seed"]) if case.get("sampled") else [x + y]
    tensors.save(c.out_dir / case_file(case["id"], EXPECTED), expected)
    return {"ok": True}


def reference(*, failing: str | None = None) -> Script:
    """The reference's harness: inputs and x + y per case; `failing`: a case id whose
    reference raises."""

    def script(c: FakeContainer) -> Steps:
        yield from c.gate()
        job = c.job()
        _pack_recipe(c.out_dir / RECIPE_FILE)
        results: dict[str, Any] = {}
        for case in job["cases"]:
            cid = case["id"]
            if cid == failing:
                results[cid] = {"ok": False, "error": "Traceback (most recent call last):\n"
                                "RuntimeError: the reference failed"}
            else:
                results[cid] = _expect(c, case)
            yield
        c.note("cases done")
        if job.get("hold"):
            c.write(CASES_FILE, {"cases": results})
            yield from c.wait_for(GO_FILE)
            c.note("go")
            # the checked timed calls an entry's loops reached beyond these (run.pair)
            for case in json.loads((c.in_dir / GO_FILE).read_text()).get("cases") or []:
                results[case["id"]] = _expect(c, case)
                c.note(f"go case {case['id']}")
        timings = {shape: _samples(8, 20.0) for shape in job.get("timing", {})}
        c.write(RESULT_FILE, {"cases": results, "timings": timings, "device_name": "fake"})
        return 0

    return script


def entry(*, compute: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = torch.add,
          dies: str | None = None, exit_code: int = 137, oom: bool = False,
          ready_ok: bool = True, hangs: bool = False, ready_file: bool = False,
          set_up_s: float = 0.0, calls: int = 8) -> Script:
    """The entry's harness under its warden. `dies`: "import" (before its ready frame) or
    "calls" (after its job came), with `exit_code` (and `oom`: the memory limit's kill);
    `ready_ok=False`: its module failed to import (exit 3, as the harness does); `hangs`: it
    never ends; `ready_file`: it writes ready.json itself (as entry code could) and exits;
    `set_up_s`: its harness's set-up (cold imports) takes that long before it arms its clock;
    `calls`: the timed calls each shape's loop makes (its plan's first calls - 1, then its
    last)."""

    def script(c: FakeContainer) -> Steps:
        yield from c.gate()
        until = time.monotonic() + set_up_s
        while time.monotonic() < until:
            yield
        c.send(ARMED, {"ok": True})
        c.seen_at_import = sorted(p.name for p in c.in_dir.iterdir())
        c.note("imported")
        if ready_file:
            c.write(READY_FILE, {"ok": True})
            return 0
        if dies == "import":
            c.oom = oom
            return exit_code
        if not ready_ok:
            c.send(READY, {"ok": False, "error": "SyntaxError: invalid syntax"})
            return 3
        c.send(READY, {"ok": True, "import_s": 0.5, "jit_functions": [KERNEL]})
        yield from c.wait_for(JOB_FILE)
        job = c.job()
        c.note("job")
        if dies == "calls":
            c.oom = oom
            return exit_code
        while hangs:
            yield
        results: dict[str, Any] = {}
        for case in job["cases"]:
            cid = case["id"]
            x, y = _inputs(case["seed"])  # drawn where it runs, from the job's seed
            tensors.save(c.out_dir / case_file(cid, OUTPUTS), (compute(x, y),))
            results[cid] = {"ok": True, "wall_s": 0.001,
                            "trace": {"triton_launches": {KERNEL: 1}}}
            yield
        timing = job.get("timing", {})
        if job.get("hold") and timing:
            c.send(TRACED, {"ok": True})
            c.note("traced")
            yield from c.wait_for(GO_FILE)
            c.note("go")
        c.note("timed")
        timings = {}
        for shape, plan in timing.items():
            # `calls` timed calls as the plan draws them: its first calls, then its last.
            for seed, cid in [*plan["calls"][:calls - 1], plan["last"]]:
                if cid is not None:
                    out = compute(*_inputs(seed))
                    tensors.save(c.out_dir / case_file(cid, OUTPUTS), sample((out,), seed))
            # What a GPU's recorder says: each timed call's time covered by its own kernel.
            timings[shape] = {**_samples(calls, 10.0), "covered_us": [10.0] * calls,
                              "busy_us": [10.0] * calls, "trace": {
                                  "triton_launches": {KERNEL: calls}, "device_kernels": [
                                      {"name": KERNEL, "device_us": 10.0 * calls,
                                       "calls": calls}]}}
        outputs = {p.name: file_digest(p) for p in sorted(c.out_dir.glob("*." + OUTPUTS))}
        c.send(RESULT, {"cases": results, "timings": timings}, outputs)
        return 0

    return script
