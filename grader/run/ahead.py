"""A batch's containers started ahead of their turn, beside the batch before: both (Standby),
or the entry's alone where a round has the reference already (EntryStandby), the entry's a
worker of its serving container where there is one (run.served); a reference alone
(ReferenceStandby: a light-kept batch's, beside its own entry; a prepared round's next
batch's); and the standbys a running batch waits for before its timed loops (Beside).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from concurrent.futures import Future, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.errors import InfraError
from grader.formats.problem import Problem
from grader.harness.protocol import GATE_FILE, GO_FILE, START_FILE
from grader.model.channel import read_frames
from grader.model.evidence import read_out_dir
from grader.model.runs import Case, Evidence
from grader.run.batch import Batch
from grader.run.jobs import (
    WorkerSetup,
    container_spec,
    entry_in,
    entry_spec,
    fresh_in_dir,
    io_binds,
    place,
    reference_job,
    reference_run_job,
    write_job,
)
from grader.run.served import Server, Slot
from grader.sandbox.capped import capped_dir
from grader.sandbox.engine import POLL_S, Container
from grader.sandbox.spec import Limits, Role

# The longest a standby's containers may take to reach their gates (a cold `import torch` on a
# loaded host is seconds): one that has not is dropped, and its batch starts afresh.
GATE_WAIT_S = 300.0


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

    def _start_entry(self, setup: WorkerSetup, batch: Batch, *, gated: bool,
                     server: Server | None) -> None:
        """The batch's entry: its input and output folders and its container, on `_stack`;
        with `server` (the entry's serving container, run.served), a worker of it instead,
        always gated (released at once when not `gated`), its folders the server's."""
        if server is not None:
            slot = server.spawn(batch)
            self._stack.callback(slot.close)
            self.ent, self.ent_in, self.ent_out = slot, server.in_dir, slot.out_dir
            return
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

    def release(self, batch: Batch | None = None) -> None:
        """Open the gates; the containers' wall clocks start now. A served entry's worker
        takes its serving container's folders first, under `batch`'s limits when given (the
        same batch, its caps raised since it was started)."""
        if self.released:
            return
        self.released = True
        for c, _at, in_dir in self._gates():
            if isinstance(c, Slot):
                c.release(batch)
                continue
            place(in_dir, START_FILE, {})
            c.rebase()

    @property
    def served(self) -> bool:
        """Whether its entry is a worker of a serving container."""
        return isinstance(self.ent, Slot)

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
    standby. With `server`, the entry is a worker of the entry's serving container
    (run.served) rather than a container of its own.
    """

    def __init__(self, setup: WorkerSetup, batch: Batch, *, gated: bool = True,
                 server: Server | None = None) -> None:
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
            self._start_entry(setup, batch, gated=gated, server=server)
        except BaseException:
            self._stack.close()
            raise
        self.since = time.monotonic()
        self.released = not gated
        if not gated and isinstance(self.ent, Slot):  # a served worker always has a gate
            self.ent.release()

    def _gates(self) -> list[tuple[Container, bool, Path]]:
        return [(self.ref, (self.ref_out / GATE_FILE).exists(), self.ref_in),
                (self.ent, self._entry_at_gate(self.ent), self.ent_in)]


class EntryStandby(_Gated):
    """A batch's entry container alone (or, with `server`, a worker of the entry's serving
    container), started ahead and gated as in Standby: for a batch whose reference a round
    has computed already (cached_entry)."""

    def __init__(self, setup: WorkerSetup, batch: Batch, *, server: Server | None = None
                 ) -> None:
        self.batch = batch
        self._stack = contextlib.ExitStack()
        try:
            self._start_entry(setup, batch, gated=True, server=server)
        except BaseException:
            self._stack.close()
            raise
        self.since = time.monotonic()

    def _gates(self) -> list[tuple[Container, bool, Path]]:
        return [(self.ent, self._entry_at_gate(self.ent), self.ent_in)]


class ReferenceStandby(_Gated):
    """A reference container alone on `cases`, started gated, its job as reference_run's
    (run.sequential; `topup`: cases only, no timed loop): a light-kept batch's correctness
    outputs (grading.reuse), started beside the batch's entry and run once the entry has
    exited; or a prepared round's next batch of a problem (grading.prepare), started beside
    the batch before. It makes its cold imports there and waits at its gate; `run` releases
    it, so that its container's start is not in its batch's path."""

    def __init__(self, setup: WorkerSetup, image: str, cases: list[Case], limits: Limits,
                 problem: Problem | None = None, *, topup: bool = False) -> None:
        self._stack = contextlib.ExitStack()
        try:
            self.ref_in = self._stack.enter_context(fresh_in_dir())
            self.ref_out = self._stack.enter_context(capped_dir(limits.output_bytes))
            write_job(self.ref_in, reference_run_job(setup, cases, problem, topup=topup))
            self.ref = self._stack.enter_context(setup.engine.start(container_spec(
                setup, image, Role.REFERENCE, io_binds(self.ref_in, self.ref_out), limits,
                gated=True)))
        except BaseException:
            self._stack.close()
            raise
        self.since = time.monotonic()

    def _gates(self) -> list[tuple[Container, bool, Path]]:
        return [(self.ref, (self.ref_out / GATE_FILE).exists(), self.ref_in)]

    def run(self) -> Evidence | None:
        """Its run, once it has been at its gate: released now (its wall clock from now) and
        waited for; its folder stays until `close`. None (and closed) when it never got
        there within GATE_WAIT_S or died on the way: its batch runs a reference afresh."""
        self.settle()
        if not self.usable():
            self.close()
            return None
        self.release()
        return Evidence(exit=self.ref.wait(), out=read_out_dir(self.ref_out))


def reference_ahead(setup: WorkerSetup, image: str, cases: list[Case], limits: Limits,
                    problem: Problem | None = None, *, topup: bool = False, label: str,
                    say: Callable[[str], None]) -> ReferenceStandby | None:
    """A ReferenceStandby on `cases`, or None when it cannot start (`say` says why, under
    `label`): not its batch's failure, whose reference then starts in its turn
    (run.sequential.reference_after)."""
    try:
        return ReferenceStandby(setup, image, cases, limits, problem, topup=topup)
    except Exception as exc:
        why = exc.message if isinstance(exc, InfraError) else f"{type(exc).__name__}: {exc}"
        say(f"{label}: cannot start its reference ahead: {why}")
        return None


@dataclass(frozen=True)
class Beside:
    """What runs beside a batch until its timed loops may start: the standbys started with
    it (the next batches', worker.Worker.depth of them), idle once each is at its gate, and
    `after`, the host's judging of the batch before (grading/judging.py, issue 32), idle once
    done."""

    standbys: tuple[Standby | EntryStandby | ReferenceStandby, ...] = ()
    after: tuple[Future[Any], ...] = ()

    def idle(self) -> bool:
        # each standby polled: one too slow is dropped
        return all([s.idle() for s in self.standbys]) and all(f.done() for f in self.after)

    def settle(self) -> None:
        for s in self.standbys:
            s.settle()
        wait(self.after)


def still_held(beside: Beside, ent: Container, in_dir: Path, step: float) -> bool:
    """One look at an entry whose timed loops wait for `beside`: its go once every standby
    there is idle (False: no longer held); until then, traced and waiting, the `step` seconds
    since the last look are not its own time (Container.extend)."""
    if beside.idle():
        place(in_dir, GO_FILE, {})
        return False
    if read_frames(ent.stdout()).traced:
        ent.extend(step)
    return True
