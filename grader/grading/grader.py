"""`grader run`: one bundle, one suite, every problem; a verdict for each, a report for all."""

from __future__ import annotations

import contextlib
import hashlib
import secrets
import tempfile
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from grader import __version__
from grader.detect.detector import Detector
from grader.errors import ExposedHostPath, InfraError, UsageError
from grader.grading.checkpoint import Checkpoint, Finished, RunKey, host_fs
from grader.grading.config import GradingOptions
from grader.grading.prepare import Preparation, PreparedBatch, prepare_all
from grader.grading.progress import Progress
from grader.grading.selection import shapes_graded
from grader.grading.settings import GradingSettings
from grader.grading.worker import GradingContext, References, Worker
from grader.intake.bundle import Submission, open_bundle
from grader.model.results import (
    Environment,
    ProblemResult,
    Report,
    ShapesGraded,
    SubmissionSummary,
    SuiteSummary,
    Summary,
)
from grader.run.jobs import TimingKnobs, WorkerSetup
from grader.sandbox.engine import ContainerEngine
from grader.sandbox.gpus import gpu_mode, gpu_nodes
from grader.sandbox.runs import owned_run, reap_dead
from grader.sandbox.runtimes import runtime_for
from grader.sandbox.spec import GpuAccess
from grader.scoring.apply import profile_for_device, score_report
from grader.scoring.hardware import load_hardware
from grader.suite.load import Suite, SuiteProblem, check_problems, find_suite
from grader.verdicts import Verdict

__all__ = [
    "Grader",
    "summarize",
    "worker_setup",
]

TMP_HINT = "free space in the temporary folder ($TMPDIR), then run again"


def summarize(problems: list[ProblemResult],
              graded: tuple[ShapesGraded, int] = ("all", 0)) -> Summary:
    """The report's summary of `problems`, `graded` saying which shapes were (Summary)."""
    shapes = [s for p in problems for s in p.shapes]
    counts = {v: sum(1 for s in shapes if s.verdict == v) for v in Verdict}
    n = len(shapes)
    correct = counts[Verdict.PASSED] + counts[Verdict.FALLBACK]
    passed = counts[Verdict.PASSED]
    return Summary(problems=len(problems), shapes=n,
                   verdicts={v: c for v, c in counts.items() if c},
                   correct_shapes=correct, passed_shapes=passed,
                   correctness_rate=correct / n if n else 0.0,
                   dsl_adoption_rate=passed / n if n else 0.0,
                   illusion_gap=(correct - passed) / n if n else 0.0,
                   shapes_graded=graded[0], ungraded_shapes=graded[1])


def worker_setup(cfg: GradingOptions, engine: ContainerEngine, session: str, gpu_index: int = 0
                 ) -> WorkerSetup:
    """What every container of one worker shares: interpreter, GPU, host binds, timing (the
    interpreter, binds and environment are the runtime's: sandbox/runtimes.py)."""
    runtime = runtime_for(cfg.runtime_config)
    if cfg.settings.device == "cpu":
        side = runtime.container(None)
        return WorkerSetup(engine=engine, session=session, python=side.python, device="cpu",
                           extra_binds=side.binds, extra_env=side.env)
    mode, nodes = gpu_mode(engine.info())
    if mode == "none":
        raise UsageError("--device cuda, but no NVIDIA GPU is visible on this host",
                         hint="`grader doctor` says what it found")
    if f"/dev/nvidia{gpu_index}" not in nodes:
        raise UsageError(f"GPU {gpu_index} is not on this host", hint=f"found {nodes}")
    gpu = GpuAccess(mode=mode, index=gpu_index, device_nodes=tuple(gpu_nodes(nodes, gpu_index)))
    side = runtime.container(gpu)
    return WorkerSetup(engine=engine, session=session, python=side.python, device="cuda",
                       gpu=gpu, extra_binds=side.binds, extra_env=side.env,
                       timing=TimingKnobs())


def check_host_binds(cfg: GradingOptions, suite: Suite, checkpoint: Checkpoint) -> None:
    """Refuse to start when a bind of the runtime would show the entry what it must not see
    (issue 18, --runtime host: with a copy of the suites under /opt, an entry printed a hidden
    table)."""
    runtime = runtime_for(cfg.runtime_config)
    protected = [("the suite", suite.directory, True),
                 *(("the suites folder", root, True) for root in cfg.suite_roots),
                 ("the output folder", cfg.out_dir, False),
                 ("the checkpoint", checkpoint.dir, True),
                 ("the seed secret's file", checkpoint.secret_file, True),
                 # Inputs and the reference's expected outputs pass through folders made here.
                 ("the temporary folder", Path(tempfile.gettempdir()), False)]
    found = runtime.exposures(protected, gpu=cfg.settings.device == "cuda")
    if found:
        raise ExposedHostPath(
            f"--runtime {runtime.name} would let the entry read what it must not:\n    "
            + "\n    ".join(found),
            hint="keep suites, reports and $TMPDIR outside the interpreter's install and "
            "library folders (`grader doctor` lists them), or grade with another --python")


class Grader:
    def __init__(self, cfg: GradingOptions, engine: ContainerEngine, detector: Detector,
                 progress: Progress) -> None:
        self.cfg = cfg
        self.runtime = runtime_for(cfg.runtime_config)
        self.engine = engine
        self.detector = detector
        self.progress = progress
        self.secret = cfg.secret or secrets.token_bytes(32)
        self.session = uuid.uuid4().hex[:12]
        self.images: dict[str, str] = {}
        self.device_name: str | None = None
        self.checkpoint = Checkpoint(cfg.out_dir)
        self.abort: InfraError | None = None  # set when the checkpoint cannot be written
        # A round's references, computed once and reused by every entry (grader/round/).
        self.references: References | None = None

    def hardware_name(self) -> str:
        """The configured profile, or on a GPU the one matching the device's name."""
        settings = self.cfg.settings
        if settings.hardware != "auto":
            return settings.hardware
        if settings.device == "cpu":
            return "cpu-interpreter"
        found = profile_for_device(self.device_name or "")
        if found is None:
            raise UsageError(f"no hardware profile matches {self.device_name!r}",
                             hint="name one with --hardware (grader hardware list)")
        return found

    def workers(self) -> list[WorkerSetup]:
        """One sandbox per worker: per GPU on --device cuda (one entry per GPU at a time), else
        --jobs of them on the CPU. Each worker has its own engine client (threads)."""
        slots = self.cfg.scheduling.slots(self.cfg.settings.device)
        return [worker_setup(self.cfg, self.engine if i == 0 else self.engine.clone(),
                             self.session, gpu_index=slot) for i, slot in enumerate(slots)]

    def open_checkpoint(self, suite: Suite, bundle_sha256: str) -> dict[str, Finished]:
        """Start this run's checkpoint, or with --resume check and load it (and its secret)."""
        cfg = self.cfg
        key = RunKey(grader_version=__version__, bundle_sha256=bundle_sha256, suite=suite.id,
                     suite_version=suite.info.version, settings=self.settings_for(suite))
        if not cfg.resume:
            self.checkpoint.start(key, self.secret)
            return {}
        self.secret, done = self.checkpoint.resume(key, cfg.secret)
        for d in done.values():
            if d.image_id:
                self.images[d.result.id] = d.image_id
            self.device_name = self.device_name or d.device_name
        return done

    def grade_all(self, suite: Suite, todo: list[SuiteProblem], sub: Submission,
                  runtime_tag: str, done: dict[str, Finished] | None = None
                  ) -> list[ProblemResult]:
        """Grade problems concurrently, one worker per sandbox (worker.Worker), each taking
        the next problem in suite order when it needs one; results in suite order.

        Problems in `done` (from the checkpoint) are taken as they are; each one graded here is
        checkpointed as soon as it finishes. When the checkpoint cannot be written (a full
        disk), no further problem starts and the run ends with that InfraError.
        """
        done = done or {}
        results: dict[str, ProblemResult] = {}
        for sp in todo:
            if sp.id in done:
                self.progress(f"{sp.id}: done ({done[sp.id].result.verdict}, "
                              "from the checkpoint)")
                results[sp.id] = done[sp.id].result
        waiting = deque(b for b in todo if b.id not in done)
        lock = threading.Lock()
        kept = [len(done)]

        def claim() -> SuiteProblem | None:
            with lock:
                return waiting.popleft() if waiting and self.abort is None else None

        def finished(fin: Finished) -> bool:
            with lock:
                results[fin.result.id] = fin.result
                if fin.image_id is not None:
                    self.images[fin.result.id] = fin.image_id
                self.device_name = self.device_name or fin.device_name
                try:
                    self.checkpoint.save(replace(fin, device_name=self.device_name))
                    kept[0] += 1
                except InfraError as exc:
                    self.abort = self.abort or exc
                return self.abort is None

        setups = self.workers()
        cfg = self.cfg
        depth = cfg.scheduling.ahead(len(setups))
        ctx = GradingContext(settings=self.settings_for(suite), narrowing=cfg.narrowing,
                             scheduling=cfg.scheduling, entry_limits=cfg.entry_limits,
                             reference_limits=cfg.reference_limits, detector=self.detector,
                             progress=self.progress, secret=self.secret,
                             references=self.references)
        beside = cfg.scheduling.beside(len(setups))
        workers = [Worker(ctx, setup, suite, sub, runtime_tag, depth=depth, beside=beside)
                   for setup in setups]
        with ThreadPoolExecutor(max_workers=len(workers)) as pool:
            for _ in pool.map(lambda w: w.grade(claim, finished), workers):
                pass
        if self.abort is not None:
            raise InfraError(f"{self.abort.message}; stopped, {kept[0]} of {len(todo)} "
                             f"problem(s) are kept in {self.checkpoint.dir}",
                             hint=self.abort.hint)
        return [results[b.id] for b in todo if b.id in results]

    def open_and_grade(self) -> Report:
        """Grade `cfg.bundle` whole: its work folder, the bundle opened, every problem."""
        with self.workspace() as work:
            return self.grade(*self.open(work))

    @contextlib.contextmanager
    def workspace(self, *, bundle: bool = True) -> Iterator[Path]:
        """This run's work folder for the block; on the way out, its containers and folders
        removed. `grader run` opens the bundle in it once (`open`), checks what it must
        before grading, then grades that opened submission (issue 33: the bundle was opened
        and hashed three times). `bundle`: the run grades one, which must be there."""
        if bundle and not self.cfg.bundle.is_file():
            raise UsageError(f"{self.cfg.bundle}: no such file")
        # Everything of this run on the host lives in its own folder, recorded with this
        # process's pid; what runs that died left is removed first (sandbox/runs.py).
        owned = contextlib.ExitStack()
        with host_fs("cannot make a work folder", hint=TMP_HINT):
            self.reap_dead()
            try:
                work = owned.enter_context(owned_run(self.session)) / "work"
                work.mkdir()
            except BaseException:
                owned.close()
                raise
        try:
            yield work
        finally:
            self.reap()
            owned.close()  # the run's folders, and any mount left in them

    def open(self, work: Path) -> tuple[Submission, Suite]:
        """The bundle, opened and hashed into `work`, and the suite it names, which must have
        every --problem."""
        with host_fs("cannot unpack the bundle", hint=TMP_HINT):
            sub = open_bundle(self.cfg.bundle, work / "submission")
        suite = find_suite(sub.manifest.submission.suite, list(self.cfg.suite_roots))
        check_problems(suite, self.cfg.settings.problems)
        return sub, suite

    def grade(self, sub: Submission, suite: Suite) -> Report:
        """Every problem of `suite` that the options pick, graded on `sub`; the scored report."""
        cfg = self.cfg
        settings = cfg.settings
        check_host_binds(cfg, suite, self.checkpoint)
        done = self.open_checkpoint(suite, sub.sha256)
        self.progress("runtime image")
        runtime = self.runtime.ensure_image(self.engine)
        self.images["runtime"] = runtime.id
        todo = self.todo(suite)
        t0 = time.monotonic()
        problems = self.grade_all(suite, todo, sub, runtime.tag, done)
        wall = time.monotonic() - t0
        extra = sorted(set(sub.manifest.problems) - set(suite.problems))
        if extra:
            self.progress(f"ignored kernels for problems not in the suite: {extra}")
        report = Report(
            created_at=datetime.now(UTC),
            submission=SubmissionSummary(
                name=sub.manifest.submission.name, suite=suite.id,
                dsl=sub.manifest.submission.dsl, agent=sub.manifest.submission.agent,
                bundle_sha256=sub.sha256),
            suite=SuiteSummary(id=suite.id, version=suite.info.version,
                               weights_version=suite.weights.version),
            environment=Environment(
                grader_version=__version__, hardware=self.hardware_name(),
                device="cpu (Triton interpreter)" if settings.device == "cpu"
                else f"{settings.device}: {self.device_name or 'unknown GPU'}",
                is_performance=settings.device != "cpu", policy=settings.policy,
                images=dict(self.images),
                seed_commitment=hashlib.sha256(self.secret).hexdigest(),
                docker=self.docker_version()),
            problems=problems,
            summary=summarize(problems, shapes_graded(todo, settings, cfg.narrowing)),
            wall_s=wall,
        )
        report = score_report(report, suite, load_hardware(self.hardware_name()))
        graded = (report.summary.shapes_graded, report.summary.ungraded_shapes)
        return report.model_copy(update={"summary": summarize(report.problems, graded)})

    def todo(self, suite: Suite) -> list[SuiteProblem]:
        """The problems of `suite` that the options pick (--problem, -k, --last-failed)."""
        settings, narrowing = self.cfg.settings, self.cfg.narrowing
        return [b for pid, b in suite.problems.items()
                if (not settings.problems or pid in settings.problems)
                and narrowing.picks_any(pid, [s.id for s in b.problem.shapes])]

    def prepare(self, suite: Suite, store: References) -> list[PreparedBatch]:
        """A round's references (`store`), computed before its entries for every problem the
        options pick, on every worker's sandbox (grading/prepare.py); what became of each
        batch. The secret is the round's (cfg.secret)."""
        cfg = self.cfg
        check_host_binds(cfg, suite, self.checkpoint)
        with self.workspace(bundle=False):
            self.progress("runtime image")
            runtime = self.runtime.ensure_image(self.engine)
            prep = Preparation(suite=suite, settings=self.settings_for(suite),
                               narrowing=cfg.narrowing, reference_limits=cfg.reference_limits,
                               batch_bytes=cfg.scheduling.batch_bytes, secret=self.secret,
                               runtime_tag=runtime.tag, store=store, progress=self.progress)
            return prepare_all(prep, self.workers(), self.todo(suite))

    def settings_for(self, suite: Suite) -> GradingSettings:
        """The settings as this run applies them to `suite` (its seeds per shape unless
        --seeds): what its checkpoint is keyed on and its workers grade under."""
        return self.cfg.settings.for_suite(suite.info.seeds_per_shape)

    def docker_version(self) -> str:
        try:
            return self.engine.version()
        except InfraError:
            return "unknown (the engine did not answer)"

    def reap_dead(self) -> None:
        """Remove what graders that died left (containers, mounts, folders); an engine that
        does not answer must not stop this run (the next start tries again)."""
        try:
            found = reap_dead(self.engine.reap)
        except OSError as exc:
            self.progress(f"cannot remove what earlier runs left: {exc}")
            return
        if found.runs:
            self.progress(f"removed what earlier runs left: {found}")

    def reap(self) -> None:
        """Remove this run's containers; an engine that does not answer must not hide the
        run's own outcome (`grader images prune` removes leftovers later)."""
        try:
            self.engine.reap(self.session)
        except InfraError as exc:
            self.progress(f"cannot remove this run's containers: {exc.message}")
