"""One batch of a problem's cases, and what every way of running it reads off the entry's
container (issue 32: one module per protocol).

The run layer runs a batch in one of four ways: side by side (pair.py: the reference and the
entry at once), one after the other (sequential.py), its containers started ahead of their
turn beside the batch before (ahead.py), or its entry alone on a reference a round computed
already (cached.py). The reference container never sees the entry; the entry container never
sees the reference (its files are masked) nor its outputs. Its job (the seeds it draws its
inputs from) reaches the entry only after its module has been imported, and the reference's
timed loop never shares the GPU with entry code (see the protocol in grader/harness/main.py;
its names are grader/harness/protocol.py's).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from grader.formats.problem import Problem
from grader.model.channel import read_entry_out, read_frames
from grader.model.runs import Case, Evidence, ExitState
from grader.sandbox.engine import Container
from grader.sandbox.spec import Limits


@dataclass(frozen=True, kw_only=True)
class Batch:
    """One batch of a problem's cases and what run_pair's two containers run under."""

    image: str
    kernel_file: Path
    cases: list[Case]
    ref_limits: Limits
    # From the problem's count of bytes (run.plan.entry_limits_from_count), before any
    # output exists; run_pair raises them when the reference's outputs prove them too small.
    entry_limits: Limits
    problem: Problem | None = None  # None: a function-style problem
    # Seconds the entry's timed loop may take a shape, where not the knobs' own budget_s: a
    # problem whose static findings already keep every shape from `passed` is timed on the
    # reference's shorter budget (grading.worker.entry_budget).
    timing_budget_s: float | None = None


def entry_run(exit_state: ExitState, out_dir: Path) -> Evidence:
    """An exited entry container's run: its frames and its checked output folder."""
    out, frames = read_entry_out(out_dir, exit_state.stdout)
    return Evidence(exit=exit_state, out=out, frames=frames)


def arm(ent: Container, armed: bool) -> bool:
    """Whether the entry's harness has armed its clock (protocol.ARMED: set up, no entry code
    run yet); the first look that finds it starts the container's clock, so that --timeout
    counts neither the container's start nor its cold imports (issue 34). Until then its
    deadline allows the set-up too (Limits.setup_s)."""
    if armed or not read_frames(ent.stdout()).armed:
        return armed
    ent.rebase()
    return True


def is_ready(ent: Container) -> bool:
    """Whether the entry's harness has sent "ready" (its warden relays it on stdout: nothing
    the entry writes can stand in for it, harness/warden.py)."""
    return read_frames(ent.stdout()).ready is not None
