"""Batches graded on a reference computed earlier (a round's: grader/round/refcache.py): what
the worker asks of such a store, the key a batch's reference is kept under, and the batch
graded with only the entry's container.

The store is storage alone: it finds a folder by key, keeps one, and notes what each entry
reused. Everything a grading decides (which batch, its limits, its standby, its judging)
stays here and in the worker (issue 32: the round's cache took the whole worker, edited its
plan and checked its standbys' types).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Protocol

from grader.formats.problem import Shape
from grader.grading.planned import Planned
from grader.grading.progress import Progress
from grader.model.evidence import read_out_dir
from grader.model.runs import Case, Evidence, ExitState
from grader.run import plan as batching
from grader.run.ahead import Beside, Standby
from grader.run.batch import Batch
from grader.run.cached import cached_entry
from grader.run.jobs import WorkerSetup
from grader.run.served import Server
from grader.sandbox.spec import Limits
from grader.suite.load import Suite

KEY_FORMAT = 1
# A kept reference's exit: what a reference that finished with every case ok leaves (only
# such runs are kept). Its wall time is not this entry's: zero, and its harness phases dropped.
CACHED_EXIT = ExitState(exit_code=0, timed_out=False, oom_killed=False, wall_s=0.0, logs="",
                        logs_truncated=False)

# The worker's judge: hands the batch's judging over with what it reads (`keep`), returns the
# entry's logs (grading/judging.py).
Judge = Callable[[Planned, list[Shape], list[Case], Evidence, Evidence, Limits,
                  contextlib.ExitStack], str]


class References(Protocol):
    """Reference folders computed once and reused, by batch key (a round's cache)."""

    def folder(self, key: str) -> Path | None:
        """The kept folder of `key`, or None when none is kept (complete ones only)."""
        ...

    def keep(self, key: str, ref_dir: Path, *, problem: str, cases: list[str]) -> None:
        """Keep `ref_dir`, a usable reference's folder that ran here, for later entries (a
        folder kept already stays). OSError when the host cannot, or keeps the room for the
        problems after `problem`: only the reuse is lost."""
        ...

    def reused(self, key: str, *, problem: str, cases: int) -> None:
        """Note that this entry graded a batch on the folder kept under `key`."""
        ...


def batch_key(suite: Suite, problem: str, image: str, cases: list[Case], setup: WorkerSetup,
              runtime: str) -> str:
    """What a batch's reference outputs depend on: the suite's version, the problem's image
    (a content hash of its reference, problem file and the harness), the device, runtime and
    timing knobs, and each case (id, seed, module seed, timing set, shape and its params)."""
    doc = {"format": KEY_FORMAT, "suite": suite.id, "suite_version": suite.info.version,
           "problem": problem, "image": image, "device": setup.device,
           "runtime": runtime, "timing": asdict(setup.timing) if setup.timing else None,
           "cases": [[c.id, c.seed, c.module_seed, c.timing, c.shape.id, c.shape.params]
                     for c in cases]}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


@dataclass(frozen=True)
class RoundReferences:
    """A round's kept references (`store`; None outside a round) as one worker reads and
    fills them, by its batches' keys."""

    store: References | None
    suite: Suite
    setup: WorkerSetup
    runtime: str
    progress: Progress

    def key(self, plan: Planned, k: int) -> str:
        return batch_key(self.suite, plan.sp.id, plan.image, plan.part_cases(k), self.setup,
                         self.runtime)

    def folder(self, plan: Planned, k: int, *, reuse: bool = False) -> Path | None:
        """The kept reference folder of batch `k` of `plan` (`reuse`: noted as used), or
        None."""
        if self.store is None or (folder := self.store.folder(key := self.key(plan, k))) is None:
            return None
        if reuse:
            self.store.reused(key, problem=plan.sp.id, cases=len(plan.part_cases(k)))
        return folder

    def keep(self, plan: Planned, k: int, ref_dir: Path) -> None:
        """A usable reference of batch `k` kept for the round's later entries."""
        if self.store is None:
            return
        try:
            self.store.keep(self.key(plan, k), ref_dir, problem=plan.sp.id,
                            cases=[c.id for c in plan.part_cases(k)])
        except OSError as exc:  # the host's: only the reuse is lost
            self.progress(f"{plan.label(k)}: cannot keep its reference for the round: {exc}")


def grade_cached(setup: WorkerSetup, plan: Planned, k: int, ref_dir: Path, *,
                 batch: Batch, counted: bool, beside: Beside | None,
                 progress: Progress, judge: Judge,
                 server: Callable[[], Server | None] | None = None) -> str:
    """`batch`, batch `k` of `plan`, graded on the kept reference in `ref_dir`, running the
    entry's container only (in its standby when one was started ahead, else as a worker of
    `server`, the entry's serving container, when there is one).

    The entry's limits are those `grader run` would give it: the batch's (from the
    problem's count where `counted`, else the configured ones), raised when the reference's
    outputs need more, as run_pair does."""
    cases, shapes = plan.part_cases(k), plan.parts[k]
    standby = plan.standbys.pop(k, None)
    if isinstance(standby, Standby):  # started before the round had kept this batch
        standby.close()
        standby = None
    limits = batching.entry_limits(batch.entry_limits, ref_dir, cases)
    if counted and limits.output_bytes <= batch.entry_limits.output_bytes:
        limits = batch.entry_limits
    out = read_out_dir(ref_dir)
    if out.result is not None:  # the reference's own phases were counted where it ran
        out = replace(out, result=out.result.model_copy(update={"phases_s": {}}))
    plan.started = plan.started or time.monotonic()
    progress(f"{plan.label(k)}: entry ({len(cases)} cases; the round's reference)")
    with contextlib.ExitStack() as stack:
        entry = stack.enter_context(cached_entry(
            setup, replace(batch, entry_limits=limits), ref_dir, standby=standby,
            beside=beside, server=server))
        return judge(plan, shapes, cases, Evidence(exit=CACHED_EXIT, out=out), entry, limits,
                     stack.pop_all())
