"""A batch one container after the other: the reference (reference_container), then the entry
on its outputs (entry_container); and an entry's container run on a reference that is there
already (EntryRun, which cached.py shares). Each takes the batch whole (issue 32);
reference_run is a reference container on cases that make no batch (suite check's).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from grader.formats.problem import Problem
from grader.model.evidence import read_out_dir
from grader.model.runs import Case, Evidence, ExitState
from grader.run.ahead import Beside, ReferenceStandby, still_held
from grader.run.batch import Batch, arm, entry_run, is_ready
from grader.run.jobs import (
    WorkerSetup,
    container_spec,
    deliver,
    entry_in,
    entry_spec,
    fresh_in_dir,
    io_binds,
    reference_run_job,
    write_job,
)
from grader.sandbox.capped import capped_dir
from grader.sandbox.engine import Container
from grader.sandbox.spec import Limits, Role


def reference_container(setup: WorkerSetup, batch: Batch
                        ) -> contextlib.AbstractContextManager[tuple[Evidence, Path]]:
    """Run the batch's reference; yields the run and its output folder (alive inside the
    block)."""
    return reference_run(setup, batch.image, batch.cases, batch.ref_limits, batch.problem)


@contextmanager
def reference_run(setup: WorkerSetup, image: str, cases: list[Case], limits: Limits,
                  problem: Problem | None = None, *, digests: bool = False,
                  topup: bool = False) -> Iterator[tuple[Evidence, Path]]:
    """Run a reference on `cases`; yields the run and its output folder (alive inside the
    block). `problem` says how to call it (None: a function-style problem); `digests`: its
    case records carry the sha256 of each case's inputs (jobs.reference_job); `topup`:
    `cases` are checked timed calls that an entry's loops reached beyond what its batch's
    reference computed first, and it computes only those (jobs.topup_job)."""
    with fresh_in_dir() as in_dir, capped_dir(limits.output_bytes) as out_dir:
        write_job(in_dir, reference_run_job(setup, cases, problem, topup=topup,
                                            digests=digests))
        spec = container_spec(setup, image, Role.REFERENCE, io_binds(in_dir, out_dir), limits)
        exit_state = setup.engine.run(spec)
        yield Evidence(exit=exit_state, out=read_out_dir(out_dir)), out_dir


def reference_after(ahead: ReferenceStandby | None, stack: contextlib.ExitStack,
                    setup: WorkerSetup, image: str, cases: list[Case], limits: Limits,
                    problem: Problem | None = None, *, topup: bool = False
                    ) -> tuple[Evidence, Path]:
    """The reference's run on `cases` and its output folder: from `ahead`, its container
    started gated on the same (run.ahead.reference_ahead), where that got to its gate; else
    a container started now (reference_run), its folder open until `stack` closes."""
    if ahead is not None and (run := ahead.run()) is not None:
        return run, ahead.ref_out
    return stack.enter_context(reference_run(setup, image, cases, limits, problem,
                                             topup=topup))


@contextmanager
def entry_container(setup: WorkerSetup, batch: Batch, ref_out: Path, *,
                    beside: Beside | None = None) -> Iterator[Evidence]:
    """Run the batch's entry under `batch.entry_limits` on the reference in `ref_out` (its
    job placed only once the entry is imported); yields the run while its output folder is
    still there to read. `beside`: what its timed loops wait for (its set-up, warm-up and
    traced calls run beside it)."""
    limits = batch.entry_limits
    with capped_dir(limits.output_bytes) as out_dir, entry_in(batch.kernel_file) as in_dir:
        spec = entry_spec(setup, batch.image, in_dir, out_dir, limits, batch.problem)
        with setup.engine.start(spec) as running:
            exit_state = EntryRun(setup=setup, ent=running, in_dir=in_dir, batch=batch,
                                  ref_out=ref_out, beside=beside).wait()
        yield entry_run(exit_state, out_dir)


@dataclass(kw_only=True)
class EntryRun:
    """An entry container on inputs that are there already: its inputs and job once it is
    imported, held before its timed loops while `beside` still imports (then its go)."""

    setup: WorkerSetup
    ent: Container
    in_dir: Path
    batch: Batch
    ref_out: Path
    beside: Beside | None
    delivered: bool = False
    held: bool = False
    armed: bool = False
    _tick: float = 0.0

    def wait(self) -> ExitState:
        self._tick = time.monotonic()
        return self.ent.wait(on_poll=self._look)

    def _look(self) -> None:
        now = time.monotonic()
        step, self._tick = now - self._tick, now
        self.armed = arm(self.ent, self.armed)
        if not self.delivered and is_ready(self.ent):
            self.delivered = True
            self.held = (self.beside is not None and self.setup.timing is not None
                         and not self.beside.idle())
            deliver(self.setup, self.batch, self.ref_out, self.in_dir, hold=self.held)
        elif self.held:
            assert self.beside is not None
            self.held = still_held(self.beside, self.ent, self.in_dir, step)
