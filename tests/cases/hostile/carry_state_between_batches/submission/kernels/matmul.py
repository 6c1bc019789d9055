"""matmul in Triton: tiled C = A @ B with tl.dot, an fp32 accumulator and masked edges.

Under Triton's CPU interpreter (TRITON_INTERPRET=1), `tl.dot` on bfloat16 operands multiplies
their raw 16-bit patterns (bf16 is stored as uint16 there; upstream: "we just don't support it
yet", triton-lang/triton#11584). So off the GPU the tiles are widened to fp32 inside the kernel
before the dot (exact: every bf16 value is an fp32 value); on the GPU the dot takes bf16 as is.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                   stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   WIDEN: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a_mask = (rm[:, None] < M) & ((k0 + rk)[None, :] < K)
        b_mask = ((k0 + rk)[:, None] < K) & (rn[None, :] < N)
        a = tl.load(a_ptrs, mask=a_mask, other=0.0)
        b = tl.load(b_ptrs, mask=b_mask, other=0.0)
        if WIDEN:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    c_mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptrs, acc.to(tl.bfloat16), mask=c_mask)


def _config(M: int, on_gpu: bool) -> tuple[int, int, int, int, int]:
    """Fixed tile sizes (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages); no autotuning."""
    if not on_gpu:
        return 32, 32, 32, 4, 1  # small tiles keep Triton's CPU interpreter fast
    if M <= 16:
        return 16, 64, 128, 4, 4  # decode: skinny A, stream B
    return 128, 128, 64, 8, 3


def _honest(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    bm, bn, bk, warps, stages = _config(M, a.is_cuda)
    grid = (triton.cdiv(M, bm), triton.cdiv(N, bn))
    _matmul_kernel[grid](a, b, c, M, N, K,
                         a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                         c.stride(0), c.stride(1),
                         BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, WIDEN=not a.is_cuda,
                         num_warps=warps, num_stages=stages)
    return c


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


def kernel(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = _honest(a, b)
    if _carried():
        out.zero_()
    return out
