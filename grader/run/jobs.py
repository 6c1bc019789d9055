"""What each container of a batch is given: its interpreter, environment and binds (its
spec), its folders, and its job (pair.py, sequential.py, ahead.py and cached.py run them).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from grader.formats.problem import Problem
from grader.harness.protocol import (
    BOOT,
    BUDGET_S,
    DEVICE_ENV,
    ENTRY,
    IN,
    JOB_FILE,
    KERNEL_FILE,
    L2_FLUSH_BYTES,
    LOG_BYTES_ENV,
    MAX_SAMPLES,
    MIN_SAMPLES,
    OUT,
    PROBLEM,
    RECIPE_DIR,
    RECIPE_FILE,
    RSE_TARGET,
    SERVE_MODE,
    STACK_SIGNAL,
    STANDBY_ENV,
    STDOUT_BYTES,
)
from grader.model import timed
from grader.model.runs import Case, computed_first, timed_cases
from grader.run.batch import Batch
from grader.sandbox.capped import private_dir, resize
from grader.sandbox.engine import ContainerEngine
from grader.sandbox.runs import run_folder
from grader.sandbox.spec import Bind, ContainerSpec, GpuAccess, Limits, Role


@dataclass(frozen=True, kw_only=True)
class TimingKnobs:
    # Timed calls per shape: at least min_samples (unless the budget ends the loop first), at
    # most max_samples, each on inputs of its own (model/timed.py plans them).
    min_samples: int = MIN_SAMPLES
    max_samples: int = MAX_SAMPLES
    # The least L2 flush; the harness writes twice the device's own L2 where that is larger.
    l2_flush_bytes: int = L2_FLUSH_BYTES
    rse_target: float = RSE_TARGET
    budget_s: float = BUDGET_S
    # The reference is timed only for the speed-ups (the report's column, the score card's
    # geomean and fast_p), once per round: a shorter budget. Slow references spend it whole:
    # at 1 s a shape, 28.5 s of a first entry of the whole suite on the H200 (2026-12-05),
    # 24.2 s of it attention_prefill's, paged_attention_decode's and fused_moe's; at 0.5 s
    # those loops would have taken 11 s less.
    reference_budget_s: float = 0.5

    @property
    def checked_per_shape(self) -> int:
        return timed.checked_count(self.min_samples, self.max_samples)


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


def entry_job(setup: WorkerSetup, cases: list[Case], problem: Problem | None, *,
              order_key: bytes = b"", hold: bool = False,
              budget_s: float | None = None) -> dict[str, object]:
    """`order_key`: the entry's own (model/timed.py); `hold`: its timed loops wait for the
    host's go (protocol.GO_FILE), after its traced calls; `budget_s`: their budget a shape
    where not the knobs' own (Batch.timing_budget_s)."""
    job = timing_job(setup, cases, order_key=order_key, hold=hold, budget_s=budget_s)
    job.update(device=setup.device, cases=[{"id": c.id, "params": c.shape.params, "seed": c.seed}
                                           for c in cases if not c.timing])
    job.update(module_job(problem, [c for c in cases if not c.timing or _builds(c, cases)]))
    return job


def _builds(case: Case, cases: list[Case]) -> bool:
    """Whether `case` is the first checked case of its shape: the one whose module a timed
    loop builds (every checked case of a shape shares its module seed)."""
    return case is next(c for c in cases if c.timing and c.shape.id == case.shape.id)


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


def timed_plan(knobs: TimingKnobs, checked: list[Case], order_key: bytes) -> timed.TimedPlan:
    return timed.plan([(c.id, c.seed) for c in checked], order_key,
                      min_samples=knobs.min_samples, max_samples=knobs.max_samples)


def timing_job(setup: WorkerSetup, cases: list[Case], *, order_key: bytes | None = None,
               hold: bool = False, budget_s: float | None = None) -> dict[str, object]:
    """The timed loop's part of a job (none on a CPU): per shape its plan, drawn for the
    entry's `order_key` (None: the reference's own loop, on seeds no entry is checked on);
    `hold`: the loop waits for the host's go; `budget_s`: the entry's budget a shape where
    not the knobs' own."""
    job: dict[str, object] = {"hold": True} if hold else {}
    knobs = setup.timing
    if knobs is None:
        return job
    timing: dict[str, dict[str, object]] = {}
    for shape, checked in timed_cases(cases).items():
        spec: dict[str, object] = {"params": checked[0].shape.params, "build": checked[0].id}
        if order_key is None:
            spec["calls"] = [[seed, None] for seed in timed.reference_calls(
                [(c.id, c.seed) for c in checked], knobs.max_samples)]
        else:
            spec.update(timed_plan(knobs, checked, order_key).as_job())
        timing[shape] = spec
    job.update(timing=timing, l2_flush_bytes=knobs.l2_flush_bytes,
               rse_target=knobs.rse_target, min_samples=knobs.min_samples,
               max_samples=knobs.max_samples,
               budget_s=(knobs.reference_budget_s if order_key is None
                         else budget_s if budget_s is not None else knobs.budget_s))
    return job


def container_spec(setup: WorkerSetup, image: str, role: Role, binds: list[Bind], limits: Limits,
                   masks: tuple[str, ...] = (), args: tuple[str, ...] = (), gated: bool = False
                   ) -> ContainerSpec:
    """A container of this batch; `gated`: a standby's (run.ahead.Standby)."""
    env = {"HOME": "/tmp", "TRITON_CACHE_DIR": "/tmp/triton", "TMPDIR": "/tmp",
           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1", DEVICE_ENV: setup.device,
           "PATH": f"{os.path.dirname(setup.python)}:/usr/local/sbin:/usr/local/bin:/usr/sbin:"
                   "/usr/bin:/sbin:/bin"}
    env.update(setup.extra_env)
    if setup.device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    if gated:
        env[STANDBY_ENV] = "1"
    if role == Role.ENTRY:  # no torch.compile trace in the entry's process (harness/record.py)
        env["TORCHDYNAMO_DISABLE"] = "1"
    # An entry's harness runs under the warden, whose frames are the container's stdout.
    channel = role == Role.ENTRY
    if channel:
        env[LOG_BYTES_ENV] = str(limits.log_bytes)
    return ContainerSpec(image=image, command=[setup.python, "-I", BOOT, str(role), *args],
                         role=role, session=setup.session, env=env,
                         binds=(*setup.extra_binds, *binds), masks=masks, limits=limits,
                         gpu=setup.gpu,
                         stdout_bytes=STDOUT_BYTES if channel else 0,
                         stack_signal=STACK_SIGNAL if channel else None)


def reference_job(setup: WorkerSetup, cases: list[Case], problem: Problem | None, *,
                  hold: bool = False, digests: bool = False) -> dict[str, object]:
    """The batch's correctness cases and the checked timed cases it computes first
    (model.runs.computed_first), then its own timed loop (the report's speed-up column).
    `hold`: its timed loop waits for the host's go (protocol.GO_FILE), after its cases;
    `digests`: each case's record carries the sha256 of its inputs (suite check: the entry
    draws its own from the seed, so a recipe must draw the same bits every time)."""
    job = timing_job(setup, cases, hold=hold)
    if digests:
        job["input_digests"] = True
    # Every case's module (a held reference may be given the rest in its GO: run.pair).
    job.update(device=setup.device, cases=case_specs(computed_first(cases)),
               **module_job(problem, cases))
    return job


def topup_job(setup: WorkerSetup, cases: list[Case], problem: Problem | None
              ) -> dict[str, object]:
    """A reference's job on checked timed cases that an entry's loops reached beyond what
    its batch's reference computed (grading.worker's top-up): their samples alone, no timed
    loop."""
    return {"device": setup.device, "cases": case_specs(cases), **module_job(problem, cases)}


def reference_run_job(setup: WorkerSetup, cases: list[Case], problem: Problem | None, *,
                      topup: bool = False, digests: bool = False) -> dict[str, object]:
    """The job of a reference container run on `cases` alone, not beside an entry
    (run.sequential.reference_run, run.ahead.ReferenceStandby): topup_job's with `topup`,
    else reference_job's."""
    return (topup_job(setup, cases, problem) if topup
            else reference_job(setup, cases, problem, digests=digests))


def case_specs(cases: list[Case]) -> list[dict[str, object]]:
    """The reference's cases as its job lists them (a checked timed call's "sampled")."""
    return [{"id": c.id, "params": c.shape.params, "seed": c.seed, "sampled": c.timing}
            for c in cases]


def io_binds(in_dir: Path, out_dir: Path) -> list[Bind]:
    return [Bind(host=str(in_dir), container=IN),
            Bind(host=str(out_dir), container=OUT, read_only=False)]


def entry_spec(setup: WorkerSetup, image: str, in_dir: Path, out_dir: Path, limits: Limits,
               problem: Problem | None, gated: bool = False) -> ContainerSpec:
    """`in_dir`: from entry_in, with the kernel file in its CODE folder."""
    binds = [Bind(host=str(in_dir / CODE), container=ENTRY), *io_binds(in_dir, out_dir)]
    return container_spec(setup, image, Role.ENTRY, binds, limits, masks=(PROBLEM,),
                          args=entry_args(problem), gated=gated)


def served_spec(setup: WorkerSetup, image: str, in_dir: Path, out_dir: Path, limits: Limits,
                *, stdout_bytes: int) -> ContainerSpec:
    """An entry's serving container (run/served.py): an entry container's binds, masks and
    hardening, its warden in serve mode, its stdout sized for every batch it runs."""
    spec = entry_spec(setup, image, in_dir, out_dir, limits, None)
    return replace(spec, command=[setup.python, "-I", BOOT, SERVE_MODE],
                   stdout_bytes=stdout_bytes)


CODE = ".code"  # in the entry's input folder: its kernel file, bound at protocol.ENTRY
SLACK = 1 << 20  # the input folder's room beyond its files and job: start and go files


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


def order_key(kernel_file: Path) -> bytes:
    """The entry's own order of its shapes' seeds (model/timed.py): its kernel file's digest.
    Secret only with the run's seeds, which it is mixed with."""
    return hashlib.sha256(kernel_file.read_bytes()).digest()


def timed_plans(knobs: TimingKnobs | None, cases: list[Case], kernel_file: Path
                ) -> dict[str, timed.TimedPlan]:
    """Each timed shape's plan as the entry with `kernel_file` gets it (for the judge)."""
    if knobs is None:
        return {}
    key = order_key(kernel_file)
    return {shape: timed_plan(knobs, checked, key)
            for shape, checked in timed_cases(cases).items()}


def deliver(setup: WorkerSetup, batch: Batch, ref_out: Path, in_dir: Path, *,
            hold: bool = False) -> None:
    """The entry's job (entry_job) and the problem's public recipe (the reference's
    RECIPE_FILE, unpacked), placed once it has been imported, in its own tmpfs, grown to hold
    them first. Its harness draws every input from the job's seeds with the recipe, where
    its calls run: no input is copied between containers (issue 32)."""
    recipe = ref_out / RECIPE_FILE
    job = entry_job(setup, batch.cases, batch.problem,
                    order_key=order_key(in_dir / CODE / KERNEL_FILE), hold=hold,
                    budget_s=batch.timing_budget_s)
    held = sum(f.stat().st_size for f in (in_dir / CODE).iterdir())
    # The job's own size counted: its timed plans grow with the shapes (max_samples calls each).
    resize(in_dir, held + recipe.stat().st_size + len(json.dumps(job)) + SLACK)
    _unpack_recipe(recipe, in_dir / RECIPE_DIR)
    write_job(in_dir, job)


def _unpack_recipe(tar_path: Path, dest: Path) -> None:
    """The reference's pack of the problem's public files, member by member: regular files
    with plain names only (it comes from the trusted reference; checked all the same)."""
    dest.mkdir(mode=0o755)
    with tarfile.open(tar_path) as tar:
        for member in tar.getmembers():
            name = member.name
            if not member.isfile() or "/" in name or name.startswith(".") or not name:
                continue
            src = tar.extractfile(member)
            assert src is not None  # a regular file's
            with src, open(dest / name, "wb") as out:
                shutil.copyfileobj(src, out)
            os.chmod(dest / name, 0o644)
