"""A serving container's zygote (issue 32): the cold imports paid once, each worker forked.

A fresh worker process pays `import torch` and Triton (4.5-5.8 s on the H200) before its
set-up; a serving container's warden (harness/serve.py) starts one zygote instead,
`boot.py zygote`, which imports torch, Triton and every harness module an entry's worker
runs (nothing of run_entry runs, no entry file is read, CUDA is not initialised: a child
cannot use a context its parent made), makes itself non-dumpable (the container's uid can
then neither ptrace it nor read or write /proc/ZYGOTE/mem, so no batch can plant anything
in what later workers are forked from), and serves the warden's fork requests on a unix
socket (fd 3): the worker's fds 0-4 by SCM_RIGHTS and, as JSON, its environment additions
and arguments.

For each request it double-forks: the middle child forks the worker and exits at once, so
the worker is reparented to the warden (pid 1, or its subreaper outside a container), which
reaps it and learns its exit status as it does of a worker it started itself. The worker
puts its fds on 0-4, closes every other (the zygote's socket above all), takes its
environment, and runs entry.run_entry exactly as `boot.py entry` would, leaving with
os._exit (it never returns into the zygote's loop). It stays non-dumpable until the host
releases it (main._standby): a batch running beside it cannot reach into it either.

It refuses a fork (the warden then starts that worker by fork and exec) with a second
thread (a lock held by a thread that is not copied), a writable shared mapping (a page one
batch could write and the next read) or CUDA initialised. Numpy's OpenBLAS starts a thread
pool when loaded; OPENBLAS_NUM_THREADS=1 while the zygote imports keeps it to the one
thread, so a served worker's numpy BLAS is single-threaded (its kernels run on the GPU).

The batch that runs beside it may still signal it, renice it or lower its limits (the same
uid may): the warden continues a stopped zygote, replaces one whose fingerprint changed
after each batch (harness/sweep.py) and falls back on fork and exec while none is ready.

Both sides are here: `main` is the zygote's process, `Zygote` the warden's handle on it.
Standard library only at import (the zygote imports torch in `main`).
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import selectors
import signal
import socket
import sys
from typing import Any, NoReturn

from .procs import exec_with
from .protocol import DEVICE_ENV, ENTRY_MODE
from .sweep import Ident, difference, fingerprint, ident, set_dumpable, stopped

SOCKET_FD = 3  # the zygote's end of its socket
FORK_WAIT_S = 10.0  # a fork of the imported process takes milliseconds
MESSAGE = 1 << 16
FDS = 5  # a worker's fds 0-4
ZYGOTE_STARTS = 4  # a zygote a batch kills or changes is replaced, this many in all
_BLAS = "OPENBLAS_NUM_THREADS"


class ZygoteError(Exception):
    """No worker from the zygote: why (`refused`: it would refuse again)."""

    def __init__(self, reason: str, *, refused: bool = False) -> None:
        super().__init__(reason)
        self.refused = refused


class Zygote:
    """The warden's side: the zygote's process and socket."""

    def __init__(self, argv: list[str]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        null = os.open(os.devnull, os.O_RDWR)
        env = dict(os.environ)
        try:
            # Its stderr is the warden's (the container's logs): it writes a line when it
            # cannot serve, nothing a batch controls.
            self.pid: int = exec_with(argv, [null, null, 2, theirs.fileno()], env, False)
        finally:
            os.close(null)
            theirs.close()
        self.ident: Ident | None = ident(self.pid)
        self.sock = ours
        self.sock.setblocking(False)
        self.ready = False
        self.status: int | None = None  # its exit status, once the warden reaps it

    def readable(self) -> bool:
        """Takes its ready message; False once its socket is closed."""
        try:
            msg = self.sock.recv(MESSAGE)
        except BlockingIOError:
            return True
        except OSError:
            return False
        self.ready = self.ready or msg == b'{"ready":true}'
        return bool(msg)

    def fork(self, fds: list[int], env: dict[str, str], args: list[str]) -> int:
        """A worker forked on `fds` (the zygote gets copies); its pid, or ZygoteError."""
        request = json.dumps({"env": env, "args": args}).encode()
        self.sock.settimeout(FORK_WAIT_S)
        try:
            socket.send_fds(self.sock, [request], fds)
            reply = self.sock.recv(MESSAGE)
        except OSError as exc:
            raise ZygoteError(f"no answer ({exc})") from None
        finally:
            self.sock.setblocking(False)
        try:
            answer = json.loads(reply)
        except ValueError:
            raise ZygoteError(f"an answer that is not JSON: {reply[:200]!r}") from None
        if isinstance(answer.get("pid"), int):
            return int(answer["pid"])
        raise ZygoteError(str(answer.get("error"))[:500], refused=bool(answer.get("refused")))

    def end(self) -> None:
        """Killed (the warden reaps it) and its socket closed."""
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.sock.close()


class Zygotes:
    """The warden's zygote as the batches leave it: one at a time, started again when one
    ends or changed (ZYGOTE_STARTS in all), none after one refused a fork."""

    def __init__(self, argv: list[str], sel: selectors.BaseSelector) -> None:
        self.argv, self.sel = argv, sel
        self.zygote: Zygote | None = None
        self.started, self.refused = 0, False

    def start(self) -> None:
        if self.refused or self.started >= ZYGOTE_STARTS:
            return
        self.started += 1
        try:
            self.zygote = Zygote(self.argv)
        except OSError as exc:
            _note(f"no zygote ({exc})")
            return
        self.sel.register(self.zygote.sock, selectors.EVENT_READ)

    def retire(self, reason: str) -> None:
        """Ended and replaced."""
        z, self.zygote = self.zygote, None
        if z is not None:
            _note(f"zygote {z.pid} retired: {reason}")
            if z.sock.fileno() in self.sel.get_map():
                self.sel.unregister(z.sock)
            z.end()
            self.start()

    def readable(self, fd: int) -> bool:
        """Whether `fd` is the zygote's (then read)."""
        z = self.zygote
        if z is None or fd != z.sock.fileno():
            return False
        if not z.readable():
            self.sel.unregister(fd)  # it is reaped (and replaced) as it ends
        return True

    def reaped(self, pid: int, status: int) -> None:
        if self.zygote is not None and pid == self.zygote.pid:
            self.zygote.status = status

    def replace_ended(self) -> None:
        if self.zygote is not None and self.zygote.status is not None:
            self.retire(f"it ended (status {self.zygote.status})")

    def idents(self) -> list[Ident]:
        z = self.zygote
        return [z.ident] if z is not None and z.ident is not None else []

    def check(self, baseline: str | None) -> None:
        """After a batch: a stopped zygote continued, a changed one replaced."""
        z = self.zygote
        if z is None or z.status is not None:
            return
        if stopped(z.pid):
            os.kill(z.pid, signal.SIGCONT)
        now = fingerprint(z.pid)
        if now != baseline:
            self.retire("changed from outside: " + difference(now, baseline))

    def fork(self, fds: list[int], env: dict[str, str], args: list[str]) -> int | None:
        """A worker forked by the zygote, or None (the warden then forks and execs it)."""
        z = self.zygote
        if z is None or not z.ready or z.status is not None:
            return None
        try:
            return z.fork(fds, env, args)
        except ZygoteError as exc:
            self.refused = self.refused or exc.refused
            self.retire(str(exc))
            return None


def _note(text: str) -> None:
    os.write(2, f"[grader warden: {text}]\n".encode())


def cold_imports(device: str) -> Any:
    """What every worker would import: torch, Triton, the harness's modules, and on a GPU what
    its profiler's start imports besides (torch._dynamo and the ~800 modules it pulls: 0.89 s
    of that start on the CI host's CPU, 0.00 s once imported; no thread, no shared mapping).
    Returns torch."""
    import torch
    import torch.profiler

    try:
        import triton  # noqa: F401
    except ImportError:  # a runtime without Triton
        pass
    from . import entry, fresh, loading, modules, record, tensors, timing, trace  # noqa: F401

    if device == "cuda":  # on the CPU no worker imports it (harness/record.py)
        import torch._dynamo
    return torch


def main(boot: str) -> int:
    """The zygote's process (`boot.py zygote`, started by the warden on fd SOCKET_FD)."""
    blas = _BLAS not in os.environ
    if blas:
        os.environ[_BLAS] = "1"
    torch = cold_imports(os.environ.get(DEVICE_ENV, ""))
    set_dumpable(False)
    sock = socket.socket(fileno=SOCKET_FD)
    sock.send(b'{"ready":true}')
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(sock, MESSAGE, FDS)
        except OSError:
            return 0
        if not msg:  # the warden is gone
            return 0
        try:
            reply = _serve(sock, msg, fds, torch, blas, boot)
        except Exception as exc:
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        finally:
            for fd in fds:
                os.close(fd)
        if "error" in reply:
            sys.stderr.write(f"[grader zygote: no fork: {reply['error']}]\n")
        sock.send(json.dumps(reply).encode())


def _refusal(torch: Any) -> str | None:
    """Why forking this process now would not give a clean worker, if it would not."""
    threads = os.listdir("/proc/self/task")
    if len(threads) != 1:
        return f"{len(threads)} threads"
    with open("/proc/self/maps") as f:
        for line in f:
            perms = line.split()[1]
            if "s" in perms and "w" in perms:
                return f"a writable shared mapping: {line.strip()[:200]}"
    if torch.cuda.is_initialized():
        return "CUDA is initialised"
    return None


def _serve(sock: socket.socket, msg: bytes, fds: list[int], torch: Any, blas: bool,
           boot: str) -> dict[str, Any]:
    refusal = _refusal(torch)
    if refusal is not None:
        return {"error": refusal, "refused": True}
    request = json.loads(msg)
    env, args = request["env"], request["args"]
    if len(fds) != FDS or not all(isinstance(a, str) for a in args):
        return {"error": "a malformed request"}
    sys.stdout.flush()
    sys.stderr.flush()
    pid_r, pid_w = os.pipe()
    middle = os.fork()
    if middle == 0:  # the middle child: fork the worker, say its pid, leave
        try:
            os.close(pid_r)
            worker = os.fork()
            if worker == 0:
                os.close(pid_w)
                _worker(sock, fds, env, args, blas, boot)
            os.write(pid_w, str(worker).encode())
        finally:
            os._exit(0)
    os.close(pid_w)
    with os.fdopen(pid_r, "rb") as f:
        said = f.read()
    os.waitpid(middle, 0)
    return {"pid": int(said)} if said.isdigit() else {"error": "the fork failed"}


def _worker(sock: socket.socket, fds: list[int], env: dict[str, str], args: list[str],
            blas: bool, boot: str) -> NoReturn:
    """The worker: what `boot.py entry ARGS` runs, in a copy of the zygote."""
    code = 1
    try:
        sock.detach()  # its fd is closed below; the object must never close a reused number
        srcs = [fcntl.fcntl(fd, fcntl.F_DUPFD, 16) for fd in fds]
        for target, src in enumerate(srcs):
            os.dup2(src, target, inheritable=True)
        os.closerange(FDS, max(os.sysconf("SC_OPEN_MAX"), 64))
        if blas:
            os.environ.pop(_BLAS, None)
        os.environ.update(env)
        sys.argv = [boot, ENTRY_MODE, *args]
        random.seed()  # a fresh process's own; the zygote's state is every worker's otherwise
        from . import main as harness
        from .entry import run_entry

        harness._CHANNEL = harness._open_channel()  # the zygote had none
        code = run_entry(args or None)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)
