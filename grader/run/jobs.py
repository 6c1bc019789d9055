"""What each container of a batch is given: its interpreter, environment and binds (its
spec), its folders, and its job; and the shared types of a batch's runs (run/batch.py runs
them).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from grader.formats.problem import Problem, Shape
from grader.harness import tensors
from grader.harness.protocol import (
    BOOT,
    DEVICE_ENV,
    ENTRY,
    IN,
    INPUTS,
    JOB_FILE,
    KERNEL_FILE,
    LOG_BYTES_ENV,
    OUT,
    PROBLEM,
    STANDBY_ENV,
    STDOUT_BYTES,
    case_file,
)
from grader.run.channel import Frames
from grader.run.evidence import OutDir
from grader.sandbox.capped import private_dir, resize
from grader.sandbox.engine import ContainerEngine, ExitState
from grader.sandbox.runs import run_folder
from grader.sandbox.spec import Bind, ContainerSpec, GpuAccess, Limits, Role


@dataclass(frozen=True, kw_only=True)
class Case:
    id: str  # "<shape>.<k>": a safe file name
    shape: Shape
    seed: int
    timing: bool = False  # an input set for the timed loop, not for the correctness calls
    # Module problems: the seed both containers build the case's module under. Derived from
    # the run's secret and the case seed, never equal to it (worker.derive_module_seed).
    module_seed: int = 0


@dataclass(frozen=True, kw_only=True)
class TimingKnobs:
    sets_per_shape: int = 3
    # The least L2 flush; the harness writes twice the device's own L2 where that is larger.
    l2_flush_bytes: int = 256 << 20
    rse_target: float = 0.01
    budget_s: float = 5.0
    # The reference is timed only for the report's speed-up column: a shorter budget. Slow
    # references spent it whole (attention_prefill's: 24 s of a 61 s problem on the H200,
    # 2026-12-01).
    reference_budget_s: float = 1.0


@dataclass(frozen=True, kw_only=True)
class ContainerRun:
    exit: ExitState
    out: OutDir
    frames: Frames | None = None  # an entry's channel (grader/run/channel.py); None: files only


@dataclass(frozen=True, kw_only=True)
class WorkerSetup:
    """What every container of this run shares."""

    engine: ContainerEngine
    session: str
    python: str
    device: str
    gpu: GpuAccess | None = None
    # The host's toolchain (host runtime) or driver libraries (cuda runtime without NVIDIA's
    # toolkit), read-only, and what the container needs told of them.
    extra_binds: tuple[Bind, ...] = ()
    extra_env: tuple[tuple[str, str], ...] = ()
    timing: TimingKnobs | None = None  # None: no timed loop (the CPU interpreter)


@contextmanager
def fresh_in_dir() -> Iterator[Path]:
    path = run_folder("grader-in-")  # in the run's folder: reaped if the grader dies
    try:
        os.chmod(path, 0o755)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def place(in_dir: Path, name: str, data: dict[str, object]) -> None:
    """A file for a container's harness in its input folder: written whole, then renamed into
    place (the harness acts on its existence), readable by the container's user."""
    tmp = in_dir / f".{name}.part"
    tmp.write_text(json.dumps(data))
    os.chmod(tmp, 0o644)
    os.replace(tmp, in_dir / name)


def write_job(in_dir: Path, job: dict[str, object]) -> None:
    place(in_dir, JOB_FILE, job)


def entry_job(sb: WorkerSetup, cases: list[Case], problem: Problem | None, *, hold: bool = False
              ) -> dict[str, object]:
    """`hold`: its timed loops wait for the host's go (protocol.GO_FILE), after its traced
    calls."""
    job = timing_job(sb, cases, reference=False, hold=hold)
    job.update(device=sb.device, cases=[{"id": c.id} for c in cases if not c.timing])
    job.update(module_job(problem, cases))
    return job


def module_job(problem: Problem | None, cases: list[Case]) -> dict[str, object]:
    """A module problem's constructor arguments and seed per case (timing sets included),
    the same in the reference's job and the entry's."""
    if problem is None or problem.interface != "module":
        return {}
    return {"module": {c.id: {"init": problem.init_kwargs(c.shape), "seed": c.module_seed}
                       for c in cases}}


def entry_args(problem: Problem | None) -> tuple[str, ...]:
    """The harness's arguments after `entry`: a module problem's class names."""
    if problem is None or problem.interface != "module":
        return ()
    return problem.entry_names()


def timing_job(sb: WorkerSetup, cases: list[Case], *, reference: bool, hold: bool = False
               ) -> dict[str, object]:
    """The timed loop's part of a job: input sets per shape and the knobs (none on a CPU);
    `hold`: the loop waits for the host's go."""
    job: dict[str, object] = {"hold": True} if hold else {}
    if sb.timing is not None:
        timing: dict[str, list[str]] = {}
        for c in cases:
            if c.timing:
                timing.setdefault(c.shape.id, []).append(c.id)
        job.update(timing=timing, l2_flush_bytes=sb.timing.l2_flush_bytes,
                   rse_target=sb.timing.rse_target,
                   budget_s=sb.timing.reference_budget_s if reference else sb.timing.budget_s)
    return job


def container_spec(sb: WorkerSetup, image: str, role: Role, binds: list[Bind], limits: Limits,
                   masks: tuple[str, ...] = (), args: tuple[str, ...] = (), gated: bool = False
                   ) -> ContainerSpec:
    """A container of this batch; `gated`: a standby's (run.batch.Standby)."""
    env = {"HOME": "/tmp", "TRITON_CACHE_DIR": "/tmp/triton", "TMPDIR": "/tmp",
           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1", DEVICE_ENV: sb.device,
           "PATH": f"{os.path.dirname(sb.python)}:/usr/local/sbin:/usr/local/bin:/usr/sbin:"
                   "/usr/bin:/sbin:/bin"}
    env.update(sb.extra_env)
    if sb.device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    if gated:
        env[STANDBY_ENV] = "1"
    # An entry's harness runs under the warden, whose frames are the container's stdout.
    channel = role == Role.ENTRY
    if channel:
        env[LOG_BYTES_ENV] = str(limits.log_bytes)
    return ContainerSpec(image=image, command=[sb.python, "-I", BOOT, str(role), *args],
                         role=role, session=sb.session, env=env,
                         binds=(*sb.extra_binds, *binds), masks=masks, limits=limits, gpu=sb.gpu,
                         stdout_bytes=STDOUT_BYTES if channel else 0)


def reference_job(sb: WorkerSetup, cases: list[Case], problem: Problem | None, *,
                  hold: bool = False) -> dict[str, object]:
    """`hold`: its timed loop waits for the host's go (protocol.GO_FILE), after its cases."""
    job = timing_job(sb, cases, reference=True, hold=hold)
    job.update(device=sb.device, cases=[
        {"id": c.id, "params": c.shape.params, "seed": c.seed} for c in cases])
    job.update(module_job(problem, cases))
    return job


def io_binds(in_dir: Path, out_dir: Path) -> list[Bind]:
    return [Bind(host=str(in_dir), container=IN),
            Bind(host=str(out_dir), container=OUT, read_only=False)]


def entry_spec(sb: WorkerSetup, image: str, in_dir: Path, out_dir: Path, limits: Limits,
               problem: Problem | None, gated: bool = False) -> ContainerSpec:
    """`in_dir`: from entry_in, with the kernel file in its CODE folder."""
    binds = [Bind(host=str(in_dir / CODE), container=ENTRY), *io_binds(in_dir, out_dir)]
    return container_spec(sb, image, Role.ENTRY, binds, limits, masks=(PROBLEM,),
                          args=entry_args(problem), gated=gated)


CODE = ".code"  # in the entry's input folder: its kernel file, bound at protocol.ENTRY
SLACK = 1 << 20  # the input folder's room beyond its files: the job, start and go files


@contextmanager
def entry_in(kernel_file: Path) -> Iterator[Path]:
    """The entry's input folder: a tmpfs of its own (capped.private_dir), holding a copy of
    its kernel file (in CODE) and, once it is imported, its inputs (deliver). Bound as a
    whole, it shows the entry no host path in /proc/self/mountinfo, and its fill level is
    that of its own files (issue 19: inside the reference's tmpfs, statvfs showed the
    reference's outputs, and the kernel file's bind showed its host path)."""
    size = kernel_file.stat().st_size
    with private_dir(size + SLACK) as path:
        code = path / CODE
        code.mkdir(mode=0o755)
        shutil.copyfile(kernel_file, code / KERNEL_FILE)
        os.chmod(code / KERNEL_FILE, 0o644)
        yield path


def deliver(sb: WorkerSetup, cases: list[Case], problem: Problem | None, ref_out: Path,
            in_dir: Path, *, hold: bool = False) -> None:
    """The entry's inputs and job (entry_job), placed once it has been imported: copied from
    the reference's folder into the entry's own tmpfs, grown to hold them first."""
    sources = [ref_out / case_file(c.id, INPUTS) for c in cases]
    sources = [src for src in sources if src.is_file()]
    held = sum(f.stat().st_size for f in (in_dir / CODE).iterdir())
    resize(in_dir, held + sum(src.stat().st_size for src in sources) + SLACK)
    for src in sources:
        dst = in_dir / src.name
        tensors.copy_file(src, dst)
        os.chmod(dst, 0o644)
    write_job(in_dir, entry_job(sb, cases, problem, hold=hold))
