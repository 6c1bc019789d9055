"""pid 1 of an entry's container: the only writer of the container's stdout (issues 17, 19).

The harness and the entry's code share one process and one uid, so nothing that process
writes to a file the host reads can be trusted to be the harness's. The warden starts first,
forks the worker (the harness, main.py, which then imports the entry) and gives it:
  fd 0   /dev/null
  fd 1/2 pipes the warden reads and relays, capped, to its own stderr (the logs)
  fd 3   the write end of the frame pipe (CHANNEL_ENV names it)
  fd 4   a pipe holding a random token, read and closed by the harness before the entry's file
         is loaded; every frame carries it, so what the entry writes into fd 3 is not a frame
and nothing else (in particular no handle to the container's stdout). The warden is not
dumpable (prctl), so the worker, of the same uid, cannot open /proc/1/fd/*, read
/proc/1/mem or ptrace it; signals sent to a namespace's init from inside without a handler
are dropped by the kernel, so the worker cannot stop or kill it.

The warden checks the frames in protocol order (STANDBY first when GRADER_STANDBY=1; ARMED at
most once, before READY; READY exactly once; TRACED at most once, after READY; RESULT exactly
once, after READY, and nothing after it), sizes capped, and writes each accepted frame to its
stdout as one line of base64 (JSON inside): the host reads them from the container's stdout
log stream (grader/model/channel.py). On RESULT it kills every other process of the container
first (kill(-1, SIGKILL): the worker, its threads, any daemon it forked), reaps them, and only then
writes RESULT and exits 0: nothing the entry runs after its last call (a finaliser, a thread,
an atexit hook) can change what the host receives. Anything out of order, duplicated,
malformed or without the token becomes a TAMPERING frame instead, and the container ends.

The host sends protocol.STACK_SIGNAL to pid 1 at the entry's deadline, a moment before the
kill (issue 34: a timeout said nothing of where the entry was). The warden passes it on to the
worker, whose faulthandler writes every thread's stack to its stderr, which the warden relays
into the logs like any of its output: evidence of where it hung, never a verdict. Having a
handler, pid 1 now also takes that one signal from inside; the entry can only make itself dump
its own stacks into its own capped logs with it.

A serving container's warden (serve.py: one worker per batch) shares its parts.
Standard library only (the names it shares with the host are protocol.py's).
"""

from __future__ import annotations

import base64
import codecs
import hmac
import json
import os
import selectors
import signal
import time
from typing import Any

from .procs import exec_with, no_dump, pipes, reaped, write_all
from .protocol import (
    ARMED,
    CHANNEL_ENV,
    FRAME_FD,
    FRAME_MAX,
    LOG_BYTES_ENV,
    READY,
    RESULT,
    STACK_SIGNAL,
    STANDBY,
    STANDBY_ENV,
    TAMPERING,
    TRACED,
)

DEFAULT_LOG_BYTES = 1 << 20
# Docker's json-file driver writes each line as {"log": "...", "stream": ..., "time": ...};
# a line longer than 16 KiB becomes several entries. Counted generously per entry.
LINE_COST = 128
PARTIAL = 16 << 10
_EXPENSIVE = bytes(b for b in range(0x20) if b != 0x0A) + b"<>&"  # written as \u00XX
_SEPARATORS = ("\u2028".encode(), "\u2029".encode())
EXIT_GRACE_S = 2.0  # the frame pipe may close a moment before its writer can be reaped
REAP_S = 5.0


class Tampering(Exception):
    """A frame the harness cannot have written."""


def log_cost(data: bytes) -> int:
    """What `data` costs in Docker's json-file log (escapes and per-entry wrapping), an upper
    bound: the warden keeps the stream within the log file's size, so that the driver never
    rotates the frames away."""
    n = len(data)
    expensive = n - len(data.translate(None, _EXPENSIVE))
    lines = data.count(b"\n") + n // PARTIAL + 1
    return (n + 5 * expensive + data.count(b'"') + data.count(b"\\")
            + 3 * sum(data.count(s) for s in _SEPARATORS) + LINE_COST * lines)


def encode_frame(kind: str, body: dict[str, Any]) -> bytes:
    """One stdout line: base64 (nothing for the log driver to escape) of the JSON frame."""
    raw = json.dumps({"frame": kind, **body}, separators=(",", ":")).encode()
    return base64.b64encode(raw) + b"\n"


class Protocol:
    """The order and shape of the worker's frames; pure (no I/O), so tests drive it."""

    def __init__(self, token: str, *, standby: bool) -> None:
        self.token = token.encode()
        self.standby = standby
        self.seen: list[str] = []

    @property
    def done(self) -> bool:
        return RESULT in self.seen

    def check(self, line: bytes) -> tuple[str, dict[str, Any]]:
        """The frame's kind and what goes to the host (its data, a result's outputs), or
        Tampering."""
        if self.done:
            raise Tampering("bytes on the frame channel after the result frame")
        try:
            frame = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise Tampering(f"a malformed frame ({type(exc).__name__})") from None
        if not isinstance(frame, dict):
            raise Tampering("a frame that is not a JSON object")
        kind, token = frame.get("frame"), frame.get("token")
        if kind not in FRAME_MAX:
            raise Tampering(f"an unknown frame {str(kind)[:40]!r}")
        if not isinstance(token, str) or not hmac.compare_digest(token.encode(), self.token):
            raise Tampering(f"a {kind} frame without the harness's token: written by something "
                            "other than the harness (the entry's code?)")
        if len(line) > FRAME_MAX[kind]:
            raise Tampering(f"a {kind} frame of {len(line)} bytes (at most {FRAME_MAX[kind]})")
        keys = {"frame", "token", "data"} | ({"outputs"} if kind == RESULT else set())
        if not set(frame) <= keys or not isinstance(frame.get("data"), dict):
            raise Tampering(f"a {kind} frame of the wrong shape")
        outputs = frame.get("outputs", {})
        if not isinstance(outputs, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in outputs.items()):
            raise Tampering("a result frame whose outputs are not names and hashes")
        self._order(kind)
        self.seen.append(kind)
        body = {"data": frame["data"]}
        if kind == RESULT:
            body["outputs"] = outputs
        return kind, body

    def _order(self, kind: str) -> None:
        seen = self.seen
        if kind in seen:
            raise Tampering(f"a second {kind} frame: one of them was not the harness's (an "
                            "entry that writes into the channel at import makes the harness's "
                            "own the second)")
        first = [STANDBY] if self.standby else []
        if kind == STANDBY:
            if not self.standby or seen:
                raise Tampering("a standby frame out of order")
        elif seen[:len(first)] != first:
            raise Tampering(f"a {kind} frame before the standby gate")
        elif kind in (TRACED, RESULT) and READY not in seen:
            raise Tampering(f"a {kind} frame before the ready frame")
        elif kind == ARMED and READY in seen:
            raise Tampering("an armed frame after the ready frame")


class Relay:
    """The worker's stdout and stderr to the warden's stderr, within a log budget."""

    def __init__(self, budget: int, out_fd: int = 2) -> None:
        self.left = budget
        self.out_fd = out_fd
        self.dropped = 0
        self.decoders: dict[int, Any] = {}

    def feed(self, fd: int, data: bytes) -> None:
        # Decoded and re-encoded: invalid UTF-8 would cost the log driver six bytes a byte.
        dec = self.decoders.setdefault(fd, codecs.getincrementaldecoder("utf-8")("replace"))
        text = dec.decode(data, final=not data).encode()
        if not text:
            return
        cost = log_cost(text)
        if cost <= self.left:
            self.left -= cost
            write_all(self.out_fd, text)
            return
        if not self.dropped:
            note = b"\n[grader warden: the entry's output beyond the log cap is dropped]\n"
            write_all(self.out_fd, note)
        self.left = 0
        self.dropped += len(data)


def _spawn(argv: list[str], token: str, own_session: bool) -> tuple[int, int, int, int]:
    """The worker (fds 0-4 only): (pid, frame read end, stdout read end, stderr read end)."""
    child, (frames_r, out_r, err_r) = pipes(token)
    pid = exec_with(argv, child, {**os.environ, CHANNEL_ENV: str(FRAME_FD)}, own_session)
    for fd in child:
        os.close(fd)
    return pid, frames_r, out_r, err_r


class Warden:
    def __init__(self, argv: list[str]) -> None:
        self.pid1 = os.getpid() == 1
        self.token = os.urandom(16).hex()
        self.protocol = Protocol(self.token, standby=os.environ.get(STANDBY_ENV) == "1")
        budget = int(os.environ.get(LOG_BYTES_ENV) or DEFAULT_LOG_BYTES)
        self.relay = Relay(max(budget - 4096, 0))
        self.worker, self.frames_fd, out_fd, err_fd = _spawn(argv, self.token, not self.pid1)
        self.status: int | None = None  # the worker's exit status, once reaped
        self.buf = bytearray()
        self.sel = selectors.DefaultSelector()
        for fd in (self.frames_fd, out_fd, err_fd):
            os.set_blocking(fd, False)
            self.sel.register(fd, selectors.EVENT_READ)
        signal.signal(signal.Signals[STACK_SIGNAL], self._pass_on)

    def _pass_on(self, signum: int, _frame: Any) -> None:
        """The host's STACK_SIGNAL, to the worker (its faulthandler dumps its stacks)."""
        try:
            os.kill(self.worker, signum)
        except ProcessLookupError:
            pass

    def run(self) -> int:
        channel_closed: float | None = None
        try:
            while True:
                for key, _ in self.sel.select(timeout=0.2):
                    if self._read(key.fd) and key.fd == self.frames_fd:
                        channel_closed = time.monotonic()
                self._reap()
                if self.status is not None:
                    self._drain(self.frames_fd)
                    return self._finish(None)
                if channel_closed is not None and (
                        time.monotonic() - channel_closed > EXIT_GRACE_S):
                    raise Tampering("the frame channel was closed while the harness still ran")
        except Tampering as exc:
            return self._finish((TAMPERING, {"data": {"reason": str(exc)[:2000]}}))
        except _Result as res:
            return self._finish((RESULT, res.body))

    def _read(self, fd: int) -> bool:
        """Reads what `fd` has; True at its end."""
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return False
        if not data:
            self.sel.unregister(fd)
            if fd != self.frames_fd:
                self.relay.feed(fd, b"")
            return True
        if fd == self.frames_fd:
            self._frames(data)
        else:
            self.relay.feed(fd, data)
        return False

    def _frames(self, data: bytes) -> None:
        self.buf += data
        while (end := self.buf.find(b"\n")) >= 0:
            line = bytes(self.buf[:end])
            del self.buf[:end + 1]
            kind, body = self.protocol.check(line)
            if kind == RESULT:
                if self.buf:
                    raise Tampering("bytes on the frame channel after the result frame")
                raise _Result(body)
            write_all(1, encode_frame(kind, body))
        if len(self.buf) > max(FRAME_MAX.values()):
            raise Tampering(f"a frame longer than {max(FRAME_MAX.values())} bytes")

    def _reap(self) -> None:
        """Reaps whatever has exited (pid 1 inherits orphans); resumes a stopped worker."""
        for pid, status in reaped():
            if pid == self.worker:
                self.status = status

    def _drain(self, fd: int) -> None:
        """Reads `fd` to its end (every writer is gone, or going)."""
        deadline = time.monotonic() + REAP_S
        while fd in self.sel.get_map() and time.monotonic() < deadline:
            if not self.sel.select(timeout=0.1):
                continue
            self._read(fd)

    def _kill_all(self) -> None:
        try:
            if self.pid1:
                os.kill(-1, signal.SIGKILL)  # all but pid 1 itself
            else:
                os.killpg(self.worker, signal.SIGKILL)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + REAP_S
        while time.monotonic() < deadline:
            try:
                pid, status = os.waitpid(-1 if self.pid1 else self.worker, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == self.worker:
                self.status = self.status if self.status is not None else status
                if not self.pid1:
                    return
            if pid == 0:
                time.sleep(0.01)

    def _finish(self, frame: tuple[str, dict[str, Any]] | None) -> int:
        """Nothing of the container runs any more, then the last frame goes out."""
        self._kill_all()
        try:
            if frame is not None and frame[0] == RESULT:
                self._drain(self.frames_fd)  # the writers are dead: the pipe must be empty
        except Tampering as exc:
            frame = (TAMPERING, {"data": {"reason": str(exc)[:2000]}})
        except _Result:
            frame = (TAMPERING, {"data": {"reason": "a second result frame"}})
        for key in list(self.sel.get_map().values()):
            if key.fd != self.frames_fd:
                self._drain(key.fd)
        if frame is not None:
            write_all(1, encode_frame(*frame))
            return 0
        status = self.status or 0
        if os.WIFSIGNALED(status):
            return 128 + os.WTERMSIG(status)
        return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1


class _Result(Exception):  # control flow: the result frame arrived
    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__("result")
        self.body = body


def main(argv: list[str]) -> int:
    """Run the worker `argv` (an absolute interpreter path first) under the warden."""
    no_dump()
    # Python's SIGINT handler would raise in the warden; a namespace's init drops it unhandled.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        return Warden(argv).run()
    except OSError as exc:  # the container's own limits (pids, fds): the worker never ran
        write_all(2, f"[grader warden: {exc}]\n".encode())
        return 1
