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


# --- The carry attempt (issue 32: one container may serve several batches of an entry) ---
# Only calls the static analysis lets through (open, os.environ, sockets and forks are refused:
# carry_daemon_between_batches tries those), so this entry must pass: a marker of an earlier
# batch found here zeroes the output and the case reads `incorrect`.
import os
import stat

_MARK = ".grader-carry-marker"
_UMASK = 0o002  # an odd umask: a process (or a fork of one) that ran an earlier batch keeps it


def _places() -> list[str]:
    """Every folder an entry process might keep state in; the read-only ones are part of the
    defence. Not the output folder: it is the batch's own and the host checks what it holds."""
    home = os.path.expanduser("~")
    return ["/tmp", "/var/tmp", "/dev/shm", "/run", "/run/lock", "/var/lock", home,
            os.path.join(home, ".cache"), os.path.join(home, ".triton"),
            os.path.join(home, ".triton", "cache"), triton.knobs.cache.dir, os.getcwd(),
            "/grader", "/grader/in", "/grader/entry", "/"]


def _marks() -> list[str]:
    return sorted({os.path.join(p, _MARK) for p in _places()})


def _files_left(mine: set[str]) -> list[str]:
    """Markers this process did not make: an earlier batch's."""
    return [m for m in _marks() if os.path.lexists(m) and m not in mine]


def _process_left() -> list[str]:
    """Process state an earlier batch's os.nice(1) or os.umask would leave in this process or
    in the parent it was forked from."""
    found = ["nice"] if os.nice(0) > 0 else []
    return found + (["umask"] if os.umask(_UMASK) == _UMASK else [])


def _leave() -> set[str]:
    """A marker in every place that takes one: a regular file by mknod, else a FIFO."""
    mine = set()
    for m in _marks():
        try:
            os.mknod(m, 0o644 | stat.S_IFREG)
            mine.add(m)
        except OSError:
            try:
                os.mkfifo(m)
                mine.add(m)
            except OSError:
                pass
    os.nice(1)
    return mine


_FOUND = _files_left(set()) + _process_left()
_MINE = _leave()
_FIRST = [True]


def _carried() -> bool:
    """Markers found at import, or on kernel()'s first call (planted after the import)."""
    if _FIRST[0]:
        _FIRST[0] = False
        _FOUND.extend(m for m in _files_left(_MINE) if m not in _FOUND)
        if _FOUND:
            print("CARRIED:", _FOUND, flush=True)
    return bool(_FOUND)


def kernel(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = _honest(x, y)
    if _carried():
        out.zero_()
    return out
