"""gemm_bf16 in Triton: out = x @ w.T, tiled with tl.dot, an fp32 accumulator, masked edges.

w is read in its nn.Linear layout [N, K] through strides (no transpose copy). Under Triton's CPU
interpreter (TRITON_INTERPRET=1) `tl.dot` on bfloat16 operands multiplies their raw 16-bit
patterns, so off the GPU the tiles are widened to fp32 before the dot (exact: every bf16 value
is an fp32 value); on the GPU the dot takes bf16 as is.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _linear_kernel(x_ptr, w_ptr, out_ptr, M, N, K,
                   stride_xm, stride_xk, stride_wn, stride_wk, stride_om, stride_on,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   WIDEN: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + rm[:, None].to(tl.int64) * stride_xm + rk[None, :] * stride_xk
    # The [BLOCK_K, BLOCK_N] tile of w.T: element (k, n) is w[n, k].
    w_ptrs = w_ptr + rk[:, None] * stride_wk + rn[None, :].to(tl.int64) * stride_wn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        x_mask = (rm[:, None] < M) & ((k0 + rk)[None, :] < K)
        w_mask = ((k0 + rk)[:, None] < K) & (rn[None, :] < N)
        a = tl.load(x_ptrs, mask=x_mask, other=0.0)
        b = tl.load(w_ptrs, mask=w_mask, other=0.0)
        if WIDEN:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc)
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk
    out_ptrs = out_ptr + rm[:, None].to(tl.int64) * stride_om + rn[None, :] * stride_on
    out_mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(out_ptrs, acc.to(tl.bfloat16), mask=out_mask)


def _config(M: int, on_gpu: bool) -> tuple[int, int, int, int, int]:
    """Fixed tile sizes (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages); no autotuning."""
    if not on_gpu:
        return 32, 32, 32, 4, 1  # small tiles keep Triton's CPU interpreter fast
    if M <= 16:
        return 16, 64, 128, 4, 4  # decode: skinny x, stream w
    if M <= 128:
        return 64, 128, 64, 4, 4
    return 128, 128, 64, 8, 3


def kernel(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    M, K = x.shape
    N = w.shape[0]
    out = torch.empty((M, N), dtype=torch.bfloat16, device=x.device)
    bm, bn, bk, warps, stages = _config(M, x.is_cuda)
    grid = (triton.cdiv(M, bm), triton.cdiv(N, bn))
    _linear_kernel[grid](x, w, out, M, N, K,
                         x.stride(0), x.stride(1), w.stride(0), w.stride(1),
                         out.stride(0), out.stride(1),
                         BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, WIDEN=not x.is_cuda,
                         num_warps=warps, num_stages=stages)
    return out
