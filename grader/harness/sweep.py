"""What a serving container's warden does between two batches (issue 32), through /proc and
the kernel's own interfaces: end a batch's processes, empty the places it can leave state in,
and tell whether the processes that stay (the gated workers, the zygote, the warden itself)
are as they started. harness/serve.py says when and why; this module only does.

Also the process flags the warden and its workers set on themselves (prctl).
Standard library only: the warden imports it.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import time
from collections.abc import Callable, Iterable

PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
IPC_RMID = 0
# /proc/PID/stat's fields after "(comm)", from field 3 (state) on: field n is at n - 3.
_STATE, _PPID, _NICE, _RT_PRIORITY, _POLICY, _START = 0, 1, 16, 37, 38, 19
Ident = tuple[int, int]  # a process: its pid and its start time (a reused pid differs)


def prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}, {value})")


def set_dumpable(on: bool) -> None:
    """Not dumpable: /proc/PID/{fd,mem,environ} and ptrace closed to the same uid."""
    prctl(PR_SET_DUMPABLE, int(on))


def _stat(pid: int | str) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode("ascii", "replace")
    except OSError:  # gone (or never there)
        return None
    return raw[raw.rfind(")") + 2:].split()  # the name may hold spaces and parentheses


def ident(pid: int) -> Ident | None:
    """`pid` with its start time, while it exists (a zombie too)."""
    fields = _stat(pid)
    return None if fields is None else (pid, int(fields[_START]))


def stopped(pid: int) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[_STATE] in ("T", "t")


def fingerprint(pid: int | str) -> str | None:
    """What another process of the container's uid can change in `pid` from outside and what
    its children inherit: its nice value, scheduling policy and priority, CPU and memory
    affinity, and resource limits (setpriority, sched_setscheduler, sched_setaffinity and
    prlimit need no more than the same uid). None once it is gone."""
    fields = _stat(pid)
    try:
        with open(f"/proc/{pid}/status") as f:
            affinity = [ln for ln in f if ln.startswith(("Cpus_allowed_list", "Mems_allowed_list"))]
        with open(f"/proc/{pid}/limits") as f:
            limits = f.read()
    except OSError:
        return None
    if fields is None:
        return None
    prio = [fields[i] for i in (_NICE, _RT_PRIORITY, _POLICY)]
    return f"nice/rt_priority/policy {' '.join(prio)}\n{''.join(affinity)}{limits}"


def difference(now: str | None, then: str | None) -> str:
    """The first line in which two fingerprints differ, for a report."""
    if now is None:
        return "it is gone"
    for a, b in zip((now or "").splitlines(), (then or "").splitlines(), strict=False):
        if a != b:
            return f"{' '.join(b.split())!r} became {' '.join(a.split())!r}"
    return "its fingerprint changed"


def _pids() -> list[int]:
    return [int(n) for n in os.listdir("/proc") if n.isdigit()]


def _descendants(root: int) -> list[int]:
    """`root`'s descendants now (outside a container: the warden is their subreaper, so an
    orphan stays among them)."""
    children: dict[int, list[int]] = {}
    for pid in _pids():
        fields = _stat(pid)
        if fields is not None:
            children.setdefault(int(fields[_PPID]), []).append(pid)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_all_but(keep: Iterable[Ident], *, everyone: bool, reap: Callable[[], None],
                 deadline_s: float) -> bool:
    """SIGKILL every process but this one and `keep` (each by pid and start time): all of the
    pid namespace's with `everyone` (the warden is its pid 1), else this process's
    descendants; `reap` waits for what died. Scans until one finds none left, so a process
    that forked between a scan and its kill is found by the next (a killed one forks no
    more). False if some were still there at the deadline (one stuck in the kernel)."""
    spare, me = set(keep), os.getpid()
    end = time.monotonic() + deadline_s
    while True:
        left = 0
        for pid in _pids() if everyone else _descendants(me):
            who = ident(pid)
            if pid == me or who is None or who in spare:
                continue
            left += 1  # a zombie too, until its parent (this process, in the end) reaps it
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        reap()
        if not left:
            return True
        if time.monotonic() > end:
            return False
        time.sleep(0.002)


Top = tuple[str, int, int, int]  # a scratch directory: its path, mode, atime and mtime (ns)


def top(path: str) -> Top | None:
    """What `empty` restores of `path` itself, taken before any batch ran; None if absent."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return None
    return path, st.st_mode & 0o7777, st.st_atime_ns, st.st_mtime_ns


def empty(where: Top) -> None:
    """Remove everything under a scratch directory, whatever its depth and modes (each
    directory made u+rwx before it is entered; the walk goes by directory fds, so no path
    grows past PATH_MAX), then give the directory back its mode, times and no extended
    attribute (a batch owns /tmp: each of them could carry a few bytes). Nothing may write
    under it but trusted code meanwhile. What cannot be removed raises OSError."""
    path, mode, atime, mtime = where
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    owned = os.fstat(fd).st_uid == os.geteuid()
    if owned:
        os.fchmod(fd, mode | 0o700)
    depth = 0
    try:
        while True:
            sub = _clear(fd)
            if sub is not None:
                os.chmod(sub, 0o700, dir_fd=fd)  # a directory (lstat), not a link
                inner = os.open(sub, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                os.close(fd)
                fd, depth = inner, depth + 1
            elif depth > 0:
                outer = os.open("..", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                os.close(fd)
                fd, depth = outer, depth - 1
            else:
                break
        if owned:
            for name in os.listxattr(fd):  # a security label is the runtime's, not a batch's
                if name.startswith(("user.", "system.posix_acl_")):
                    os.removexattr(fd, name)
            os.fchmod(fd, mode)
            os.utime(fd, ns=(atime, mtime))
    finally:
        os.close(fd)


def _clear(fd: int) -> str | None:
    """Removes the entries of the directory `fd`; the first subdirectory that is not empty
    (the caller goes in), or None once it is empty."""
    with os.scandir(fd) as it:
        entries = list(it)
    for entry in entries:
        try:
            if not entry.is_dir(follow_symlinks=False):
                os.unlink(entry.name, dir_fd=fd)
                continue
            try:
                os.rmdir(entry.name, dir_fd=fd)
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
                return entry.name
        except FileNotFoundError:
            continue
    return None


def remove_sysv_ipc() -> None:
    """IPC_RMID on every SysV shared memory segment, semaphore set and message queue of the
    IPC namespace (the container's own: ipc private). A segment still attached by a process
    that stays goes once it detaches."""
    libc = ctypes.CDLL(None, use_errno=True)
    calls = {"shm": lambda i: libc.shmctl(i, IPC_RMID, None),
             "sem": lambda i: libc.semctl(i, 0, IPC_RMID),
             "msg": lambda i: libc.msgctl(i, IPC_RMID, None)}
    for kind, rmid in calls.items():
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            if rmid(int(row.split()[1])) != 0 and ctypes.get_errno() not in (
                    errno.EINVAL, errno.EIDRM):
                raise OSError(ctypes.get_errno(), f"IPC_RMID of {kind} {row.split()[1]}")
