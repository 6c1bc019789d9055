"""An entry's serving container (issue 32): its warden serves all of the entry's batches, each
in a fresh worker process.

The container (`boot.py serve`, hardened as an entry's, the warden its pid 1) starts worker
w when the host writes IN/SERVE_DIR/spawn_file(w) (w = 1, 2, ... in order; `{"args": the
harness's arguments, "log_bytes": its log budget}`), forked by the zygote (zygote.py) or, while
none is ready, by fork and exec as warden.py starts one. Each is a standby (STANDBY_ENV,
WORKER_ENV) gated on start_file(w); its frames are checked by a Protocol of its own and relayed
tagged `"worker": w`, its output logged within its own budget. The host releases one worker
at a time, the active one (a frame after `standby`); the others are gated (harness code only).

On the active worker's `result`, before the frame goes out:
1. every process of the container but the warden, the zygote and the gated workers (known by
   pid and start time, so a reused pid is not spared) is killed and reaped, scanning /proc
   until a scan finds none (what forks meanwhile is found by the next): nothing of the batch
   (a daemon, a thread, a finaliser) runs on beside the next batch or changes OUT;
2. everything under protocol.SCRATCH (/tmp, /dev/shm, /dev/mqueue) is removed and the
   container's SysV IPC objects with it: what a batch leaves there (a compiled kernel in
   Triton's cache, a file, a segment) cannot reach the next batch's verdict or timing;
3. the survivors are checked as a batch may have left them (the same uid may signal, renice,
   re-affine or prlimit them): a stopped one is continued; a gated worker whose fingerprint
   (sweep.fingerprint) is not the warden's own is killed and reported `gone`, a zygote's is
   replaced; if the warden's own changed, the container ends after this result;
4. only then the `result` goes out. After the host has read it, nothing of that batch runs
   or remains in the container but what it wrote in OUT (which the host moves away).
The active worker ending otherwise (an exit or a signal, a tampering frame, its channel
closed) ends the container as warden.py does (everything killed, its `tampering` frame, its
exit status), after a `gone` frame for each gated worker; a gated worker that ends, or goes
wrong, before its release is reaped and reported `gone`, and the container serves on.

What serving gives up, and why it is safe: docs/security.md. Standard library only.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import time
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from .procs import exec_with, no_dump, pipes, reaped, write_all
from .protocol import (
    CHANNEL_ENV,
    ENTRY_MODE,
    FRAME_FD,
    FRAME_MAX,
    GONE,
    IN,
    RESULT,
    SCRATCH,
    SERVE_DIR,
    STACK_SIGNAL,
    STANDBY,
    STANDBY_ENV,
    TAMPERING,
    WORKER_ENV,
    WORKER_KEY,
    ZYGOTE_MODE,
    spawn_file,
)
from .sweep import (
    PR_SET_CHILD_SUBREAPER,
    Ident,
    difference,
    empty,
    fingerprint,
    ident,
    kill_all_but,
    prctl,
    remove_sysv_ipc,
    stopped,
    top,
)
from .warden import (
    EXIT_GRACE_S,
    REAP_S,
    Protocol,
    Relay,
    Tampering,
    encode_frame,
)
from .zygote import Zygotes

POLL_S = 0.05  # the host's spawn requests are looked for at least this often
IDLE_S = 600.0  # no worker and no request for this long: the host is gone (main.STANDBY_WAIT_S)
AFTER_RESULT = "bytes on the frame channel after the result frame"


def _why(reason: str) -> dict[str, Any]:
    """A gone or tampering frame's body."""
    return {"data": {"reason": reason[:2000]}}


@dataclass(eq=False)
class Worker:
    number: int
    pid: int
    ident: Ident | None
    protocol: Protocol
    relay: Relay
    fds: list[int]  # the read ends of its frame pipe, stdout and stderr
    buf: bytearray = field(default_factory=bytearray)
    status: int | None = None  # its exit status, once reaped
    closed_at: float | None = None  # when its frame pipe closed

    @property
    def released(self) -> bool:
        return any(kind != STANDBY for kind in self.protocol.seen)


class _End(Exception):
    """The container ends: `worker`'s end (None: no batch's), then `frame` if any."""

    def __init__(self, worker: Worker | None, frame: tuple[str, dict[str, Any]] | None
                 ) -> None:
        super().__init__("end")
        self.worker, self.frame = worker, frame


class Server:
    def __init__(self, boot: list[str]) -> None:
        self.pid1 = os.getpid() == 1
        if not self.pid1:  # outside a container, orphans come back as they do to a pid 1
            prctl(PR_SET_CHILD_SUBREAPER, 1)
        self.boot = boot  # [python, -I, boot.py]
        self.baseline = fingerprint("self")  # what every process here starts with
        self.tops = [t for t in map(top, SCRATCH) if t is not None]
        self.sel = selectors.DefaultSelector()
        self.workers: dict[int, Worker] = {}
        self.by_fd: dict[int, Worker] = {}
        self.next = 1
        self.zygotes = Zygotes([*self.boot, ZYGOTE_MODE], self.sel)
        self.last = time.monotonic()
        self.ending = False
        signal.signal(signal.Signals[STACK_SIGNAL], self._pass_on)
        self.zygotes.start()

    def _pass_on(self, signum: int, _frame: Any) -> None:
        """The host's STACK_SIGNAL, to the active worker (if none, to nothing)."""
        for w in list(self.workers.values()):
            if w.released and w.status is None:
                with suppress(ProcessLookupError):
                    os.kill(w.pid, signum)

    def run(self) -> int:
        try:
            while True:
                self._requests()
                for key, _ in self.sel.select(timeout=POLL_S):
                    self._readable(key.fd)
                self._reap()
                self._ended()
                if self.workers:
                    self.last = time.monotonic()
                elif time.monotonic() - self.last > IDLE_S:
                    raise _End(None, None)
        except _End as end:
            return self._end(end)

    # -- workers --------------------------------------------------------------------------
    def _requests(self) -> None:
        """Starts each worker the host asked for, in order."""
        while True:
            try:
                with open(os.path.join(IN, SERVE_DIR, spawn_file(self.next)), "rb") as f:
                    raw = f.read(1 << 16)
            except OSError:  # not there yet
                return
            number, self.next = self.next, self.next + 1
            try:
                request = json.loads(raw)
                args, log_bytes = [str(a) for a in request["args"]], int(request["log_bytes"])
            except (ValueError, KeyError, TypeError) as exc:
                self._send(number, GONE, _why(f"a spawn request it cannot read ({exc})"))
                continue
            self._start(number, args, log_bytes)

    def _start(self, number: int, args: list[str], log_bytes: int) -> None:
        token = os.urandom(16).hex()
        child, (frames_r, out_r, err_r) = pipes(token)
        env = {CHANNEL_ENV: str(FRAME_FD), STANDBY_ENV: "1", WORKER_ENV: str(number)}
        try:
            pid = self.zygotes.fork(child, env, args)
            if pid is None:
                pid = exec_with([*self.boot, ENTRY_MODE, *args], child,
                                {**os.environ, **env}, False)
        except OSError as exc:  # the container's limits (pids, fds)
            for fd in (frames_r, out_r, err_r):
                os.close(fd)
            self._send(number, GONE, _why(f"the warden could not start it ({exc})"))
            return
        finally:
            for fd in child:
                os.close(fd)
        w = Worker(number, pid, ident(pid), Protocol(token, standby=True),
                   Relay(max(log_bytes - 4096, 0)), [frames_r, out_r, err_r])
        self.workers[number] = w
        for fd in w.fds:
            os.set_blocking(fd, False)
            self.sel.register(fd, selectors.EVENT_READ)
            self.by_fd[fd] = w

    def _readable(self, fd: int) -> None:
        if self.zygotes.readable(fd):
            return
        w = self.by_fd.get(fd)
        if w is None:  # closed by an earlier event of the same select
            return
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        if data and fd == w.fds[0]:
            self._frames(w, data)
        elif data:
            w.relay.feed(fd, data)
        if data:
            return
        self.sel.unregister(fd)
        del self.by_fd[fd]
        if fd == w.fds[0]:
            w.closed_at = time.monotonic()
        else:
            w.relay.feed(fd, b"")

    def _frames(self, w: Worker, data: bytes) -> None:
        w.buf += data
        try:
            while (end := w.buf.find(b"\n")) >= 0:
                line = bytes(w.buf[:end])
                del w.buf[:end + 1]
                kind, body = w.protocol.check(line)
                if kind == RESULT:
                    if w.buf:
                        raise Tampering(AFTER_RESULT)
                    if self.ending:  # read as the container ends: its last frame
                        raise _End(w, (RESULT, body))
                    return self._between(w, body)
                if kind != STANDBY and any(o.released for o in self.workers.values()
                                           if o is not w):
                    raise Tampering("a second worker released while one runs")
                self._send(w.number, kind, body)
            if len(w.buf) > max(FRAME_MAX.values()):
                raise Tampering(f"a frame longer than {max(FRAME_MAX.values())} bytes")
        except Tampering as exc:
            if w.released:
                raise _End(w, (TAMPERING, _why(str(exc)))) from None
            self._gone(w, f"a frame before its release that is not the harness's: {exc}")

    def _reap(self) -> None:
        """Reaps whatever has exited (orphans come here); continues what a batch stopped."""
        for pid, status in reaped():
            self.zygotes.reaped(pid, status)
            for w in self.workers.values():
                if w.pid == pid:
                    w.status = status

    def _ended(self) -> None:
        """What ended since: a worker (its last frames read first), the zygote."""
        self.zygotes.replace_ended()
        for w in list(self.workers.values()):
            if w.status is not None:
                self._drain(w, 0.0)
                if w.number not in self.workers:  # its result was served
                    continue
                if w.released:
                    raise _End(w, None)
                self._gone(w, f"it ended before its release (status {w.status})")
            elif w.closed_at is not None and time.monotonic() - w.closed_at > EXIT_GRACE_S:
                if w.released:
                    raise _End(w, (TAMPERING, _why("the frame channel was closed while the "
                                                   "harness still ran")))
                self._gone(w, "its frame channel closed before its release")

    def _drain(self, w: Worker, wait_s: float) -> None:
        """Reads what `w`'s pipes hold, waiting up to `wait_s` for their ends."""
        deadline = time.monotonic() + wait_s
        while any(fd in self.by_fd for fd in w.fds) and w.number in self.workers:
            for fd in [fd for fd in w.fds if fd in self.by_fd]:
                self._readable(fd)
            if time.monotonic() >= deadline:
                return
            time.sleep(0.01)

    def _close(self, w: Worker) -> None:
        self.workers.pop(w.number, None)
        for fd in w.fds:
            if self.by_fd.pop(fd, None) is not None:
                self.sel.unregister(fd)
            os.close(fd)

    def _gone(self, w: Worker, reason: str) -> None:
        """A worker ended before its release, or ended here: killed, reported."""
        if w.status is None:
            with suppress(ProcessLookupError):
                os.kill(w.pid, signal.SIGKILL)
        self._close(w)
        self._send(w.number, GONE, _why(reason))

    def _send(self, number: int, kind: str, body: dict[str, Any]) -> None:
        write_all(1, encode_frame(kind, {**body, WORKER_KEY: number}))

    def _between(self, w: Worker, body: dict[str, Any]) -> None:
        """The active worker's result: steps 1-4 of the module's docstring, then the frame."""
        keep = [o.ident for o in self.workers.values() if o is not w and o.ident is not None]
        keep += self.zygotes.idents()
        if not kill_all_but(keep, everyone=self.pid1, reap=self._reap, deadline_s=REAP_S):
            raise _End(w, (RESULT, body))  # something would not die: the container ends
        self._drain(w, REAP_S)  # every writer is dead: its frame pipe must be empty
        if w.buf:
            raise _End(w, (TAMPERING, _why(AFTER_RESULT)))
        try:
            for where in self.tops:
                empty(where)
            if self.pid1:  # outside a container the IPC namespace is not the warden's
                remove_sysv_ipc()
        except OSError as exc:
            write_all(2, f"[grader warden: cannot clean up after a batch: {exc}]\n".encode())
            raise _End(w, (RESULT, body)) from None
        self._close(w)
        changed = self._intact()
        self._send(w.number, RESULT, body)
        if changed is not None:
            raise _End(None, None)

    def _intact(self) -> str | None:
        """Survivors as they started: stopped ones continued, changed ones gone (workers) or
        replaced (the zygote). Returns how the warden itself changed, if it did."""
        for w in list(self.workers.values()):
            if w.status is None and ident(w.pid) == w.ident:
                if stopped(w.pid):
                    os.kill(w.pid, signal.SIGCONT)
                now = fingerprint(w.pid)
                if now is not None and now != self.baseline:
                    self._gone(w, "changed from outside before its release: "
                               + difference(now, self.baseline))
        self.zygotes.check(self.baseline)
        mine = fingerprint("self")
        if mine == self.baseline:
            return None
        reason = "the warden was changed from outside: " + difference(mine, self.baseline)
        write_all(2, f"[grader warden: {reason}; the container ends]\n".encode())
        for w in list(self.workers.values()):
            self._gone(w, reason)
        return reason

    def _end(self, end: _End) -> int:
        """As warden.py ends an entry's container: every process killed and reaped, then the
        last frame (the gated workers' `gone` first), or the worker's exit status."""
        w, frame = end.worker, end.frame
        self.ending = True
        kill_all_but([], everyone=self.pid1, reap=self._reap, deadline_s=REAP_S)
        if w is not None:
            try:
                self._drain(w, REAP_S)  # every writer is dead
            except _End as late:  # a result after all (as warden.py reads it), or tampering
                if frame is None or frame[0] == RESULT:
                    frame = late.frame
            if frame is not None and frame[0] == RESULT and w.buf:
                frame = (TAMPERING, _why(AFTER_RESULT))
        for other in list(self.workers.values()):
            if other is not w:
                self._gone(other, "the container ends")
        if w is None:
            return 0
        if frame is not None:
            self._send(w.number, *frame)
            return 0
        status = w.status or 0
        if os.WIFSIGNALED(status):
            return 128 + os.WTERMSIG(status)
        return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1


def main(boot: list[str]) -> int:
    """Serve the entry's batches; `boot` runs boot.py (an absolute interpreter path first)."""
    no_dump()
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # as warden.main
    try:
        return Server(boot).run()
    except OSError as exc:
        write_all(2, f"[grader warden: {exc}]\n".encode())
        return 1
