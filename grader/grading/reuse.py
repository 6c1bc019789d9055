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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Literal, Protocol

from grader.formats.problem import Shape
from grader.grading.phases import add, harness_phases
from grader.grading.planned import Planned
from grader.grading.progress import Progress
from grader.model.evidence import OutDir, read_out_dir
from grader.model.runs import Case, Evidence, ExitState
from grader.run import plan as batching
from grader.run.ahead import Beside, Standby, reference_ahead
from grader.run.batch import Batch
from grader.run.cached import cached_entry
from grader.run.jobs import WorkerSetup
from grader.run.sequential import reference_after
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


# A reference run that cannot be used: its verdict for the batch's shapes added to the plan,
# its logs returned; None when it can (Worker._unusable).
Unusable = Callable[[Planned, Evidence, list[Shape], list[Case]], str | None]


class References(Protocol):
    """Reference folders computed once and reused, by batch key (a round's cache)."""

    def folder(self, key: str) -> Path | None:
        """The kept folder of `key`, or None when none is kept (complete ones only)."""
        ...

    def light(self, key: str) -> dict[str, int]:
        """The correctness cases whose expected outputs the folder of `key` was kept without
        (case id -> bytes): each entry's batch computes them again. Empty: kept whole."""
        ...

    def keep(self, key: str, ref_dir: Path, *, problem: str, cases: list[str],
             outputs: Sequence[str] = ()) -> Literal["whole", "light"]:
        """Keep `ref_dir`, a usable reference's folder that ran here, for later entries (a
        folder kept already stays): whole, or where that does not fit, light, without the
        expected outputs of `outputs` (its correctness cases). OSError when the host cannot,
        or keeps the room for the problems after `problem`: only the reuse is lost."""
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

    def light(self, plan: Planned, k: int) -> dict[str, int]:
        """The outputs the round's folder of batch `k` was kept without (RoundReferences)."""
        return self.store.light(self.key(plan, k)) if self.store is not None else {}

    def keep(self, plan: Planned, k: int, ref_dir: Path) -> None:
        """A usable reference of batch `k` kept for the round's later entries."""
        if self.store is None:
            return
        cases = plan.part_cases(k)
        try:
            kind = self.store.keep(self.key(plan, k), ref_dir, problem=plan.sp.id,
                                   cases=[c.id for c in cases],
                                   outputs=[c.id for c in cases if not c.timing])
        except OSError as exc:  # the host's: only the reuse is lost
            self.progress(f"{plan.label(k)}: cannot keep its reference for the round: {exc}")
            return
        if kind == "light":
            self.progress(f"{plan.label(k)}: kept for the round without its expected outputs "
                          "(no room for them): later entries compute those alone")


def grade_cached(setup: WorkerSetup, plan: Planned, k: int, ref_dir: Path, *,
                 batch: Batch, counted: bool, beside: Beside | None,
                 progress: Progress, judge: Judge, unusable: Unusable,
                 light: Mapping[str, int] | None = None,
                 server: Callable[[], Server | None] | None = None) -> str:
    """`batch`, batch `k` of `plan`, graded on the kept reference in `ref_dir`, running the
    entry's container only (in its standby when one was started ahead, else as a worker of
    `server`, the entry's serving container, when there is one).

    The entry's limits are those `grader run` would give it: the batch's (from the
    problem's count where `counted`, else the configured ones), raised when the reference's
    outputs need more, as run_pair does.

    `light`: the correctness cases whose expected outputs the round kept the folder without
    (case id -> bytes). Once the entry's container has exited, a reference container
    computes those alone (no timed loop: the kept folder has its timings and checked calls),
    as a first entry's top-up does (Worker._topup); it is started gated beside the entry
    (run.ahead.ReferenceStandby), its cold imports off the batch's path. A run that cannot be
    used is `unusable`'s (the batch's shapes get its verdict, as when a first entry's
    reference fails)."""
    cases, shapes = plan.part_cases(k), plan.parts[k]
    standby = plan.standbys.pop(k, None)
    if isinstance(standby, Standby):  # started before the round had kept this batch
        standby.close()
        standby = None
    limits = batching.entry_limits(batch.entry_limits, ref_dir, cases, light)
    if counted and limits.output_bytes <= batch.entry_limits.output_bytes:
        limits = batch.entry_limits
    out = read_out_dir(ref_dir)
    if out.result is not None:  # the reference's own phases were counted where it ran
        out = replace(out, result=out.result.model_copy(update={"phases_s": {}}))
    plan.started = plan.started or time.monotonic()
    progress(f"{plan.label(k)}: entry ({len(cases)} cases; the round's reference)")
    with contextlib.ExitStack() as stack:
        todo = [c for c in cases if c.id in light] if light else []
        ahead = reference_ahead(setup, batch.image, todo, batch.ref_limits, batch.problem,
                                topup=True, label=plan.label(k), say=progress) if todo else None
        if ahead is not None:
            stack.callback(ahead.close)
            if beside is not None:  # the entry's timed loops wait for its imports too
                beside = Beside((*beside.standbys, ahead), beside.after)
        entry = stack.enter_context(cached_entry(
            setup, replace(batch, entry_limits=limits), ref_dir, standby=standby,
            beside=beside, server=server))
        if todo:
            progress(f"{plan.label(k)}: reference on its {len(todo)} correctness cases (the "
                     "round kept it without their outputs)")
            fresh, _ = reference_after(ahead, stack, setup, batch.image, todo,
                                       batch.ref_limits, batch.problem, topup=True)
            # its harness's own counts too: "standby" and "gate" when it was started ahead
            add(plan.phases, {"reference_outputs": fresh.exit.wall_s, **{
                f"reference_outputs.{k.split('.', 1)[1]}": v
                for k, v in harness_phases("reference", fresh).items()}})
            if (logs := unusable(plan, fresh, shapes, todo)) is not None:
                return logs
            out = with_outputs(out, fresh.out, todo)
        return judge(plan, shapes, cases, Evidence(exit=CACHED_EXIT, out=out), entry, limits,
                     stack.pop_all())


def with_outputs(kept: OutDir, fresh: OutDir, cases: list[Case]) -> OutDir:
    """A light-kept reference's folder (`kept`) with the expected outputs of `cases` and their
    case records from `fresh`, the run that computed them again."""
    ids = {c.id for c in cases}
    assert kept.result is not None and fresh.result is not None  # both usable (checked)
    records = {**kept.result.cases, **{i: r for i, r in fresh.result.cases.items() if i in ids}}
    return replace(kept, result=kept.result.model_copy(update={"cases": records}),
                   tensor_files={**kept.tensor_files, **{
                       key: path for key, path in fresh.tensor_files.items() if key[0] in ids}},
                   anomalies=[*kept.anomalies, *fresh.anomalies])
