"""Run one batch of a problem's cases: the reference in its own container and the entry in a
hardened one, side by side (run_pair) or one after the other (reference_container, then
entry_container); and
a batch's two containers started ahead of their turn, beside the batch before (Standby), or
its entry's alone when a round has its reference already (EntryStandby, cached_entry).

The reference container never sees the entry; the entry container never sees the reference
(its files are masked) nor its outputs. Inputs reach the entry only after its module has been
imported, and the reference's timed loop never shares the GPU with entry code (see the
protocol in grader/harness/main.py; its names are grader/harness/protocol.py's).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from grader.formats.problem import Problem
from grader.harness.protocol import CASES_FILE, GATE_FILE, GO_FILE, RESULT_FILE, START_FILE
from grader.model.channel import read_entry_out, read_frames
from grader.model.evidence import read_out_dir, read_result
from grader.model.runs import Case, Evidence, ExitState
from grader.run import plan as batching
from grader.run.jobs import (
    WorkerSetup,
    container_spec,
    deliver,
    entry_in,
    entry_spec,
    fresh_in_dir,
    io_binds,
    place,
    reference_job,
    write_job,
)
from grader.sandbox.capped import capped_dir
from grader.sandbox.engine import POLL_S, Container
from grader.sandbox.spec import Limits, Role

# The longest a standby's containers may take to reach their gates (a cold `import torch` on a
# loaded host is seconds): one that has not is dropped, and its batch starts afresh.
GATE_WAIT_S = 300.0


@contextmanager
def reference_container(setup: WorkerSetup, image: str, cases: list[Case], limits: Limits,
                        problem: Problem | None = None, *, digests: bool = False
                        ) -> Iterator[tuple[Evidence, Path]]:
    """Run the reference; yields the run and its output folder (alive inside the block).
    `problem` says how to call it (None: a function-style problem); `digests`: its case
    records carry the sha256 of each case's inputs (jobs.reference_job)."""
    with fresh_in_dir() as in_dir, capped_dir(limits.output_bytes) as out_dir:
        write_job(in_dir, reference_job(setup, cases, problem, digests=digests))
        spec = container_spec(setup, image, Role.REFERENCE, io_binds(in_dir, out_dir), limits)
        exit_state = setup.engine.run(spec)
        yield Evidence(exit=exit_state, out=read_out_dir(out_dir)), out_dir


@contextmanager
def entry_container(setup: WorkerSetup, image: str, kernel_file: Path, cases: list[Case],
                    ref_out: Path, limits: Limits, problem: Problem | None = None
                    ) -> Iterator[Evidence]:
    """Run the entry on the reference's inputs (linked in only once the entry is imported);
    yields the run while its output folder is still there to read."""
    with capped_dir(limits.output_bytes) as out_dir, entry_in(kernel_file) as in_dir:
        spec = entry_spec(setup, image, in_dir, out_dir, limits, problem)
        with setup.engine.start(spec) as running:
            exit_state = _EntryRun(setup=setup, ent=running, in_dir=in_dir, cases=cases,
                                   problem=problem, ref_out=ref_out, beside=None).wait()
        yield entry_run(exit_state, out_dir)


@contextmanager
def cached_entry(setup: WorkerSetup, image: str, kernel_file: Path, cases: list[Case],
                 ref_out: Path, limits: Limits, problem: Problem | None = None, *,
                 standby: EntryStandby | None, beside: Beside | None
                 ) -> Iterator[Evidence]:
    """Run the entry on a reference computed earlier (a round's cache, grader/round/): in
    its standby, started ahead of its turn, when there is one still usable and started under
    these limits, else in a container of its own (entry_container). `beside`: the next
    batches' standbys; the entry's timed loops wait until they are idle (as run_pair's do),
    its warm-up and traced calls run beside their imports."""
    with contextlib.ExitStack() as stack:
        if standby is not None:
            stack.callback(standby.close)
            standby.settle()
            if not standby.usable() or standby.batch.entry_limits != limits:
                standby.close()
                standby = None
        if standby is None:
            if beside is not None:
                beside.settle()  # no timed loop beside a standby's imports
            with entry_container(setup, image, kernel_file, cases, ref_out, limits,
                                 problem) as run:
                yield run
            return
        standby.release()
        exit_state = _EntryRun(setup=setup, ent=standby.ent, in_dir=standby.ent_in, cases=cases,
                               problem=problem, ref_out=ref_out, beside=beside).wait()
        yield entry_run(exit_state, standby.ent_out)


@dataclass(kw_only=True)
class _EntryRun:
    """An entry container on inputs that are there already: its inputs and job once it is
    imported, held before its timed loops while `beside` still imports (then its go)."""

    setup: WorkerSetup
    ent: Container
    in_dir: Path
    cases: list[Case]
    problem: Problem | None
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
        self.armed = _armed(self.ent, self.armed)
        if not self.delivered and _ready(self.ent):
            self.delivered = True
            self.held = (self.beside is not None and self.setup.timing is not None
                         and not self.beside.idle())
            deliver(self.setup, self.cases, self.problem, self.ref_out, self.in_dir,
                    hold=self.held)
        elif self.held:
            assert self.beside is not None
            self.held = _still_held(self.beside, self.ent, self.in_dir, step)


def _still_held(beside: Beside, ent: Container, in_dir: Path, step: float) -> bool:
    """One look at an entry whose timed loops wait for `beside`: its go once every standby
    there is idle (False: no longer held); until then, traced and waiting, the `step` seconds
    since the last look are not its own time (Container.extend)."""
    if beside.idle():
        place(in_dir, GO_FILE, {})
        return False
    if read_frames(ent.stdout()).traced:
        ent.extend(step)
    return True


def _armed(ent: Container, armed: bool) -> bool:
    """Whether the entry's harness has armed its clock (protocol.ARMED: set up, no entry code
    run yet); the first look that finds it starts the container's clock, so that --timeout
    counts neither the container's start nor its cold imports (issue 34). Until then its
    deadline allows the set-up too (Limits.setup_s)."""
    if armed or not read_frames(ent.stdout()).armed:
        return armed
    ent.rebase()
    return True


def _ready(ent: Container) -> bool:
    """Whether the entry's harness has sent "ready" (its warden relays it on stdout: nothing
    the entry writes can stand in for it, harness/warden.py)."""
    return read_frames(ent.stdout()).ready is not None


def entry_run(exit_state: ExitState, out_dir: Path) -> Evidence:
    """An exited entry container's run: its frames and its checked output folder."""
    out, frames = read_entry_out(out_dir, exit_state.stdout)
    return Evidence(exit=exit_state, out=out, frames=frames)


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


class _Gated:
    """Containers started ahead of their turn, each waiting at its gate (harness.main._standby)
    until `release`: what Standby and EntryStandby share. A subclass sets `_stack`, `since`,
    `gated`, `released`, starts its entry with `_start_entry` and lists its containers in
    `_gates`."""

    closed = False
    released = False
    gated = True  # started ahead, waiting at its gate (False: run_pair's own, started at once)
    since = 0.0
    _stack: contextlib.ExitStack
    ent: Container
    ent_in: Path
    ent_out: Path

    _ent_seen = False  # the entry's gate frame has come (kept: the stream only grows)

    def _gates(self) -> list[tuple[Container, bool, Path]]:
        """Each container, whether it is at its gate, and its input folder."""
        raise NotImplementedError

    def _start_entry(self, setup: WorkerSetup, batch: Batch, *, gated: bool) -> None:
        """The batch's entry: its input and output folders and its container, on `_stack`."""
        self.ent_in = self._stack.enter_context(entry_in(batch.kernel_file))
        self.ent_out = self._stack.enter_context(capped_dir(batch.entry_limits.output_bytes))
        self.ent = self._stack.enter_context(setup.engine.start(entry_spec(
            setup, batch.image, self.ent_in, self.ent_out, batch.entry_limits, batch.problem,
            gated=gated)))

    def _entry_at_gate(self, ent: Container) -> bool:
        if not self._ent_seen:
            self._ent_seen = read_frames(ent.stdout()).standby is not None
        return self._ent_seen

    def idle(self) -> bool:
        """Whether none of its containers can still be working before its gate: each is
        there, or has exited. Containers that have not got there within GATE_WAIT_S are
        dropped."""
        if self.closed or self.released:
            return True
        if all(at or not c.running() for c, at, _in in self._gates()):
            return True
        if time.monotonic() - self.since > GATE_WAIT_S:
            self.close()
            return True
        return False

    def settle(self) -> None:
        """Wait until `idle` (at most GATE_WAIT_S from the start)."""
        while not self.idle():
            time.sleep(POLL_S)

    def usable(self) -> bool:
        """Still open, every container at its gate and running."""
        return not self.closed and all(at and c.running() for c, at, _in in self._gates())

    def release(self) -> None:
        """Open the gates; the containers' wall clocks start now."""
        if self.released:
            return
        self.released = True
        for c, _at, in_dir in self._gates():
            place(in_dir, START_FILE, {})
            c.rebase()

    def close(self) -> None:
        """Stop and remove its containers and their folders (what they wrote is gone)."""
        if not self.closed:
            self.closed = True
            self._stack.close()


class Standby(_Gated):
    """A batch's reference and entry containers, with their folders and the reference's job.

    Gated (a standby, started while the batch before it still runs): each harness makes its
    cold imports (on a GPU, the entry's harness its CUDA and profiler set-up too) and waits
    at its gate (harness.main._standby) until `release`. Before the gate nothing loads the
    entry's file or reads an input, and run_pair holds the timed loops of the batch it runs
    beside until this one is `idle`, so that nothing of it but a sleeping poll shares the
    host with a timed loop. The wait is not counted against either container's wall-clock
    limit (Container.rebase). Ungated: what run_pair starts itself when it has no
    standby.
    """

    def __init__(self, setup: WorkerSetup, batch: Batch, *, gated: bool = True) -> None:
        self.batch = batch
        self.gated = gated
        self.hold = setup.timing is not None  # the reference's timed loop waits for GO_FILE
        self._stack = contextlib.ExitStack()
        try:
            self.ref_in = self._stack.enter_context(fresh_in_dir())
            self.ref_out = self._stack.enter_context(capped_dir(batch.ref_limits.output_bytes))
            write_job(self.ref_in, reference_job(setup, batch.cases, batch.problem,
                                                 hold=self.hold))
            self.ref = self._stack.enter_context(setup.engine.start(container_spec(
                setup, batch.image, Role.REFERENCE, io_binds(self.ref_in, self.ref_out),
                batch.ref_limits, gated=gated)))
            self._start_entry(setup, batch, gated=gated)
        except BaseException:
            self._stack.close()
            raise
        self.since = time.monotonic()
        self.released = not gated

    def _gates(self) -> list[tuple[Container, bool, Path]]:
        return [(self.ref, (self.ref_out / GATE_FILE).exists(), self.ref_in),
                (self.ent, self._entry_at_gate(self.ent), self.ent_in)]


class EntryStandby(_Gated):
    """A batch's entry container alone, started ahead and gated as in Standby: for a batch
    whose reference a round has computed already (cached_entry)."""

    def __init__(self, setup: WorkerSetup, batch: Batch) -> None:
        self.batch = batch
        self._stack = contextlib.ExitStack()
        try:
            self._start_entry(setup, batch, gated=True)
        except BaseException:
            self._stack.close()
            raise
        self.since = time.monotonic()

    def _gates(self) -> list[tuple[Container, bool, Path]]:
        return [(self.ent, self._entry_at_gate(self.ent), self.ent_in)]


@dataclass(frozen=True, kw_only=True)
class Pair:
    reference: Evidence
    ref_dir: Path
    # None: the reference failed while the entry's container ran beside it. That container
    # was stopped; grade the batch again one container after the other (an entry must not
    # escape its verdict by making the reference fail, with a GPU memory bomb at import say).
    entry: Evidence | None
    entry_limits: Limits  # what the entry ran under (run_pair may have had to raise them)


@dataclass(frozen=True)
class Beside:
    """The standbys started with a batch (the next batches', worker.Worker.depth of them):
    its timed loops wait until every one of them is idle."""

    standbys: tuple[Standby | EntryStandby, ...]

    def idle(self) -> bool:
        return all([s.idle() for s in self.standbys])  # each polled: one too slow is dropped

    def settle(self) -> None:
        for s in self.standbys:
            s.settle()


@contextmanager
def run_pair(setup: WorkerSetup, batch: Batch, *, standby: Standby | None = None,
             beside: Beside | None = None) -> Iterator[Pair]:
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
    its warm-up and traced calls, waits for GO before its timed loops.

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
        st = standby or stack.enter_context(contextlib.closing(Standby(setup, batch, gated=False)))
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
    armed: bool = False  # the entry's clock has started (_armed)

    def exited(self) -> bool:
        return self.ref_exit is not None and self.ent_exit is not None

    def look(self) -> None:
        self.ref_exit = self.ref_exit or self.st.ref.poll()
        self.ent_exit = self.ent_exit or self.st.ent.poll()
        if self.ent_exit is None:
            self.armed = _armed(self.st.ent, self.armed)

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
            needed = batching.entry_limits(counted, st.ref_out, [c.id for c in st.batch.cases])
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
        ready = not self.delivered and self.ent_exit is None and _ready(st.ent)
        if not ready or self.outgrown is not None:
            return
        if not self.cases_ok:
            st.ent.extend(step)
            return
        # With timed loops, the job goes out at once and only they wait for `beside`: its
        # warm-up and traced calls run beside the standby's imports.
        self.delivered = True
        self.timing_held = beside is not None and st.hold and not beside.idle()
        deliver(self.setup, st.batch.cases, st.batch.problem, st.ref_out, st.ent_in,
                hold=self.timing_held)

    def release_entry_timing(self, step: float) -> None:
        """A held entry's timed loops go once `beside` is idle; until then, traced and
        waiting, it is held."""
        if not self.timing_held or self.ent_exit is not None:
            return
        assert self.beside is not None
        self.timing_held = _still_held(self.beside, self.st.ent, self.st.ent_in, step)

    def release_reference_timing(self, step: float) -> None:
        """A held reference times once the entry has exited and `beside` is idle; until then,
        its cases done, it is held."""
        st, beside = self.st, self.beside
        if not (st.hold and self.cases_ok) or self.released:
            return
        if self.ent_exit is not None and (beside is None or beside.idle()):
            self.released = True
            place(st.ref_in, GO_FILE, {})
        elif self.ref_exit is None:
            st.ref.extend(step)

    def pairs(self) -> Iterator[Pair]:
        """The batch's Pair once both have exited; an entry whose outputs outgrew its counted
        caps runs again first, after the reference, under the caps they call for."""
        st, batch = self.st, self.st.batch
        assert self.ref_exit is not None and self.ent_exit is not None
        reference = Evidence(exit=self.ref_exit, out=read_out_dir(st.ref_out))
        if self.outgrown is not None:
            if self.beside is not None:
                self.beside.settle()
            with entry_container(self.setup, batch.image, batch.kernel_file, batch.cases,
                                 st.ref_out, self.outgrown, batch.problem) as entry:
                yield Pair(reference=reference, ref_dir=st.ref_out, entry=entry,
                           entry_limits=self.outgrown)
            return
        yield Pair(reference=reference, ref_dir=st.ref_out,
                   entry=entry_run(self.ent_exit, st.ent_out), entry_limits=batch.entry_limits)


def _cases_ok(path: Path, cases: list[Case], *, done: bool) -> bool | None:
    """Whether the reference's case results at `path` say every case is done and ok; None
    while there are none yet (or, with `done`, never will be: read as failed by the caller
    once the container has exited)."""
    if not done or not path.is_file():
        return None
    result = read_result(path)
    if result is None:
        return False
    return all(result.cases.get(c.id) is not None and result.cases[c.id].ok for c in cases)

