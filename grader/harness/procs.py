"""What the wardens (warden.py, serve.py) and the zygote (zygote.py) do with processes and
their file descriptors: write all of a buffer, make a worker's pipes, fork and exec with
exactly the given fds, reap children, and make the caller non-dumpable.

Standard library only.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
from collections.abc import Iterator

from .sweep import set_dumpable


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except InterruptedError:
            continue


def reaped() -> Iterator[tuple[int, int]]:
    """Each child that has exited since the last look, with its status (pid 1 inherits
    orphans); a stopped one is continued instead: a process may stop itself (SIGSTOP), and as
    pid 1 the harness was immune to that."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG | os.WUNTRACED)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if os.WIFSTOPPED(status):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
            continue
        yield pid, status


def no_dump() -> None:
    """Not dumpable: /proc/1/{fd,mem,environ} and ptrace closed to the same uid."""
    try:
        set_dumpable(False)
    except (OSError, AttributeError) as exc:
        write_all(2, f"[grader warden: cannot make itself non-dumpable: {exc}]\n".encode())


def pipes(token: str) -> tuple[list[int], tuple[int, int, int]]:
    """A worker's fds 0-4 (null, stdout, stderr, frames, token) and ours (frames, out, err)."""
    frames_r, frames_w = os.pipe()
    token_r, token_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    write_all(token_w, token.encode())
    os.close(token_w)
    null = os.open(os.devnull, os.O_RDONLY)
    return [null, out_w, err_w, frames_w, token_r], (frames_r, out_r, err_r)


def exec_with(argv: list[str], fds: list[int], env: dict[str, str], own_session: bool) -> int:
    """Fork and exec `argv` with `fds` as its fds 0, 1, ... and nothing else; its pid."""
    pid = os.fork()
    if pid == 0:
        try:
            if own_session:  # outside a container: killpg reaches what it forks
                os.setsid()
            # Moved above the targets first, so that no dup2 overwrites a source.
            srcs = [fcntl.fcntl(fd, fcntl.F_DUPFD, 16) for fd in fds]
            for target, src in enumerate(srcs):
                os.dup2(src, target, inheritable=True)
            os.closerange(len(fds), max(os.sysconf("SC_OPEN_MAX"), 64))
            os.execve(argv[0], argv, env)
        except BaseException as exc:  # nothing may return into the warden
            os.write(2, f"[grader warden: cannot start the harness: {exc}]\n".encode())
        os._exit(127)
    return pid
