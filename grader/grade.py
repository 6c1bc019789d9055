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
from datetime import UTC, datetime
from pathlib import Path

from grader import __version__
from grader.config import RunConfig
from grader.detection import Detector
from grader.doctor import gpu_mode, gpu_nodes
from grader.errors import InfraError, UsageError
from grader.formats.problem import Shape
from grader.imaging import HOST_BINDS, ensure, ensure_runtime, problem_plan
from grader.intake import Submission, open_bundle
from grader.judge import judge_problem, tail, whole_problem
from grader.problem_run import Case, Sandbox, TimingKnobs, run_entry, run_reference
from grader.report.model import (
    Environment,
    ProblemResult,
    Report,
    SubmissionSummary,
    SuiteSummary,
    Summary,
)
from grader.sandbox.docker_engine import DockerEngine
from grader.sandbox.spec import Bind, GpuAccess
from grader.scoring.apply import profile_for_device, score_report
from grader.scoring.hardware import load_hardware
from grader.suite import ProblemBundle, Suite, find_suite
from grader.verdicts import Verdict, worst

Progress = Callable[[str], None]


def derive_seed(secret: bytes, problem: str, shape: str, k: int) -> int:
    """A per-case seed from the run's secret: unpredictable to entries, reproducible to us."""
    digest = hmac.new(secret, f"{problem}/{shape}/{k}".encode(), hashlib.sha256).digest()
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

    def grade_problem(self, suite: Suite, bundle: ProblemBundle, sub: Submission,
                      runtime_tag: str, sandbox: Sandbox) -> ProblemResult:
        shapes = select_shapes(bundle, self.cfg)
        base = {"id": bundle.id, "operator": bundle.problem.operator}
        kernel = sub.kernel_path(bundle.id)
        if kernel is None:
            rs = whole_problem(shapes, Verdict.MISSING, "no kernel in the submission")
            return ProblemResult(**base, verdict=Verdict.MISSING, shapes=rs)
        rel = sub.manifest.problems[bundle.id].file
        source = kernel.read_text(encoding="utf-8", errors="replace")
        static = self.detector.static(source, rel)
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
        limits = self.cfg.entry_limits
        self.progress(f"{bundle.id}: reference ({len(cases)} cases)")
        with run_reference(sandbox, image.tag, cases, self.cfg.reference_limits) as (ref, ref_dir):
            failed = [c.id for c in cases if not (ref.out.result and ref.out.result.cases.get(
                c.id) and ref.out.result.cases[c.id].ok)]
            if ref.exit.timed_out or ref.out.result is None or failed:
                errs = [r.error for r in (ref.out.result.cases.values() if ref.out.result else [])
                        if r.error]
                detail = "the reference run failed" + (f" on {failed}" if failed else "")
                rs = whole_problem(shapes, Verdict.INFRA_ERROR, detail,
                                   tail(errs[0] if errs else ref.exit.logs))
                return ProblemResult(**base, verdict=Verdict.INFRA_ERROR, shapes=rs,
                                     findings=static, kernel_file=rel, image=image.tag)
            phases["reference"] = ref.exit.wall_s
            self.device_name = self.device_name or ref.out.result.device_name
            self.progress(f"{bundle.id}: entry")
            with run_entry(sandbox, image.tag, kernel, cases, ref_dir, limits) as entry:
                phases["entry"] = entry.exit.wall_s
                if entry.out.ready and entry.out.ready.import_s is not None:
                    phases["entry_import"] = entry.out.ready.import_s
                results = judge_problem(problem=bundle.problem, shapes=shapes, cases=cases,
                                        reference=ref, entry=entry, static=static,
                                        own_kernels=self.detector.own_kernels(source),
                                        tracer=self.detector,
                                        max_output_bytes=limits.output_bytes)
        verdict = worst([r.verdict for r in results])
        self.progress(f"{bundle.id}: done ({verdict})")
        return ProblemResult(**base, verdict=verdict, shapes=results, findings=static,
                             kernel_file=rel, image=image.tag, wall_s=time.monotonic() - t0,
                             detail=verdict.message, stderr_excerpt=tail(entry.exit.logs),
                             phases_s=phases)

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

    def grade_all(self, suite: Suite, todo: list[ProblemBundle], sub: Submission,
                  runtime_tag: str) -> list[ProblemResult]:
        """Grade problems concurrently, a worker each at a time; results in suite order."""
        free: queue.Queue[Sandbox] = queue.Queue()
        for sb in self.workers():
            free.put(sb)

        def one(bundle: ProblemBundle) -> ProblemResult:
            sandbox = free.get()
            try:
                return self.grade_problem(suite, bundle, sub, runtime_tag, sandbox)
            except Exception as exc:
                # One problem's failure of the grader's own machinery (or a grader bug) is an
                # infra_error for that problem; the others are still graded.
                detail = exc.message if isinstance(exc, InfraError) else \
                    f"grader bug: {type(exc).__name__}: {exc}"
                rs = whole_problem(select_shapes(bundle, self.cfg), Verdict.INFRA_ERROR, detail,
                                   tail("".join(traceback.format_exception(exc))))
                return ProblemResult(id=bundle.id, operator=bundle.problem.operator,
                                     verdict=Verdict.INFRA_ERROR, shapes=rs, detail=detail)
            finally:
                free.put(sandbox)

        with ThreadPoolExecutor(max_workers=free.qsize()) as pool:
            return list(pool.map(one, todo))

    def run(self) -> Report:
        cfg = self.cfg
        if not cfg.bundle.is_file():
            raise UsageError(f"{cfg.bundle}: no such file")
        work = Path(tempfile.mkdtemp(prefix="grader-run-"))
        try:
            sub = open_bundle(cfg.bundle, work / "submission")
            suite = find_suite(sub.manifest.submission.suite, list(cfg.suite_roots))
            unknown = sorted(set(cfg.problems) - set(suite.problems))
            if unknown:
                raise UsageError(f"--problem {unknown[0]!r} is not in suite {suite.id}")
            self.progress("runtime image")
            runtime = ensure_runtime(self.engine, cfg.runtime)
            self.images["runtime"] = runtime.id
            todo = [b for pid, b in suite.problems.items()
                    if not cfg.problems or pid in cfg.problems]
            problems = self.grade_all(suite, todo, sub, runtime.tag)
            extra = sorted(set(sub.manifest.problems) - set(suite.problems))
            if extra:
                self.progress(f"ignored kernels for problems not in the suite: {extra}")
            report = Report(
                created_at=datetime.now(UTC),
                submission=SubmissionSummary(
                    name=sub.manifest.submission.name, suite=suite.id,
                    dsl=sub.manifest.submission.dsl, agent=sub.manifest.submission.agent,
                    bundle_sha256=hashlib.sha256(cfg.bundle.read_bytes()).hexdigest()),
                suite=SuiteSummary(id=suite.id, version=suite.info.version,
                                   weights_version=suite.weights.version),
                environment=Environment(
                    grader_version=__version__, hardware=self.hardware_name(),
                    device="cpu (Triton interpreter)" if cfg.device == "cpu"
                    else f"{cfg.device}: {self.device_name or 'unknown GPU'}",
                    is_performance=cfg.device != "cpu", policy=cfg.policy,
                    images=dict(self.images),
                    seed_commitment=hashlib.sha256(self.secret).hexdigest(),
                    docker=self.engine.version()),
                problems=problems,
                summary=summarize(problems),
            )
            report = score_report(report, suite, load_hardware(self.hardware_name()))
            return report.model_copy(update={"summary": summarize(report.problems)})
        finally:
            self.engine.reap(self.session)
            shutil.rmtree(work, ignore_errors=True)
