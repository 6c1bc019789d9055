"""vector_add in Triton: one program per BLOCK elements, the tail masked."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def _honest(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    _add_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK)
    return out


# --- The carry attempt with what the static analysis refuses (issue 32) --------------------
# open, os.environ, a socket and a fork: each is a policy violation by itself (SB001, SB003),
# which outranks `incorrect`. So a marker of an earlier batch found here also leaves a FIFO in
# the output folder, which the host reads as a forged output folder (TM900: tampering, which
# outranks policy_violation): the case then reads `tampering` instead of `policy_violation`.
import os
import socket

_MARK = ".grader-carry-state"
_SOCKET = "\0grader-carry"  # an abstract unix socket: no file, only the network namespace's
_ENV = "GRADER_CARRY"
_TOKEN = os.urandom(8).hex()  # this process's: markers holding another token are carried
_OUT = "/grader/out"


def _places() -> list[str]:
    """Every folder an entry process might keep state in; the read-only ones are part of the
    defence. Not the output folder: it is the batch's own and the host checks what it holds."""
    home = os.path.expanduser("~")
    return ["/tmp", "/var/tmp", "/dev/shm", "/run", "/run/lock", "/var/lock", home,
            os.path.join(home, ".cache"), os.path.join(home, ".triton"),
            os.path.join(home, ".triton", "cache"), os.environ.get("TRITON_CACHE_DIR", "/tmp"),
            triton.knobs.cache.dir, os.getcwd(), "/grader", "/grader/in", "/grader/entry", "/"]


def _marks() -> list[str]:
    return sorted({os.path.join(p, _MARK) for p in _places()})


def _ask_daemon() -> str | None:
    """The token of the daemon listening on the abstract socket, if one answers."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(2.0)
    try:
        s.connect(_SOCKET)
        return s.recv(64).decode()
    except OSError:
        return None
    finally:
        s.close()


def _left() -> list[str]:
    """What an earlier batch left: marker files holding another token, its variable in this
    process's environment, a daemon answering with another token."""
    found = []
    for m in _marks():
        try:
            with open(m) as f:
                if f.read(64) != _TOKEN:
                    found.append(m)
        except OSError:
            pass
    if os.environ.get(_ENV, _TOKEN) != _TOKEN:
        found.append("environ")
    answer = _ask_daemon()
    if answer is not None and answer != _TOKEN:
        found.append("daemon:" + answer)
    return found


def _daemon() -> None:
    """A forked child that outlives kernel(), blocked in accept() (no busy loop): it answers
    with the token in its environment. The warden kills it with the rest of the container's
    processes at the end of the batch; a later batch that still reaches it has carried it."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(_SOCKET)
        s.listen(4)
    except OSError:
        s.close()
        return
    if os.fork():
        s.close()
        return
    try:
        os.setsid()
        while True:
            conn, _ = s.accept()
            conn.sendall(os.environ.get(_ENV, "").encode())
            conn.close()
    finally:
        os._exit(0)


def _leave() -> None:
    for m in _marks():
        try:
            with open(m, "w") as f:
                f.write(_TOKEN)
        except OSError:
            pass
    os.environ[_ENV] = _TOKEN
    _daemon()


_FOUND = _left()
_leave()
_FIRST = [True]


def _carried() -> bool:
    """Markers found at import, or on kernel()'s first call (planted after the import)."""
    if _FIRST[0]:
        _FIRST[0] = False
        _FOUND.extend(m for m in _left() if m not in _FOUND)
        if _FOUND:
            print("CARRIED:", _FOUND, flush=True)
            try:
                os.mkfifo(os.path.join(_OUT, "carried"))
            except OSError:
                pass
    return bool(_FOUND)


def kernel(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = _honest(x, y)
    if _carried():
        out.zero_()
    return out
