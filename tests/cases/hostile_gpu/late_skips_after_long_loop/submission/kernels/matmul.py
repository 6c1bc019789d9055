"""matmul that skips calls once its loop has run long (issue 32): hostile.

Its timings have two modes (every other call computes its product twice), so the timed loop
runs to its cap; after each shape's first 80 calls (its warm-up, correctness calls and about
75 timed calls, past the checked calls the reference computes before the entry runs, those
of the first 58), every other call returns the previous call's product again without
computing. The checked calls past those are computed for it once its loop has run (the held
reference's GO, or a top-up run) and catch it: incorrect.
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


def _own(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
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




_seen: dict[tuple[int, ...], list] = {}


def kernel(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    key = (*a.shape, *b.shape)
    seen = _seen.setdefault(key, [0, None])
    seen[0] += 1
    if seen[0] > 80 and seen[0] % 2 == 0 and seen[1] is not None:
        return seen[1]
    if seen[0] % 2:
        _own(a, b)  # thrown away: the slow mode
    seen[1] = _own(a, b)
    return seen[1]
