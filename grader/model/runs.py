"""What one container's run gave back, as data the judge reads (no container in sight): its
exit, its output folder and an entry's frames (`Evidence`); and the cases a batch runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from grader.formats.problem import Shape
from grader.model import timed
from grader.model.channel import Frames
from grader.model.evidence import OutDir, ResultFile


@dataclass(frozen=True, kw_only=True)
class ExitState:
    exit_code: int | None  # None when killed by us for the wall-clock limit
    timed_out: bool
    oom_killed: bool
    wall_s: float  # start to exit, less the time it was held (Container.extend)
    logs: str  # stdout+stderr (stderr alone for a channel's container), at most log_bytes
    logs_truncated: bool
    held_s: float = 0.0
    stdout: bytes = b""  # a channel's frames (spec.stdout_bytes > 0), read at exit


@dataclass(frozen=True, kw_only=True)
class Evidence:
    """What one side of a batch (the reference or the entry) gave back: how its container
    exited, its output folder read without trusting it, and an entry's frames."""

    exit: ExitState
    out: OutDir
    frames: Frames | None = None  # an entry's channel (grader/model/channel.py); None: files only


@dataclass(frozen=True, kw_only=True)
class Case:
    id: str  # "<shape>.<k>": a safe file name
    shape: Shape
    seed: int
    # A checked call of the timed loop (model/timed.py), not a correctness call: its inputs are
    # drawn where it runs and its outputs compared by their samples (harness/fresh.py).
    timing: bool = False
    # Module problems: the seed both containers build the case's module under. Derived from
    # the run's secret and the case seed, never equal to it (worker.derive_module_seed).
    module_seed: int = 0


def timed_cases(cases: list[Case]) -> dict[str, list[Case]]:
    """Each shape's checked timed cases, in order."""
    out: dict[str, list[Case]] = {}
    for c in cases:
        if c.timing:
            out.setdefault(c.shape.id, []).append(c)
    return out


def computed_first(cases: list[Case]) -> list[Case]:
    """The cases a batch's reference computes before any entry's loop: every correctness case
    and, of each shape's checked timed cases, the eager ones (model/timed.py); in order."""
    eager = {c.id for checked in timed_cases(cases).values() for c in timed.eager(checked)}
    return [c for c in cases if not c.timing or c.id in eager]


def computed(result: ResultFile | None) -> set[str]:
    """The cases a reference's result (or a held reference's cases file) says it computed,
    and ok."""
    return {cid for cid, rec in result.cases.items() if rec.ok} if result is not None else set()


def reached_uncomputed(cases: list[Case], plans: Mapping[str, timed.TimedPlan],
                       entry: Evidence, done: set[str], *, rest: bool = False) -> list[Case]:
    """The checked timed cases the entry's loops reached (by its samples, each shape's
    `plans`) that are not among the reference's `done` (computed: computed_first left them
    for loops that run that far), in order; with `rest`, where a loop reached any, every
    other checked case of its shape too (a round keeps them with the reference: a later
    entry's loop on a shape whose timings kept one loop going is likely to run long too). The
    entry's own count decides: one that claims more calls than it made gets the reference
    to compute at most every checked case it would anyway."""
    result = entry.out.result
    if result is None:
        return []
    by_shape = timed_cases(cases)
    todo: list[Case] = []
    for shape, plan in plans.items():
        rec = result.timings.get(shape)
        if rec is None or not rec.ok:
            continue
        order = by_shape.get(shape, [])
        reached = set(plan.checked(len(rec.device_us)))
        if any(c.id in reached and c.id not in done for c in order):
            todo += [c for c in order if (rest or c.id in reached) and c.id not in done]
    return todo
