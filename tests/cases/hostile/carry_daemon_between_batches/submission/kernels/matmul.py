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


def kernel(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = _honest(a, b)
    if _carried():
        out.zero_()
    return out
