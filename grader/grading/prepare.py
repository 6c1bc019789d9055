"""A round's references computed before its entries (`grader round prepare`).

In a round every entry gets the same cases (grading/seeds.problem_cases, from the round's
secret), so a batch's reference outputs are the same for all of them (grading/reuse.py). The
first entry to reach a batch runs its reference beside its own container and keeps the
folder; so the first entry of a round pays for every reference, and its grading is the
round's slowest (Atrex-Bench: about 360 s of reference containers for a third of its
problems on an H100, 2026-12-06). An organiser who has committed a round can have those
references computed before any entry comes: each batch's reference container runs here,
with no entry beside it, and a usable run is kept in the round's store under the key an
entry's batch will look for. The first entry then grades as every later one does.

Nothing of an entry runs here, and nothing here changes what an entry is graded on: the
reference, its job and its container are those of an entry's batch, and the key covers
everything they depend on. A batch without room for its outputs is kept light (its result,
timings and samples: each entry's batch computes its outputs alone, round/refcache.py); one
that cannot be kept even so, or whose reference fails, is left for the entries, which run it
as they would have.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal

import psutil

from grader.files import regular_files
from grader.formats.problem import Shape
from grader.grading.progress import Progress
from grader.grading.reuse import References, batch_key
from grader.grading.seeds import per_shape, problem_cases
from grader.grading.selection import select_shapes
from grader.grading.settings import GradingSettings, Narrowing
from grader.images import ensure, problem_plan
from grader.judge.problem import reference_failure
from grader.model.runs import Case, computed_first
from grader.run import plan as batching
from grader.run.ahead import ReferenceStandby, reference_ahead
from grader.run.jobs import WorkerSetup
from grader.run.sequential import reference_after
from grader.sandbox.spec import Limits
from grader.suite.load import Suite, SuiteProblem

# What became of one batch's reference: computed and kept; kept light (without its correctness
# outputs, which each entry's batch computes alone: round/refcache.py); kept already (by an
# entry, or an earlier prepare); computed but not kept (the host's room); failed (an entry
# runs it again, and gets the verdict that run gives).
Status = Literal["kept", "kept light", "kept already", "not kept", "failed"]


@dataclass(frozen=True, kw_only=True)
class PreparedBatch:
    """One batch of a problem, as `grader round prepare` left it."""

    problem: str
    key: str
    cases: int
    status: Status
    detail: str = ""
    wall_s: float = 0.0
    bytes: int = 0  # its reference's folder (what a keep takes), where it ran


@dataclass(frozen=True, kw_only=True)
class Preparation:
    """What every prepared batch shares: the round's secret and grading settings, the runtime
    image, and where the references are kept."""

    suite: Suite
    settings: GradingSettings  # as the entries' gradings apply them (seeds per shape set)
    narrowing: Narrowing
    reference_limits: Limits
    batch_bytes: int
    secret: bytes
    runtime_tag: str
    store: References
    progress: Progress


def prepare_problem(prep: Preparation, setup: WorkerSetup, sp: SuiteProblem
                    ) -> list[PreparedBatch]:
    """Each batch of `sp` that the round has not kept yet: its reference run and kept, as an
    entry's first batch would (Worker.plan's cases and batches, grade_batch's key)."""
    shapes = select_shapes(sp, prep.settings, prep.narrowing)
    if not shapes:
        return []
    prep.progress(f"{sp.id}: image")
    image = ensure(setup.engine, problem_plan(prep.runtime_tag, prep.suite.id, sp)).tag
    n_seeds = prep.settings.seeds_per_shape or prep.suite.info.seeds_per_shape
    cases = problem_cases(prep.secret, sp, shapes, n_seeds, setup.timing)
    counts = per_shape(cases, shapes)
    parts = batching.batches(sp.problem, shapes, counts, prep.batch_bytes)
    planned = []
    for k, part in enumerate(parts):
        ids = {s.id for s in part}
        mine = [c for c in cases if c.shape.id in ids]
        key = batch_key(prep.suite, sp.id, image, mine, setup, prep.settings.runtime)
        label = sp.id if len(parts) == 1 else f"{sp.id} [{k + 1}/{len(parts)}]"
        planned.append(_Planned(part=part, cases=mine, key=key, label=label))
    out = []
    ahead: ReferenceStandby | None = None  # the next batch's reference, at its gate
    try:
        for k, b in enumerate(planned):
            t0 = time.monotonic()
            started, ahead = ahead, _ahead(prep, setup, sp, image, counts, planned[k + 1:])
            status, detail, size = _batch(prep, setup, sp, image, counts, b, started)
            prep.progress(f"{b.label}: {status}" + (f" ({detail})" if detail else ""))
            out.append(PreparedBatch(problem=sp.id, key=b.key, cases=len(b.cases),
                                     status=status, detail=detail,
                                     wall_s=time.monotonic() - t0, bytes=size))
    finally:
        if ahead is not None:
            ahead.close()
    return out


@dataclass(frozen=True, kw_only=True)
class _Planned:
    """One batch of a problem: its shapes, cases, key and progress label."""

    part: list[Shape]
    cases: list[Case]
    key: str
    label: str


def _limits(prep: Preparation, sp: SuiteProblem, b: _Planned, counts: dict[str, int]
            ) -> Limits:
    return batching.reference_limits(prep.reference_limits, sp.problem, b.part, counts,
                                     psutil.virtual_memory().available)


def _ahead(prep: Preparation, setup: WorkerSetup, sp: SuiteProblem, image: str,
           counts: dict[str, int], rest: list[_Planned]) -> ReferenceStandby | None:
    """The reference container of the problem's next batch (the first of `rest`), started
    gated, so that its start and cold imports run beside this batch's reference; None when
    there is none, it is kept already, or it cannot start (it then starts in its turn)."""
    if not rest or prep.store.folder(rest[0].key) is not None:
        return None
    b = rest[0]
    return reference_ahead(setup, image, b.cases, _limits(prep, sp, b, counts), sp.problem,
                           label=b.label, say=prep.progress)


def _batch(prep: Preparation, setup: WorkerSetup, sp: SuiteProblem, image: str,
           counts: dict[str, int], b: _Planned, ahead: ReferenceStandby | None
           ) -> tuple[Status, str, int]:
    """One batch's reference run (from `ahead`, its container started gated, when that got
    to its gate) and kept, unless kept already; what became of it, and the bytes of its
    reference's folder (0 where none ran)."""
    with contextlib.ExitStack() as stack:
        if ahead is not None:
            stack.callback(ahead.close)
        if prep.store.folder(b.key) is not None:
            return "kept already", "", 0
        prep.progress(f"{b.label}: reference ({len(b.cases)} cases)")
        ref, ref_dir = reference_after(ahead, stack, setup, image, b.cases,
                                       _limits(prep, sp, b, counts), sp.problem)
        size = sum(regular_files(ref_dir).values())
        failure = reference_failure(ref, computed_first(b.cases))
        if failure is not None:
            verdict, detail, _ = failure
            return "failed", f"{verdict}: {detail}; each entry runs it", size
        try:
            kind = prep.store.keep(b.key, ref_dir, problem=sp.id,
                                   cases=[c.id for c in b.cases],
                                   outputs=[c.id for c in b.cases if not c.timing])
        except OSError as exc:
            return "not kept", f"{exc}; each entry runs it", size
    if kind == "light":
        return "kept light", "no room for its outputs: each entry computes those alone", size
    return "kept", "", size


def prepare_all(prep: Preparation, setups: list[WorkerSetup], todo: list[SuiteProblem]
                ) -> list[PreparedBatch]:
    """Every problem of `todo`, one worker per sandbox in `setups` (one per GPU), each taking
    the next problem when it needs one; the batches in suite order. A problem whose
    preparing raises (its image cannot build, the engine fails) is one `failed` batch and
    costs only that problem: its entries run its references as they would have."""
    waiting = deque(todo)
    lock = threading.Lock()
    got: dict[str, list[PreparedBatch]] = {}

    def work(setup: WorkerSetup) -> None:
        while True:
            with lock:
                if not waiting:
                    return
                sp = waiting.popleft()
            try:
                batches = prepare_problem(prep, setup, sp)
            except Exception as exc:
                batches = [failure(sp, exc)]
            with lock:
                got[sp.id] = batches

    with ThreadPoolExecutor(max_workers=len(setups)) as pool:
        list(pool.map(work, setups))
    return [b for sp in todo for b in got.get(sp.id, [])]


def failure(sp: SuiteProblem, exc: Exception) -> PreparedBatch:
    """A problem that could not be prepared, and why (its entries compute its references)."""
    why = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
    return PreparedBatch(problem=sp.id, key="", cases=0, status="failed",
                         detail=f"{why}; each entry runs its references")
