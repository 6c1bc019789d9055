"""`grader run`: one bundle, one suite, every problem; a verdict for each, a report for all."""

from __future__ import annotations

import hashlib
import hmac
import queue
import secrets
import shutil
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import psutil

from grader import __version__, batching
from grader.checkpoint import Checkpoint, Finished, RunKey, host_fs
from grader.config import RunConfig
from grader.detect.findings import Finding
from grader.detection import Detector
from grader.doctor import gpu_mode, gpu_nodes
from grader.errors import InfraError, UsageError
from grader.formats.problem import Shape
from grader.imaging import HOST_BINDS, ensure, ensure_runtime, problem_plan
from grader.intake import Submission, open_bundle
from grader.judge import judge_problem, reference_failure, tail, whole_problem
from grader.phases import add, harness_phases
from grader.problem_run import (
    Case,
    ContainerRun,
    Sandbox,
    TimingKnobs,
    run_entry,
    run_pair,
    run_reference,
)
from grader.report.model import (
    Environment,
    ProblemResult,
    Report,
    ShapeResult,
    SubmissionSummary,
    SuiteSummary,
    Summary,
)
from grader.sandbox.docker_engine import DockerEngine
from grader.sandbox.spec import Bind, GpuAccess, Limits
from grader.scoring.apply import profile_for_device, score_report
from grader.scoring.hardware import load_hardware
from grader.suite import ProblemBundle, Suite, find_suite
from grader.verdicts import Verdict, worst

Progress = Callable[[str], None]


def _unusable(ref: ContainerRun, shapes: list[Shape], cases: list[Case]
              ) -> tuple[list[ShapeResult], str] | None:
    """A batch's results when its reference run cannot be used (every shape infra_error), with
    the logs to excerpt; None when it can."""
    failure = reference_failure(ref, cases)
    if failure is None:
        return None
    return whole_problem(shapes, Verdict.INFRA_ERROR, *failure), ref.exit.logs


def derive_seed(secret: bytes, problem: str, shape: str, k: int) -> int:
    """A per-case seed from the run's secret: unpredictable to entries, reproducible to us."""
    digest = hmac.new(secret, f"{problem}/{shape}/{k}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") & 0x7FFF_FFFF


def derive_module_seed(secret: bytes, case_seed: int) -> int:
    """The seed a module problem's class is built under in both containers: from the case's
    seed, keyed by the secret, so that an entry learns nothing of its input seed from it."""
    digest = hmac.new(secret, f"module/{case_seed}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") & 0x7FFF_FFFF


def select_shapes(bundle: ProblemBundle, cfg: RunConfig) -> list[Shape]:
    shapes = bundle.problem.shapes
    selection = cfg.shapes
    if selection == "auto":
        selection = "smoke" if cfg.device == "cpu" else "all"
    if selection == "smoke":
        return [s for s in shapes if s.smoke]
    if selection == "scored":
        return [s for s in shapes if not s.smoke]
    return list(shapes)


def summarize(problems: list[ProblemResult]) -> Summary:
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
                   illusion_gap=(correct - passed) / n if n else 0.0)


def make_sandbox(cfg: RunConfig, engine: DockerEngine, session: str, gpu_index: int = 0
                 ) -> Sandbox:
    """What every container of one worker shares: interpreter, GPU, host binds, timing."""
    kind = cfg.runtime.kind
    python = {"cpu": "/opt/venv/bin/python3", "cuda": cfg.runtime.python,
              "host": cfg.runtime.python}[kind]
    binds = tuple(Bind(host=p, container=p) for p in HOST_BINDS) if kind == "host" else ()
    if cfg.device == "cpu":
        return Sandbox(engine=engine, session=session, python=python, device="cpu",
                       extra_binds=binds)
    mode, nodes = gpu_mode(engine.info())
    if mode == "none":
        raise UsageError("--device cuda, but no NVIDIA GPU is visible on this host",
                         hint="`grader doctor` says what it found")
    if f"/dev/nvidia{gpu_index}" not in nodes:
        raise UsageError(f"GPU {gpu_index} is not on this host", hint=f"found {nodes}")
    gpu = GpuAccess(mode=mode, index=gpu_index, device_nodes=tuple(gpu_nodes(nodes, gpu_index)))
    return Sandbox(engine=engine, session=session, python=python, device="cuda", gpu=gpu,
                   extra_binds=binds, timing=TimingKnobs())


class Grader:
    def __init__(self, cfg: RunConfig, engine: DockerEngine, detector: Detector,
                 progress: Progress) -> None:
        self.cfg = cfg
        self.engine = engine
        self.detector = detector
        self.progress = progress
        self.secret = cfg.seed_secret or secrets.token_bytes(32)
        self.session = uuid.uuid4().hex[:12]
        self.images: dict[str, str] = {}
        self.device_name: str | None = None
        self.checkpoint = Checkpoint(cfg.out_dir)
        self.abort: InfraError | None = None  # set when the checkpoint cannot be written

    def grade_problem(self, suite: Suite, bundle: ProblemBundle, sub: Submission,
                      runtime_tag: str, sandbox: Sandbox) -> ProblemResult:
        shapes = select_shapes(bundle, self.cfg)
        base = ProblemResult(id=bundle.id, operator=bundle.problem.operator,
                             verdict=Verdict.MISSING)
        kernel = sub.kernel_path(bundle.id)
        if kernel is None:
            rs = whole_problem(shapes, Verdict.MISSING, "no kernel in the submission")
            return base.model_copy(update={"shapes": rs})
        rel = sub.manifest.problems[bundle.id].file
        source = kernel.read_text(encoding="utf-8", errors="replace")
        static = self.detector.static(source, rel, bundle.problem.entry_names())
        t0 = time.monotonic()
        self.progress(f"{bundle.id}: image")
        image = ensure(self.engine, problem_plan(runtime_tag, suite.id, bundle))
        phases = {"image": time.monotonic() - t0}
        self.images[bundle.id] = image.id
        n_seeds = self.cfg.seeds_per_shape or suite.info.seeds_per_shape
        cases = [Case(id=f"{s.id}.{k}", shape=s, seed=derive_seed(self.secret, bundle.id, s.id, k))
                 for s in shapes for k in range(n_seeds)]
        if sandbox.timing is not None:  # distinct input sets for the timed loop, checked too
            cases += [Case(id=f"{s.id}.t{k}", shape=s, timing=True,
                           seed=derive_seed(self.secret, bundle.id, s.id, 1000 + k))
                      for s in shapes for k in range(sandbox.timing.sets_per_shape)]
        if bundle.problem.interface == "module":
            cases = [replace(c, module_seed=derive_module_seed(self.secret, c.seed))
                     for c in cases]
        per_shape = {s.id: sum(1 for c in cases if c.shape.id == s.id) for s in shapes}
        parts = batching.batches(bundle.problem, shapes, per_shape, self.cfg.batch_bytes)
        results: list[ShapeResult] = []
        logs = ""
        for k, part in enumerate(parts):
            ids = {s.id for s in part}
            label = bundle.id if len(parts) == 1 else f"{bundle.id} [{k + 1}/{len(parts)}]"
            got, logs = self.grade_batch(bundle, label, image.tag, kernel, part,
                                         [c for c in cases if c.shape.id in ids], per_shape,
                                         static, source, phases, sandbox)
            results += got
        verdict = worst([r.verdict for r in results])
        self.progress(f"{bundle.id}: done ({verdict})")
        return base.model_copy(update={
            "verdict": verdict, "shapes": results, "findings": static, "kernel_file": rel,
            "image": image.tag, "wall_s": time.monotonic() - t0, "detail": verdict.message,
            "stderr_excerpt": tail(logs), "phases_s": phases})

    def grade_batch(self, bundle: ProblemBundle, label: str, image: str, kernel: Path,
                    shapes: list[Shape], cases: list[Case], per_shape: dict[str, int],
                    static: list[Finding], source: str, phases: dict[str, float],
                    sandbox: Sandbox) -> tuple[list[ShapeResult], str]:
        """The reference and the entry on one batch of a problem's shapes (batching.py): side
        by side (problem_run.run_pair) when the problem counts its bytes, so that the entry's
        caps are known before the reference has run, else one after the other. Adds to
        `phases`; returns the shapes' results and the logs to excerpt."""
        problem = bundle.problem
        ref_limits = batching.reference_limits(self.cfg.reference_limits, problem, shapes,
                                               per_shape, psutil.virtual_memory().available)
        judge = self._judge_batch(bundle, shapes, cases, static, source, phases)
        if self.cfg.overlap and batching.counted_bytes(problem, shapes, per_shape):
            limits = batching.entry_limits_from_count(self.cfg.entry_limits, problem, shapes,
                                                      per_shape)
            self.progress(f"{label}: reference and entry ({len(cases)} cases)")
            with run_pair(sandbox, image, kernel, cases, ref_limits, limits, problem) as pair:
                if pair.entry is not None:
                    if pair.entry_limits is not limits:
                        self.progress(f"{label}: outputs larger than the problem counts; the "
                                      "entry ran again after the reference, with caps to fit")
                    return (_unusable(pair.reference, shapes, cases)
                            or judge(pair.reference, pair.entry, pair.entry_limits))
            self.progress(f"{label}: the reference failed beside the entry; again, one "
                          "after the other")
        self.progress(f"{label}: reference ({len(cases)} cases)")
        with run_reference(sandbox, image, cases, ref_limits, problem) as (ref, ref_dir):
            if (unusable := _unusable(ref, shapes, cases)) is not None:
                return unusable
            limits = batching.entry_limits(self.cfg.entry_limits, ref_dir, [c.id for c in cases])
            self.progress(f"{label}: entry")
            with run_entry(sandbox, image, kernel, cases, ref_dir, limits, problem) as entry:
                return judge(ref, entry, limits)

    def _judge_batch(self, bundle: ProblemBundle, shapes: list[Shape], cases: list[Case],
                     static: list[Finding], source: str, phases: dict[str, float]
                     ) -> Callable[[ContainerRun, ContainerRun, Limits],
                                   tuple[list[ShapeResult], str]]:
        def judge(ref: ContainerRun, entry: ContainerRun, limits: Limits
                  ) -> tuple[list[ShapeResult], str]:
            assert ref.out.result is not None  # _unusable said so
            self.device_name = self.device_name or ref.out.result.device_name
            ready = entry.out.ready
            add(phases, {"reference": ref.exit.wall_s, "reference_held": ref.exit.held_s,
                          **harness_phases("reference", ref),
                          "entry": entry.exit.wall_s, "entry_held": entry.exit.held_s,
                          **harness_phases("entry", entry),
                          **({"entry_import": ready.import_s}
                             if ready and ready.import_s is not None else {})})
            t0 = time.monotonic()
            results = judge_problem(problem=bundle.problem, shapes=shapes, cases=cases,
                                    reference=ref, entry=entry, static=static,
                                    own_kernels=self.detector.own_kernels(source),
                                    tracer=self.detector, max_output_bytes=limits.output_bytes)
            add(phases, {"judge": time.monotonic() - t0})  # the host's own comparing
            return results, entry.exit.logs

        return judge

    def hardware_name(self) -> str:
        """The configured profile, or on a GPU the one matching the device's name."""
        if self.cfg.hardware != "auto":
            return self.cfg.hardware
        if self.cfg.device == "cpu":
            return "cpu-interpreter"
        found = profile_for_device(self.device_name or "")
        if found is None:
            raise UsageError(f"no hardware profile matches {self.device_name!r}",
                             hint="name one with --hardware (grader hardware list)")
        return found

    def workers(self) -> list[Sandbox]:
        """One sandbox per worker: per GPU on --device cuda (one entry per GPU at a time), else
        --jobs of them on the CPU. Each worker has its own engine client (threads)."""
        slots = self.cfg.gpus if self.cfg.device == "cuda" else tuple(range(self.cfg.jobs))
        return [make_sandbox(self.cfg, self.engine if i == 0 else DockerEngine(), self.session,
                             gpu_index=slot) for i, slot in enumerate(slots)]

    def open_checkpoint(self, suite: Suite, bundle_sha256: str) -> dict[str, Finished]:
        """Start this run's checkpoint, or with --resume check and load it (and its secret)."""
        cfg = self.cfg
        key = RunKey(grader_version=__version__, bundle_sha256=bundle_sha256, suite=suite.id,
                     suite_version=suite.info.version, policy=cfg.policy, device=cfg.device,
                     hardware=cfg.hardware, runtime=cfg.runtime.kind, shapes=cfg.shapes,
                     seeds_per_shape=cfg.seeds_per_shape or suite.info.seeds_per_shape)
        if not cfg.resume:
            self.checkpoint.start(key, self.secret)
            return {}
        self.secret, done = self.checkpoint.resume(key, cfg.seed_secret)
        for d in done.values():
            if d.image_id:
                self.images[d.result.id] = d.image_id
            self.device_name = self.device_name or d.device_name
        return done

    def grade_one(self, suite: Suite, bundle: ProblemBundle, sub: Submission,
                  runtime_tag: str, sandbox: Sandbox) -> ProblemResult:
        """grade_problem, with a failure of the grader's own machinery (or a grader bug) turned
        into an infra_error for that problem, so that the others are still graded."""
        try:
            return self.grade_problem(suite, bundle, sub, runtime_tag, sandbox)
        except Exception as exc:
            if isinstance(exc, InfraError):
                detail = exc.message
            elif isinstance(exc, OSError):  # the host's disk: ENOSPC in $TMPDIR and the like
                where = f" ({exc.filename})" if exc.filename else ""
                detail = f"host filesystem: {exc.strerror or exc}{where}"
            else:
                detail = f"grader bug: {type(exc).__name__}: {exc}"
            self.progress(f"{bundle.id}: done (infra_error: {detail})")
            rs = whole_problem(select_shapes(bundle, self.cfg), Verdict.INFRA_ERROR, detail,
                               tail("".join(traceback.format_exception(exc))))
            return ProblemResult(id=bundle.id, operator=bundle.problem.operator,
                                 verdict=Verdict.INFRA_ERROR, shapes=rs, detail=detail)

    def grade_all(self, suite: Suite, todo: list[ProblemBundle], sub: Submission,
                  runtime_tag: str, done: dict[str, Finished] | None = None
                  ) -> list[ProblemResult]:
        """Grade problems concurrently, a worker each at a time; results in suite order.

        Problems in `done` (from the checkpoint) are taken as they are; each one graded here is
        checkpointed as soon as it finishes. When the checkpoint cannot be written (a full
        disk), no further problem starts and the run ends with that InfraError.
        """
        done = done or {}
        free: queue.Queue[Sandbox] = queue.Queue()
        for sb in self.workers():
            free.put(sb)
        kept = [len(done)]

        def one(bundle: ProblemBundle) -> ProblemResult | None:
            if bundle.id in done:
                self.progress(f"{bundle.id}: done ({done[bundle.id].result.verdict}, "
                              "from the checkpoint)")
                return done[bundle.id].result
            if self.abort is not None:
                return None
            sandbox = free.get()
            try:
                result = self.grade_one(suite, bundle, sub, runtime_tag, sandbox)
            finally:
                free.put(sandbox)
            try:
                self.checkpoint.save(Finished(result=result, image_id=self.images.get(bundle.id),
                                              device_name=self.device_name))
                kept[0] += 1
            except InfraError as exc:
                self.abort = self.abort or exc
            return result

        with ThreadPoolExecutor(max_workers=free.qsize()) as pool:
            results = list(pool.map(one, todo))
        if self.abort is not None:
            raise InfraError(f"{self.abort.message}; stopped, {kept[0]} of {len(todo)} "
                             f"problem(s) are kept in {self.checkpoint.dir}",
                             hint=self.abort.hint)
        return [r for r in results if r is not None]

    def run(self) -> Report:
        cfg = self.cfg
        if not cfg.bundle.is_file():
            raise UsageError(f"{cfg.bundle}: no such file")
        tmp_hint = "free space in the temporary folder ($TMPDIR), then run again"
        with host_fs("cannot make a work folder", hint=tmp_hint):
            work = Path(tempfile.mkdtemp(prefix="grader-run-"))
        try:
            with host_fs("cannot unpack the bundle", hint=tmp_hint):
                sub = open_bundle(cfg.bundle, work / "submission")
                bundle_sha256 = hashlib.sha256(cfg.bundle.read_bytes()).hexdigest()
            suite = find_suite(sub.manifest.submission.suite, list(cfg.suite_roots))
            unknown = sorted(set(cfg.problems) - set(suite.problems))
            if unknown:
                raise UsageError(f"--problem {unknown[0]!r} is not in suite {suite.id}")
            done = self.open_checkpoint(suite, bundle_sha256)
            self.progress("runtime image")
            runtime = ensure_runtime(self.engine, cfg.runtime)
            self.images["runtime"] = runtime.id
            todo = [b for pid, b in suite.problems.items()
                    if not cfg.problems or pid in cfg.problems]
            problems = self.grade_all(suite, todo, sub, runtime.tag, done)
            extra = sorted(set(sub.manifest.problems) - set(suite.problems))
            if extra:
                self.progress(f"ignored kernels for problems not in the suite: {extra}")
            report = Report(
                created_at=datetime.now(UTC),
                submission=SubmissionSummary(
                    name=sub.manifest.submission.name, suite=suite.id,
                    dsl=sub.manifest.submission.dsl, agent=sub.manifest.submission.agent,
                    bundle_sha256=bundle_sha256),
                suite=SuiteSummary(id=suite.id, version=suite.info.version,
                                   weights_version=suite.weights.version),
                environment=Environment(
                    grader_version=__version__, hardware=self.hardware_name(),
                    device="cpu (Triton interpreter)" if cfg.device == "cpu"
                    else f"{cfg.device}: {self.device_name or 'unknown GPU'}",
                    is_performance=cfg.device != "cpu", policy=cfg.policy,
                    images=dict(self.images),
                    seed_commitment=hashlib.sha256(self.secret).hexdigest(),
                    docker=self.docker_version()),
                problems=problems,
                summary=summarize(problems),
            )
            report = score_report(report, suite, load_hardware(self.hardware_name()))
            return report.model_copy(update={"summary": summarize(report.problems)})
        finally:
            self.reap()
            shutil.rmtree(work, ignore_errors=True)

    def docker_version(self) -> str:
        try:
            return self.engine.version()
        except InfraError:
            return "unknown (the engine did not answer)"

    def reap(self) -> None:
        """Remove this run's containers; an engine that does not answer must not hide the
        run's own outcome (`grader images prune` removes leftovers later)."""
        try:
            self.engine.reap(self.session)
        except InfraError as exc:
            self.progress(f"cannot remove this run's containers: {exc.message}")
