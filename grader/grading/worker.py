"""One worker's grading (a GPU, or a CPU slot): its problems one at a time, each in batches of
shapes, and the batches after the running one started beside it.

While a batch runs, the worker starts the containers of the next batches (the same problem's,
or the first ones of the next problems it takes) as standbys (run.ahead.Standby): they make
their cold `import torch` (the entry's, on a GPU, its CUDA and profiler set-up too) and wait at
their gates. The running batch's timed loops wait until those standbys are idle there, so that
a timed loop never shares the host with more than a sleeping poll (unless timed beside them,
`beside`: Scheduling.beside), and no entry code runs before its own batch's turn. The set-up,
a container's largest fixed cost (8-10 s for the entry's on the H200, 2026-12-02), then falls
outside the critical path of every batch but the worker's first. A batch whose reference a
round has computed already starts its entry's container alone (run.ahead.EntryStandby).
Standbys are started `depth` at a time: a batch whose next batch has none starts the next
`depth` batches' at once; timed beside, each batch starts the one `depth` batches after it.

A batch's judging runs on the worker's judging thread (judging.py) while the next batch
starts, a problem's last batch's too (the problem's result is taken once it is done); that
batch's timed loops wait for it as they wait for the standbys, unless timed beside (issue 32). With
--serve, each batch's entry is a worker of the worker's serving container (run/served.py)
instead of a container of its own.
"""

from __future__ import annotations

import contextlib
import itertools
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import psutil

from grader.detect.detector import Detector
from grader.detect.dynamic import is_native
from grader.errors import InfraError
from grader.formats.problem import Shape
from grader.grading.checkpoint import Finished
from grader.grading.config import Scheduling
from grader.grading.judging import Judged, Judging, results
from grader.grading.phases import add, harness_phases
from grader.grading.planned import Claim, Planned
from grader.grading.progress import Progress
from grader.grading.reuse import References, RoundReferences, grade_cached
from grader.grading.seeds import per_shape, problem_cases
from grader.grading.selection import nothing_graded, select_shapes
from grader.grading.settings import GradingSettings, Narrowing
from grader.images import ensure, problem_plan
from grader.intake.bundle import Submission
from grader.judge.problem import judge_problem, reference_failure, tail, whole_problem
from grader.model.findings import Finding
from grader.model.results import ProblemResult, ShapeResult
from grader.model.runs import Case, Evidence, computed, computed_first, reached_uncomputed
from grader.run import plan as batching
from grader.run.ahead import Beside, EntryStandby, Standby
from grader.run.batch import Batch
from grader.run.jobs import TimingKnobs, WorkerSetup, timed_plans
from grader.run.pair import run_pair
from grader.run.sequential import entry_container, reference_container, reference_run
from grader.run.served import Server, Serving
from grader.sandbox.spec import Limits
from grader.suite.load import Suite, SuiteProblem
from grader.verdicts import Verdict, worst


@dataclass(frozen=True, kw_only=True)
class GradingContext:
    """What every worker of a run reads and none writes: of its options only the settings (for
    its suite), narrowing, scheduling and limits (issue 33); the detector, progress, secret, a
    round's references. What a worker learns comes back with its results (Finished)."""

    settings: GradingSettings
    narrowing: Narrowing
    scheduling: Scheduling
    entry_limits: Limits
    reference_limits: Limits
    detector: Detector
    progress: Progress
    secret: bytes
    references: References | None = None


def entry_budget(knobs: TimingKnobs | None, static: list[Finding]) -> float | None:
    """The entry's timed-loop budget a shape where it is not the knobs' own: the reference's
    (0.5 s, not 5) when the problem's static findings already keep every shape from `passed`
    (fallback or worse, whatever runs: judge.problem._decide). Its times then score nothing
    (ScoreOptions.fallback_scores is off) and only fill the report's time and speed-up
    columns, as the reference's own do; an entry that delegates to PyTorch often spends the
    whole 5 s on host-bound calls (Atrex-Bench's references as entries on the H200,
    2026-12-05: 9 of attention_forward's 22 shapes, CV 0.19-0.29)."""
    if knobs is None or is_native(static):
        return None
    return min(knobs.budget_s, knobs.reference_budget_s)


class Worker:
    """Grades problems on one sandbox under `ctx`, taking each next problem from `claim` and
    handing each result, with what it learnt, to `finished`."""

    judging: Judging  # made by each grade(), closed when it returns

    def __init__(self, ctx: GradingContext, setup: WorkerSetup, suite: Suite, sub: Submission,
                 runtime_tag: str, *, depth: int, beside: bool = False) -> None:
        self.ctx, self.setup, self.suite, self.sub = ctx, setup, suite, sub
        # batches whose containers are started ahead at once, or with `beside` how far ahead
        # each batch starts the next one's (0: none)
        self.depth = depth
        # timed loops run beside the standbys' set-up and the judging before them
        # (Scheduling.beside); else they wait for both
        self.beside = beside
        self.runtime_tag = runtime_tag
        self.refs = RoundReferences(ctx.references, suite, setup, ctx.settings.runtime,
                                    ctx.progress)
        self.serving: Serving | None = None  # made by each grade() under --serve
        # Problems taken from the claim ahead of their turn (for their batches' standbys).
        self.queued: deque[Planned | ProblemResult] = deque()

    def grade(self, claim: Claim, finished: Callable[[Finished], bool]) -> None:
        """Grade what `claim` gives until it gives nothing; `finished` takes each result and
        says whether to go on (False: the run stops, the next problem is not graded).

        A problem whose batches have all run is `held`, and finished after the first batch of
        the next problems by which its judging is done (waited for only at the end): its last
        judging runs beside the next batch (whose timed loops wait for it unless `beside`,
        run.ahead.Beside) instead of in front of it. So its checkpoint is written a batch
        later, and a run that stops (a checkpoint that cannot be written) stops after that
        batch."""
        self.judging = Judging()
        self.serving = (Serving(self.setup, self.ctx.entry_limits, beside=self.depth)
                        if self.ctx.scheduling.serve else None)
        held: deque[Planned] = deque()  # graded, in order, their judging maybe still running
        go_on = True

        def release(wait: bool = False) -> bool:
            """Finish the held problems whose judging is done (all of them with `wait`), in
            order, until the run stops."""
            nonlocal go_on
            while go_on and held and (wait or all(j.future.done() for j in held[0].judged)):
                go_on = finished(self._finished(held.popleft()))
            return go_on

        try:
            while go_on:
                cur = self.queued.popleft() if self.queued else self.open(claim())
                if cur is None:
                    break
                if isinstance(cur, ProblemResult):
                    go_on = finished(Finished(result=cur))
                    continue
                failure = self._grade(cur, claim, then=release)
                if failure is not None:
                    go_on = release(wait=True) and finished(Finished(result=failure))
                else:
                    held.append(cur)
            release(wait=True)
        finally:  # an interrupt, or the run stopped: no standby outlives the worker
            for plan in self.queued:
                if isinstance(plan, Planned):
                    plan.close()
            self.queued.clear()
            self.judging.close()
            if self.serving is not None:
                self.serving.close()

    def _grade(self, cur: Planned, claim: Claim, *, then: Callable[[], bool]
               ) -> ProblemResult | None:
        """Every batch of `cur`, each with the standbys it starts (_start_ahead), `then`
        called after each (False: the run stops, no more batches); None once they have run
        (their results: `_finished`), else the problem's failure."""
        try:
            for k in range(len(cur.parts)):
                self.grade_batch(cur, k, self._beside(cur, k, claim))
                cur.ran = time.monotonic()
                if not then():
                    break
            return None
        except Exception as exc:
            return self.failed(cur.sp, exc)
        finally:
            cur.close()

    def _finished(self, plan: Planned) -> Finished:
        """A graded problem's result, once its judging is done (or its failure there)."""
        try:
            result = self.finish(plan)
        except Exception as exc:
            result = self.failed(plan.sp, exc)
        return Finished(result=result, image_id=plan.image_id, device_name=plan.device_name)

    def open(self, sp: SuiteProblem | None) -> Planned | ProblemResult | None:
        """`sp` planned; or its result when there is nothing to grade (no kernel) or the
        planning failed."""
        if sp is None:
            return None
        try:
            return self.plan(sp)
        except Exception as exc:
            return self.failed(sp, exc)

    def plan(self, sp: SuiteProblem) -> Planned | ProblemResult:
        ctx = self.ctx
        shapes = select_shapes(sp, ctx.settings, ctx.narrowing)
        kernel = self.sub.kernel_path(sp.id)
        if kernel is None:
            rs = whole_problem(shapes, Verdict.MISSING, "no kernel in the submission")
            return ProblemResult(id=sp.id, operator=sp.problem.operator,
                                 verdict=Verdict.MISSING, shapes=rs)
        rel = self.sub.manifest.problems[sp.id].file
        source = kernel.read_text(encoding="utf-8", errors="replace")
        static = ctx.detector.static(source, rel, sp.problem.entry_names())
        if not shapes:  # nothing to grade is never `passed` (issue 20): --fail-on sees it
            return nothing_graded(sp, ctx.settings, static, rel)
        t0 = time.monotonic()
        ctx.progress(f"{sp.id}: image")
        image = ensure(self.setup.engine, problem_plan(self.runtime_tag, self.suite.id, sp))
        phases = {"image": time.monotonic() - t0}
        n_seeds = ctx.settings.seeds_per_shape or self.suite.info.seeds_per_shape
        cases = problem_cases(ctx.secret, sp, shapes, n_seeds, self.setup.timing)
        counts = per_shape(cases, shapes)
        parts = batching.batches(sp.problem, shapes, counts, ctx.scheduling.batch_bytes)
        return Planned(sp=sp, kernel=kernel, rel=rel, source=source,
                       static=static, image=image.tag, image_id=image.id, cases=cases,
                       per_shape=counts, parts=parts, phases=phases)

    def batch(self, plan: Planned, k: int) -> Batch | None:
        """Batch `k` of `plan` for run_pair (made once: its standby and its run share it), or
        None when it runs one container after the other (--sequential, or a problem that does
        not count its bytes: the entry's caps wait for the reference's outputs)."""
        if k not in plan.batches:
            problem, shapes, ctx = plan.sp.problem, plan.parts[k], self.ctx
            plan.batches[k] = None
            if ctx.scheduling.overlap and batching.counted_bytes(problem, shapes, plan.per_shape):
                plan.batches[k] = Batch(
                    image=plan.image, kernel_file=plan.kernel, cases=plan.part_cases(k),
                    ref_limits=self._reference_limits(plan, k), problem=problem,
                    entry_limits=batching.entry_limits_from_count(
                        ctx.entry_limits, problem, shapes, plan.per_shape,
                        timed=sum(1 for c in plan.part_cases(k) if c.timing)),
                    timing_budget_s=entry_budget(self.setup.timing, plan.static))
        return plan.batches[k]

    def _plain_batch(self, plan: Planned, k: int) -> Batch:
        """Batch `k` under the configured entry limits (one container after the other)."""
        return Batch(image=plan.image, kernel_file=plan.kernel, cases=plan.part_cases(k),
                     ref_limits=self._reference_limits(plan, k), problem=plan.sp.problem,
                     entry_limits=self.ctx.entry_limits,
                     timing_budget_s=entry_budget(self.setup.timing, plan.static))

    def _reference_limits(self, plan: Planned, k: int) -> Limits:
        return batching.reference_limits(self.ctx.reference_limits, plan.sp.problem,
                                         plan.parts[k], plan.per_shape,
                                         psutil.virtual_memory().available)

    def _upcoming(self, cur: Planned, k: int, claim: Claim) -> Iterator[tuple[Planned, int]]:
        """The batches after batch `k` of `cur`, in grading order, `depth` at most: the rest of
        `cur`'s, then the queued problems', taking problems from `claim` only as they are
        reached."""
        def batches() -> Iterator[tuple[Planned, int]]:
            yield from ((cur, j) for j in range(k + 1, len(cur.parts)))
            i = 0
            while True:
                if i == len(self.queued):
                    taken = self.open(claim())
                    if taken is None:
                        return
                    self.queued.append(taken)
                plan = self.queued[i]
                i += 1
                if isinstance(plan, Planned):
                    yield from ((plan, j) for j in range(len(plan.parts)))

        return itertools.islice(batches(), self.depth)

    def _beside(self, cur: Planned, k: int, claim: Claim) -> Beside | None:
        """What batch `k`'s timed loops wait for: the standbys it starts and the judging
        before it, or nothing when they run beside both (`beside`; then the batch starts
        once every judging but that one is done, so that no more than one batch's outputs
        wait to be judged beside it)."""
        started = self._start_ahead(cur, k, claim)
        if self.beside:
            self.judging.wait_older()
            return None
        pending = self.judging.pending()
        if not started and not pending:
            return None
        return Beside(tuple(started), pending)

    def _start_ahead(self, cur: Planned, k: int, claim: Claim) -> list[Standby | EntryStandby]:
        """The standbys batch `k` of `cur` starts: none when the next batch has one already
        (started with an earlier batch, whose timed loops waited for it), else the next
        `depth` batches', in order, up to one that runs one container after the other or
        cannot start. Timed beside them (`beside`), no timed loop waits for a standby: each
        of the next `depth` batches that has none gets one, so one a batch in the steady
        state, started `depth` batches ahead of its turn, with their time to set up."""
        started: list[Standby | EntryStandby] = []
        for plan, j in self._upcoming(cur, k, claim):
            if j in plan.standbys:
                if self.beside:
                    continue
                break
            batch = self.batch(plan, j)
            if batch is None:
                break
            cached = self.refs.folder(plan, j) is not None  # a round's: its entry runs alone
            try:
                server = self.serving.server(plan.image) if self.serving else None
                plan.standbys[j] = (EntryStandby(self.setup, batch, server=server) if cached
                                    else Standby(self.setup, batch, server=server))
            except Exception as exc:  # not this batch's failure: it starts afresh in its turn
                why = (exc.message if isinstance(exc, InfraError)
                       else f"{type(exc).__name__}: {exc}")
                self.ctx.progress(f"{plan.label(j)}: cannot start its containers ahead: {why}")
                break
            started.append(plan.standbys[j])
        return started

    def _server(self, plan: Planned) -> Server | None:
        """The entry's serving container for a batch with no standby, under --serve, if one
        starts (else the batch's entry gets a container of its own)."""
        try:
            return self.serving.server(plan.image) if self.serving is not None else None
        except InfraError as exc:
            self.ctx.progress(f"{plan.sp.id}: no serving container: {exc.message}")
            return None

    def grade_batch(self, plan: Planned, k: int, beside: Beside | None) -> None:
        """The reference and the entry on batch `k` of `plan`: side by side (run_pair) when
        it can, else one after the other. `beside`: what its timed loops wait for. Adds its
        judging (its results once done), its logs and phases to the plan."""
        if (kept := self.refs.folder(plan, k, reuse=True)) is not None:  # a round's, computed once
            counted = self.batch(plan, k)
            plan.logs = grade_cached(
                self.setup, plan, k, kept, batch=counted or self._plain_batch(plan, k),
                counted=counted is not None, beside=beside, progress=self.ctx.progress,
                judge=self.judge, unusable=self._unusable, light=self.refs.light(plan, k),
                server=lambda: self._server(plan))
            return
        plan.started = plan.started or time.monotonic()
        label, cases, shapes = plan.label(k), plan.part_cases(k), plan.parts[k]
        batch = self.batch(plan, k)
        got: str | None = None  # the entry's logs, once the batch has run
        if batch is not None:
            self.ctx.progress(f"{label}: reference and entry ({len(cases)} cases)")
            standby = plan.standbys.pop(k, None)
            if isinstance(standby, EntryStandby):  # never: a cached batch stays cached
                standby.close()
                standby = None
            with contextlib.ExitStack() as stack:
                pair = stack.enter_context(run_pair(self.setup, batch, standby=standby,
                                                    beside=beside,
                                                    server=lambda: self._server(plan)))
                if pair.entry is not None:
                    if pair.entry_limits is not batch.entry_limits:
                        self.ctx.progress(
                            f"{label}: outputs larger than the problem counts; the entry ran "
                            "again after the reference, with caps to fit")
                    got = self._unusable(plan, pair.reference, shapes, cases)
                    if got is None:
                        got = self.judge(plan, shapes, cases, pair.reference, pair.entry,
                                         pair.entry_limits, stack.pop_all(),
                                         kept=(k, pair.ref_dir))
            if got is None:
                self.ctx.progress(f"{label}: the reference failed beside the entry; again, one "
                                "after the other")
        plan.logs = got if got is not None else self._one_after_the_other(plan, k, beside)

    def _unusable(self, plan: Planned, ref: Evidence, shapes: list[Shape], cases: list[Case]
                  ) -> str | None:
        """A reference run that cannot be used (judge.reference_failure): its results added to
        the plan's, its logs returned; None when it can."""
        if (failure := reference_failure(ref, computed_first(cases))) is None:
            return None
        plan.judged.append(Judged.now(whole_problem(shapes, *failure)))
        return ref.exit.logs

    def _one_after_the_other(self, plan: Planned, k: int, beside: Beside | None) -> str:
        if beside is not None:
            beside.settle()  # both containers here run timed loops
        label, cases, shapes = plan.label(k), plan.part_cases(k), plan.parts[k]
        batch = self._plain_batch(plan, k)
        self.ctx.progress(f"{label}: reference ({len(cases)} cases)")
        with contextlib.ExitStack() as stack:
            ref, ref_dir = stack.enter_context(reference_container(self.setup, batch))
            if (unusable := self._unusable(plan, ref, shapes, cases)) is not None:
                return unusable
            limits = batching.entry_limits(self.ctx.entry_limits, ref_dir, cases)
            self.ctx.progress(f"{label}: entry")
            entry = stack.enter_context(entry_container(
                self.setup, replace(batch, entry_limits=limits), ref_dir))
            return self.judge(plan, shapes, cases, ref, entry, limits, stack.pop_all(),
                              kept=(k, ref_dir))

    def judge(self, plan: Planned, shapes: list[Shape], cases: list[Case], ref: Evidence,
              entry: Evidence, limits: Limits, keep: contextlib.ExitStack,
              kept: tuple[int, Path] | None = None) -> str:
        """The batch's judging to the judging thread, with `keep` (what it reads); its logs.
        `kept`: the batch's number and its reference's folder, a usable one computed here,
        copied into the round's store on that thread first (the phase `reference_keep`):
        its tens of GiB at most (Atrex-Bench) are the host's I/O, beside the GPU's next
        work like the comparing, not in front of it."""
        ctx, ready = self.ctx, entry.out.ready
        with contextlib.ExitStack() as guard:  # `keep` closed if this fails before handing over
            guard.push(keep)
            assert ref.out.result is not None  # _unusable said so
            plan.device_name = plan.device_name or ref.out.result.device_name
            add(plan.phases, {"reference": ref.exit.wall_s, "reference_held": ref.exit.held_s,
                              **harness_phases("reference", ref),
                              "entry": entry.exit.wall_s, "entry_held": entry.exit.held_s,
                              **harness_phases("entry", entry),
                              **({"entry_import": ready.import_s}
                                 if ready and ready.import_s is not None else {})})
            own = ctx.detector.own_kernels(plan.source)
            plans = timed_plans(self.setup.timing, cases, plan.kernel)
            topup = self._topup(plan, shapes, reached_uncomputed(
                cases, plans, entry, computed(ref.out.result)), guard)
            keep = guard.pop_all()
        def work() -> list[ShapeResult]:
            if kept is not None and self.refs.store is not None:  # in a round
                t0 = time.monotonic()
                self.refs.keep(plan, *kept)
                plan.kept_s.append(time.monotonic() - t0)  # read once every judging is done
            return judge_problem(
                problem=plan.sp.problem, shapes=shapes, cases=cases, reference=ref,
                entry=entry, static=plan.static, own_kernels=own, tracer=ctx.detector,
                max_output_bytes=limits.output_bytes, interpreter=self.setup.device == "cpu",
                source=plan.source, plans=plans, topup=topup)

        plan.judged.append(self.judging.submit(work, keep))
        return entry.exit.logs

    def _topup(self, plan: Planned, shapes: list[Shape], todo: list[Case],
               stack: contextlib.ExitStack) -> Evidence | None:
        """The reference's run on `todo`, the checked timed calls the entry's loops reached
        beyond what its batch's reference computed first (model/timed.py), its folder open
        until `stack` closes; None when there are none. A run that fails leaves their
        expected samples missing: those shapes' verdicts say so (infra_error)."""
        if not todo:
            return None
        self.ctx.progress(f"{plan.sp.id}: reference on {len(todo)} more checked timed calls")
        limits = batching.reference_limits(self.ctx.reference_limits, plan.sp.problem, shapes,
                                           plan.per_shape, psutil.virtual_memory().available)
        run, _ = stack.enter_context(reference_run(self.setup, plan.image, todo, limits,
                                                   plan.sp.problem, topup=True))
        add(plan.phases, {"reference_topup": run.exit.wall_s})
        return run

    def finish(self, plan: Planned) -> ProblemResult:
        sp = plan.sp
        got, judge_s, judged_at = results(plan.judged, self.judging)
        plan.results += got
        # the host's own comparing, and its keeping of the round's references, beside the
        # GPU's work (the judging thread's seconds hold both)
        kept_s = sum(plan.kept_s)
        add(plan.phases, {"judge": judge_s - kept_s,
                          **({"reference_keep": kept_s} if plan.kept_s else {})})
        if not plan.results:
            return nothing_graded(sp, self.ctx.settings, plan.static, plan.rel)
        verdict = worst([r.verdict for r in plan.results])
        self.ctx.progress(f"{sp.id}: done ({verdict})")
        # From its first batch's start (before, it ran beside the problem before) to its last
        # batch's run or judging, whichever ended later (it may be finished later still, after
        # a batch of the next problem: Worker.grade), and its image.
        ended = max(plan.ran or 0.0, judged_at)
        wall = plan.phases["image"] + ended - (plan.started or ended)
        return ProblemResult(
            id=sp.id, operator=sp.problem.operator, verdict=verdict,
            shapes=plan.results, findings=plan.static, kernel_file=plan.rel, image=plan.image,
            wall_s=wall, detail=verdict.message, stderr_excerpt=tail(plan.logs),
            phases_s=plan.phases)

    def failed(self, sp: SuiteProblem, exc: Exception) -> ProblemResult:
        """A failure of the grader's own machinery (or a grader bug) while grading `sp`:
        an infra_error for that problem, so that the others are still graded."""
        if isinstance(exc, InfraError):
            detail = exc.message
        elif isinstance(exc, OSError):  # the host's disk: ENOSPC in $TMPDIR and the like
            where = f" ({exc.filename})" if exc.filename else ""
            detail = f"host filesystem: {exc.strerror or exc}{where}"
        else:
            detail = f"grader bug: {type(exc).__name__}: {exc}"
        self.ctx.progress(f"{sp.id}: done (infra_error: {detail})")
        rs = whole_problem(select_shapes(sp, self.ctx.settings, self.ctx.narrowing),
                           Verdict.INFRA_ERROR, detail,
                           tail("".join(traceback.format_exception(exc))))
        return ProblemResult(id=sp.id, operator=sp.problem.operator,
                             verdict=Verdict.INFRA_ERROR, shapes=rs, detail=detail)
