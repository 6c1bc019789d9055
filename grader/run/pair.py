"""A batch side by side: the reference's and the entry's containers at once, the handshake
stepped by a small state object (_PairRun).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from grader.harness.protocol import CASES_FILE, GO_FILE, RESULT_FILE
from grader.model.evidence import read_out_dir, read_result
from grader.model.runs import (
    Case,
    Evidence,
    ExitState,
    computed,
    computed_first,
    reached_uncomputed,
)
from grader.run import plan as batching
from grader.run.ahead import Beside, Standby, still_held
from grader.run.batch import Batch, arm, entry_run, is_ready
from grader.run.jobs import (
    WorkerSetup,
    case_specs,
    deliver,
    place,
    timed_plans,
)
from grader.run.sequential import entry_container
from grader.run.served import Server
from grader.sandbox.engine import POLL_S
from grader.sandbox.spec import Limits


@dataclass(frozen=True, kw_only=True)
class Pair:
    reference: Evidence
    ref_dir: Path
    # None: the reference failed while the entry's container ran beside it. That container
    # was stopped; grade the batch again one container after the other (an entry must not
    # escape its verdict by making the reference fail, with a GPU memory bomb at import say).
    entry: Evidence | None
    entry_limits: Limits  # what the entry ran under (run_pair may have had to raise them)


@contextmanager
def run_pair(setup: WorkerSetup, batch: Batch, *, standby: Standby | None = None,
             beside: Beside | None = None,
             server: Callable[[], Server | None] | None = None) -> Iterator[Pair]:
    """The reference and the entry at once: the entry's container starts and imports (a cold
    `import torch`, and whatever the entry does at import) while the reference makes the
    inputs and expected outputs. The entry's job is delivered once both are done; on a GPU
    the reference holds its timed loop until the entry's container has exited, so that no
    entry code shares the GPU with it. Time either container spends held by the other is
    not counted against its wall-clock limit (Container.extend).

    `standby`: this batch's containers started ahead (`Standby(setup, batch)`), released here
    (started afresh if they are no longer usable); closed on return either way. `beside`:
    the next batches' standbys, started by the caller with this one: neither this entry's
    timed loops nor the reference's start before they are idle. The entry's job goes out as
    usual; while `beside` still imports it carries "hold", and the entry's harness, after
    its warm-up and traced calls, waits for GO before its timed loops. `server`: where the
    entry's serving container comes from (run.served), asked only when there is no usable
    standby; None: the entry gets a container of its own.

    `batch.entry_limits` come from the problem's count of bytes. A problem whose outputs the
    count leaves out (reshape_and_cache returns whole copies of its caches, the count has the
    slots written: on the H200, 2026-12-01, its honest entry filled the cap) is caught once
    the reference has written them: the entry's container is stopped before its job, and the
    entry runs again once the reference has exited, under the limits its outputs call for
    (run.plan.entry_limits)."""
    assert standby is None or standby.batch is batch
    with contextlib.ExitStack() as stack:
        if standby is not None:
            stack.callback(standby.close)
            standby.settle()  # still importing: it soon will be there
            if not standby.usable():
                standby.close()
                standby = None
        if standby is None:
            standby = stack.enter_context(contextlib.closing(Standby(
                setup, batch, gated=False, server=server() if server is not None else None)))
        st = standby
        st.release()
        yield from _pair_loop(setup, st, beside)


def _pair_loop(setup: WorkerSetup, st: Standby, beside: Beside | None) -> Iterator[Pair]:
    """Watch both containers until each has exited, taking each step of the handshake when
    its time comes (_PairRun); then the batch's Pair."""
    run = _PairRun(setup=setup, st=st, beside=beside)
    tick = time.monotonic()
    while not run.exited():
        now = time.monotonic()
        step, tick = now - tick, now
        run.look()
        run.read_cases()
        if run.reference_failed():
            yield run.without_entry()
            return
        run.deliver_when_ready(step)
        run.release_entry_timing(step)
        run.release_reference_timing(step)
        time.sleep(POLL_S)
    yield from run.pairs()


@dataclass(kw_only=True)
class _PairRun:
    """Where one batch's handshake stands (run_pair). Each step acts once its time has come;
    `step` (seconds since the last look) is added to the deadline of a container waiting on
    the other (Container.extend)."""

    setup: WorkerSetup
    st: Standby
    beside: Beside | None
    ref_exit: ExitState | None = None
    ent_exit: ExitState | None = None
    cases_ok: bool | None = None  # the reference's cases: unknown, all ok, or not
    outgrown: Limits | None = None  # the entry's limits, once the counted ones prove too small
    delivered: bool = False  # the entry's inputs and job are placed
    # The entry's job went out while `beside` still imported: its timed loops wait for GO.
    timing_held: bool = False
    released: bool = False  # the reference's timed loop has its GO
    armed: bool = False  # the entry's clock has started (arm)
    entry: Evidence | None = None  # the exited entry's run, once read (_entry)

    def exited(self) -> bool:
        return self.ref_exit is not None and self.ent_exit is not None

    def look(self) -> None:
        self.ref_exit = self.ref_exit or self.st.ref.poll()
        self.ent_exit = self.ent_exit or self.st.ent.poll()
        if self.ent_exit is None:
            self.armed = arm(self.st.ent, self.armed)

    def read_cases(self) -> None:
        """The reference's case results, read until known, then kept. Once they are all ok
        its outputs exist (and no job has gone out yet): do the counted caps hold them?"""
        if self.cases_ok is not None:
            return
        st = self.st
        self.cases_ok = _cases_ok(st.ref_out / (CASES_FILE if st.hold else RESULT_FILE),
                                  st.batch.cases, done=st.hold or self.ref_exit is not None)
        if self.cases_ok:
            counted = st.batch.entry_limits
            needed = batching.entry_limits(counted, st.ref_out, st.batch.cases)
            if needed.output_bytes > counted.output_bytes:
                self.outgrown = needed
                if self.ent_exit is None:
                    st.ent.kill()

    def reference_failed(self) -> bool:
        """A case failed, or the reference exited without its results: the entry is stopped."""
        failed = self.cases_ok is False or (self.ref_exit is not None and self.cases_ok is None)
        if failed and self.ent_exit is None:
            self.st.ent.kill()
        return failed

    def without_entry(self) -> Pair:
        st = self.st
        return Pair(reference=Evidence(exit=self.ref_exit or st.ref.wait(wall_s=0.0),
                                           out=read_out_dir(st.ref_out)),
                    ref_dir=st.ref_out, entry=None, entry_limits=st.batch.entry_limits)

    def deliver_when_ready(self, step: float) -> None:
        """The entry's inputs and job once it is imported and the reference's cases are done;
        imported before them, it waits on the reference."""
        st, beside = self.st, self.beside
        ready = not self.delivered and self.ent_exit is None and is_ready(st.ent)
        if not ready or self.outgrown is not None:
            return
        if not self.cases_ok:
            st.ent.extend(step)
            return
        # With timed loops, the job goes out at once and only they wait for `beside`: its
        # warm-up and traced calls run beside the standby's imports.
        self.delivered = True
        self.timing_held = beside is not None and st.hold and not beside.idle()
        deliver(self.setup, st.batch, st.ref_out, st.ent_in, hold=self.timing_held)

    def release_entry_timing(self, step: float) -> None:
        """A held entry's timed loops go once `beside` is idle; until then, traced and
        waiting, it is held."""
        if not self.timing_held or self.ent_exit is not None:
            return
        assert self.beside is not None
        self.timing_held = still_held(self.beside, self.st.ent, self.st.ent_in, step)

    def release_reference_timing(self, step: float) -> None:
        """A held reference times once the entry has exited and `beside` is idle; until then,
        its cases done, it is held. Its GO carries the checked timed calls the entry's loops
        reached beyond those it computed first (model/timed.py), with the rest of their
        shapes': it computes them before its timed loop, with no container to start."""
        st, beside = self.st, self.beside
        if not (st.hold and self.cases_ok) or self.released:
            return
        if self.ent_exit is not None and (beside is None or beside.idle()):
            self.released = True
            place(st.ref_in, GO_FILE, {"cases": case_specs(self._reached())})
        elif self.ref_exit is None:
            st.ref.extend(step)

    def _reached(self) -> list[Case]:
        """The checked timed cases the exited entry's loops reached that the reference has
        not computed, with the rest of those shapes' (a round keeps them for its later
        entries, which then need no top-up run); none when its outputs outgrew their caps (it
        runs again later)."""
        st, knobs = self.st, self.setup.timing
        if knobs is None or self.ent_exit is None or self.outgrown is not None:
            return []
        plans = timed_plans(knobs, st.batch.cases, st.batch.kernel_file)
        return reached_uncomputed(st.batch.cases, plans, self._entry(),
                                  computed(read_result(st.ref_out / CASES_FILE)),
                                  rest=True)

    def _entry(self) -> Evidence:
        """The exited entry's run, read once (the GO's cases and the batch's Pair)."""
        assert self.ent_exit is not None
        if self.entry is None:
            self.entry = entry_run(self.ent_exit, self.st.ent_out)
        return self.entry

    def pairs(self) -> Iterator[Pair]:
        """The batch's Pair once both have exited; an entry whose outputs outgrew its counted
        caps runs again first, after the reference, under the caps they call for."""
        st, batch = self.st, self.st.batch
        assert self.ref_exit is not None and self.ent_exit is not None
        reference = Evidence(exit=self.ref_exit, out=read_out_dir(st.ref_out))
        if self.outgrown is not None:
            # Started at once beside the standbys still setting up: only its timed loops
            # wait for them, as a cached batch's do (run.cached).
            with entry_container(self.setup, replace(batch, entry_limits=self.outgrown),
                                 st.ref_out, beside=self.beside) as entry:
                yield Pair(reference=reference, ref_dir=st.ref_out, entry=entry,
                           entry_limits=self.outgrown)
            return
        yield Pair(reference=reference, ref_dir=st.ref_out, entry=self._entry(),
                   entry_limits=batch.entry_limits)


def _cases_ok(path: Path, cases: list[Case], *, done: bool) -> bool | None:
    """Whether the reference's case results at `path` say every case it computes (of the
    batch's `cases`: model.runs.computed_first) is done and ok; None while there are none yet
    (or, with `done`, never will be: read as failed by the caller once the container has
    exited)."""
    if not done or not path.is_file():
        return None
    result = read_result(path)
    if result is None:
        return False
    return all(result.cases.get(c.id) is not None and result.cases[c.id].ok
               for c in computed_first(cases))
