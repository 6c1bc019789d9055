"""An entry's serving container (issue 32): one container runs many of an entry's batches, each
in a fresh worker process its warden starts when the host asks (harness/serve.py), instead of a
container a batch.

What a batch of its own container paid, a served batch does not: the container's start and
removal, and the cold imports (the warden forks each worker from a zygote that has imported
torch and Triton and never loads entry code). What it still pays is its own process's CUDA
context and profiler set-up, made at its gate while the batch before still runs, as a
standby container's is (run.ahead).

The trust boundary is between the entry and everything else, not between two batches of one
entry; even so nothing one batch leaves can reach the next: the warden relays a worker's
result only once every process of its batch is dead and the scratch places it could write
(/tmp, /dev/shm, System V IPC) are empty, and the host moves the batch's outputs out of the
container's view before it releases the next worker (docs/security.md). A batch that ends
any other way (a crash, a timeout, the memory limit, tampering) ends the container: that
batch's evidence is the container's exit, exactly as in a container of its own, and the
batches after it start in a new serving container.

Host side of the protocol in harness/protocol.py: the host writes IN/SERVE_DIR/spawn_file(w)
for worker w (it sets itself up and waits at its gate), and start_file(w) to release it; the
warden tags every frame it relays with the worker's number (WORKER_KEY). A `Slot` is one
worker seen as an engine.Container, so that the run layer's protocols (ahead.py, cached.py,
sequential.EntryRun) drive a served batch as they drive a container.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from grader.harness.protocol import (
    GONE,
    KERNEL_FILE,
    RESULT,
    SERVE_DIR,
    STDOUT_BYTES,
    WORKER_KEY,
    spawn_file,
    start_file,
)
from grader.model.runs import ExitState
from grader.run.batch import Batch
from grader.run.jobs import CODE, SLACK, WorkerSetup, entry_args, place, served_spec
from grader.sandbox.capped import can_mount, private_dir, resize
from grader.sandbox.engine import POLL_S, poll_to_exit
from grader.sandbox.spec import Limits

# Batches one serving container runs; then the next takes over. Its log file holds every
# batch's frames and logs (sized for this many), and no container lives for a whole round.
SERVE_BATCHES = 8
# Memory beside the running batch's own limit, per process that waits beside it (the zygote,
# each worker at its gate): their pages are mostly the zygote's, shared until written.
BESIDE_MEMORY = 2 << 30
# The serving container's own deadline: each batch has its own (Slot), this only ends a
# container the host has forgotten.
SERVE_WALL_S = 24 * 3600.0
OUT_OWNER = 65534  # the container's user (spec.ContainerSpec.user)
CURRENT = "current"  # in the output root: the folder bound at protocol.OUT


class Server:
    """One serving container and its two host folders: the input folder (a root-owned tmpfs,
    read-only in the container, holding the running batch's kernel file and job and the
    requests in SERVE_DIR) and the output root (a tmpfs whose CURRENT folder is the
    container's OUT; each finished batch's outputs are moved beside it, out of the
    container's view, until its judging is done)."""

    def __init__(self, setup: WorkerSetup, image: str, base: Limits, *, beside: int) -> None:
        """`base`: the entry's limits before any batch's own (a batch's memory is set when
        it is released); `beside`: how many workers may wait at their gates at once."""
        self.setup, self.base = setup, base
        self.beside = beside
        self.spawned = 0
        self.active: Slot | None = None
        self.slots: set[Slot] = set()
        self.retired = False
        self._stdout = (0.0, b"")
        self._frames = FrameLog()
        self._frames_lock = threading.Lock()
        # Slots are closed on the judging thread (grading/judging.py) once their batch is
        # judged, while the worker's thread spawns and releases others.
        self._lock = threading.Lock()
        self._closing = False
        self._stack = contextlib.ExitStack()
        try:
            self.in_dir = self._stack.enter_context(private_dir(SLACK))
            for sub in (CODE, SERVE_DIR):
                (self.in_dir / sub).mkdir(mode=0o755)
            self.out_root = self._stack.enter_context(private_dir(base.output_bytes + SLACK))
            self.out_dir = self.out_root / CURRENT
            self.out_dir.mkdir(mode=0o700)
            if can_mount():
                os.chown(self.out_dir, OUT_OWNER, OUT_OWNER)
            else:  # a plain folder: the container's user must write it all the same
                os.chmod(self.out_dir, 0o777)
            self.memory = base.memory_bytes + (beside + 1) * BESIDE_MEMORY
            limits = replace(base, wall_s=SERVE_WALL_S, setup_s=0.0,
                             pids=base.pids * (beside + 2),
                             memory_bytes=self.memory,
                             log_bytes=base.log_bytes * SERVE_BATCHES)
            self.container = self._stack.enter_context(setup.engine.start(served_spec(
                setup, image, self.in_dir, self.out_dir, limits,
                stdout_bytes=STDOUT_BYTES * SERVE_BATCHES)))
        except BaseException:
            self._stack.close()
            raise

    # -- what the worker asks ------------------------------------------------------------------
    def usable(self) -> bool:
        """Whether it can take one more batch."""
        return (not self.retired and self.spawned < SERVE_BATCHES
                and self.container.running())

    def spawn(self, batch: Batch) -> Slot:
        """A worker for `batch`, setting itself up towards its gate."""
        w = self.spawned + 1
        place(self.in_dir / SERVE_DIR, spawn_file(w),
              {"args": list(entry_args(batch.problem)),
               "log_bytes": batch.entry_limits.log_bytes})
        self.spawned = w
        slot = Slot(self, w, batch)
        with self._lock:
            self.slots.add(slot)
        return slot

    def retire(self) -> None:
        """Take no more batches; the container and its folders go once no slot is open."""
        self.retired = True
        self._maybe_close()

    # -- what its slots do ---------------------------------------------------------------------
    def stdout(self, *, fresh: bool = False) -> bytes:
        """The container's stdout, read at most once a poll period (`fresh`: read now, as
        after the container's exit, when all of it is wanted)."""
        at, raw = self._stdout
        if fresh or time.monotonic() - at >= POLL_S / 2:
            raw = self.container.stdout()
            self._stdout = (time.monotonic(), raw)
        return raw

    def frames(self, worker: int, *, untagged: bool, fresh: bool = False
               ) -> tuple[bytes, bool, bool]:
        """FrameLog.of on the container's stdout as it now stands."""
        raw = self.stdout(fresh=fresh)
        with self._frames_lock:  # slots are looked at from the worker's and judging threads
            return self._frames.update(raw).of(worker, untagged=untagged)

    def activate(self, slot: Slot) -> None:
        """Make `slot`'s batch the running one: its kernel file alone in the input folder,
        room for its outputs, its memory limit, then its worker's release."""
        if self.active is not None and not self.active.done:
            raise RuntimeError("a serving container runs one batch at a time")
        batch = slot.batch
        for path in self.in_dir.iterdir():  # the batch before's job, recipe and go
            if path.name not in (CODE, SERVE_DIR):
                if path.is_dir():
                    shutil.rmtree(path)
                else:
                    path.unlink()
        kernel = self.in_dir / CODE / KERNEL_FILE
        kernel.unlink(missing_ok=True)
        shutil.copyfile(batch.kernel_file, kernel)
        os.chmod(kernel, 0o644)
        resize(self.in_dir, _used(self.in_dir) + SLACK)
        resize(self.out_root, _used(self.out_root) + batch.entry_limits.output_bytes)
        # Raised, never lowered: lowering a cgroup's limit under what its processes hold
        # (the zygote, the workers at their gates) would have the kernel kill one of them.
        with self._lock:
            waiting = sum(1 for s in self.slots if s is not slot and not s.done)
        memory = batch.entry_limits.memory_bytes + (waiting + 1) * BESIDE_MEMORY
        if memory > self.memory:
            self.container.set_memory(memory)
            self.memory = memory
        self.active = slot
        place(self.in_dir / SERVE_DIR, start_file(slot.worker), {})

    def kept_dir(self, worker: int) -> Path:
        """Where worker `worker`'s outputs go once its batch is over: the host's alone."""
        path = self.out_root / f"batch-{worker}"
        path.mkdir(mode=0o700, exist_ok=True)
        return path

    def take_outputs(self, slot: Slot) -> None:
        """The running batch is over: what it left in OUT moves to its slot's folder, where
        the container's user cannot reach it (the output root is root's, the folder 0700).
        Nothing for a slot that never ran."""
        if self.active is not slot:
            return
        for path in list(self.out_dir.iterdir()):
            os.replace(path, slot.out_dir / path.name)
        self.active = None

    def close_slot(self, slot: Slot) -> None:
        """A slot's folder is read: free it. A slot dropped before its batch ran leaves a
        worker at its gate that nothing will release: the container retires."""
        with self._lock:
            if slot not in self.slots:
                return
            self.slots.discard(slot)
            if not slot.released and not slot.done:
                self.retired = True
        shutil.rmtree(slot.out_dir, ignore_errors=True)
        self._maybe_close()

    def _maybe_close(self) -> None:
        """Its container and folders go, once, when it is retired and no slot is open."""
        with self._lock:
            if not self.retired or self.slots or self._closing:
                return
            self._closing = True
        self._stack.close()


def _used(path: Path) -> int:
    """What the files under `path` hold (a tmpfs's fill). A slot's folder may be removed
    meanwhile (its judging done, on the judging thread): what is gone holds nothing."""
    total = 0
    for f in path.rglob("*"):
        with contextlib.suppress(FileNotFoundError):
            if f.is_file():
                total += f.stat().st_size
    return total


class FrameLog:
    """A serving container's stdout as lines parsed once each: every poll of every slot used
    to decode all of it again (each batch's frames stay, megabytes of records by the last of
    SERVE_BATCHES batches), so that the host's looks cost as much as everything the container
    had written (bench/serve_poll.py). `update` with the stdout as it now stands (it only
    grows), then `of` a worker."""

    def __init__(self) -> None:
        self._at = 0  # bytes of the stdout parsed: whole lines
        # (the worker's key, or None; the frame's kind, or None for a line that is not a
        # frame; the line as its worker's own container would have written it)
        self._lines: list[tuple[Any, Any, bytes]] = []

    def update(self, raw: bytes) -> FrameLog:
        if len(raw) < self._at:  # not the stdout parsed so far: from its start again
            self._at, self._lines = 0, []
        end = raw.rfind(b"\n", self._at) + 1
        for line in raw[self._at:end].split(b"\n")[:-1]:
            try:
                frame = json.loads(base64.b64decode(line, validate=True))
            except (binascii.Error, ValueError, RecursionError):
                self._lines.append((None, None, line))  # not the warden's
                continue
            if not isinstance(frame, dict):
                continue
            who = frame.pop(WORKER_KEY, None)
            self._lines.append((who, frame.get("frame"), base64.b64encode(
                json.dumps(frame, separators=(",", ":")).encode())))
        self._at = max(self._at, end)
        return self

    def of(self, worker: int, *, untagged: bool) -> tuple[bytes, bool, bool]:
        """Worker `worker`'s frames, as a container of its own would have written them (the
        worker's key taken off), whether the warden said it is gone, and whether its result
        is among them. `untagged`: frames without a worker's key are its too (the warden's
        last frame when it ends the container over the running batch), and so are lines
        that are not frames (the reader flags them on the running batch)."""
        out = bytearray()
        gone = result = False
        for who, kind, line in self._lines:
            if kind is None and who is None:
                if untagged:
                    out += line + b"\n"
            elif who == worker and kind == GONE:
                gone = True
            elif who == worker or (who is None and untagged):
                out += line + b"\n"
                result = result or kind == RESULT
        return bytes(out), gone, result


class Slot:
    """One worker of a serving container as an engine.Container: its own frames, clock and
    deadline (the batch's limits), its own output folder once its batch is over. Its kill
    ends the serving container (only a batch that ends with its result leaves it running)."""

    def __init__(self, server: Server, worker: int, batch: Batch) -> None:
        self.server, self.worker, self.batch = server, worker, batch
        self.limits = batch.entry_limits
        self.out_dir = server.kept_dir(worker)
        self.released = False
        self.done = False
        self.started = time.monotonic()
        self.deadline = self.started + self.limits.setup_s + self.limits.wall_s
        self.held_s = 0.0
        self._since = time.time()
        self._exit: ExitState | None = None

    # -- the serving side ----------------------------------------------------------------------
    def release(self, batch: Batch | None = None) -> None:
        """Its batch's turn: the serving container's folders made its, its gate opened.
        `batch`: the same batch under the limits it runs with (raised since its spawn)."""
        if batch is not None:
            self.batch, self.limits = batch, batch.entry_limits
        self.server.activate(self)
        self.released = True
        self._since = time.time()
        self.rebase()

    def gone(self) -> bool:
        """Whether its worker ended before its release (the warden's GONE frame)."""
        return self.server.frames(self.worker, untagged=False)[1]

    def close(self) -> None:
        self.server.close_slot(self)

    # -- engine.Container ----------------------------------------------------------------------
    def running(self) -> bool:
        return self._exit is None and not self.gone() and self.server.container.running()

    def poll(self) -> ExitState | None:
        if self._exit is not None:
            return self._exit
        mine, _gone, result = self.server.frames(self.worker, untagged=self.released)
        if self.released and result:
            self._end(self._state(0, mine, timed_out=False, oom=False))
        elif (state := self.server.container.poll()) is not None:
            # The container ended (over this batch, or before it ran): its exit is this
            # batch's, and it takes no more batches.
            mine = self.server.frames(self.worker, untagged=self.released, fresh=True)[0]
            self.server.retire()
            self._end(replace(state, stdout=mine, wall_s=self._wall(), held_s=self.held_s,
                              logs=self._logs()[0] if self.released else state.logs))
        elif time.monotonic() >= self.deadline:
            at = time.monotonic()
            self.server.container.last_words()
            self.server.retire()
            self.server.container.kill()
            mine = self.server.frames(self.worker, untagged=self.released, fresh=True)[0]
            self._end(self._state(None, mine, timed_out=True, oom=False, at=at))
        return self._exit

    def wait(self, on_poll: Callable[[], None] | None = None,
             wall_s: float | None = None) -> ExitState:
        if wall_s is not None:
            self.deadline = self.started + wall_s
        return poll_to_exit(self.poll, on_poll)

    def kill(self) -> None:
        if self._exit is None:
            self.server.retire()
            self.server.container.kill()

    def extend(self, seconds: float) -> None:
        self.held_s += seconds
        self.deadline += seconds

    def rebase(self) -> None:
        self.started = time.monotonic()
        self.deadline = self.started + self.limits.wall_s

    def stdout(self) -> bytes:
        return self.server.frames(self.worker, untagged=self.released)[0]

    def logs_since(self, since: float) -> tuple[str, bool]:
        return self.server.container.logs_since(max(since, self._since))

    def last_words(self) -> None:
        self.server.container.last_words()

    def set_memory(self, memory_bytes: int) -> None:
        self.server.container.set_memory(memory_bytes)

    # -- its end -------------------------------------------------------------------------------
    def _wall(self, at: float | None = None) -> float:
        return (time.monotonic() if at is None else at) - self.started - self.held_s

    def _logs(self) -> tuple[str, bool]:
        text, cut = self.server.container.logs_since(self._since)
        if len(text.encode()) > self.limits.log_bytes:
            return text.encode()[:self.limits.log_bytes].decode("utf-8", "replace"), True
        return text, cut

    def _state(self, code: int | None, stdout: bytes, *, timed_out: bool, oom: bool,
               at: float | None = None) -> ExitState:
        logs, cut = self._logs()
        return ExitState(exit_code=code, timed_out=timed_out, oom_killed=oom,
                         wall_s=self._wall(at), held_s=self.held_s, logs=logs,
                         logs_truncated=cut, stdout=stdout)

    def _end(self, state: ExitState) -> None:
        self._exit = state
        self.done = True
        self.server.take_outputs(self)


class Serving:
    """A worker's serving containers: the one that takes its next batch, started when first
    needed and replaced once it can take no more (SERVE_BATCHES, or its container ended).
    One it replaced goes once the slots it still has are closed."""

    def __init__(self, setup: WorkerSetup, base: Limits, *, beside: int) -> None:
        self.setup, self.base, self.beside = setup, base, beside
        self.current: Server | None = None

    def server(self, image: str) -> Server:
        """The serving container for the next batch (`image`: any problem image of the
        worker's runtime: the entry's container masks the problem's own files)."""
        if self.current is not None and not self.current.usable():
            self.current.retire()
            self.current = None
        if self.current is None:
            self.current = Server(self.setup, image, self.base, beside=self.beside)
        return self.current

    def close(self) -> None:
        if self.current is not None:
            self.current.retire()
            self.current = None
