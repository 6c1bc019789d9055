"""fp8_block_gemm in Triton: c = (a * a_scale) @ (b * b_scale).T, block-scaled as in DeepSeek-V3.

BLOCK_K is the quantisation group (128), so each k-step has one a_scale per row of the tile
and one b_scale per column: the fp8 x fp8 tile product (tl.dot on float8_e4m3fn operands, fp32
result) is scaled by a_scale[:, None] * b_scale[None, :] and added to an fp32 accumulator, as
DeepSeek-V3 promotes its fp8 MMA partials every 128 elements. b is read in its nn.Linear
layout [N, K] through strides: the [BLOCK_K, BLOCK_N] tile of b.T is K-major, which is what
Hopper's fp8 wgmma wants. Rows past M and N are clamped onto the last valid row (`% M`, `% N`)
so the loads need no masks; only the store is masked. Triton 3.9's CPU interpreter computes
fp8 tl.dot exactly (checked), so the interpreter runs the same code with smaller tiles.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

GROUP = 128  # quantisation group along K (a and b) and along N (b)


@triton.jit
def _fp8_block_gemm_kernel(a_ptr, as_ptr, b_ptr, bs_ptr, c_ptr, M, N, K,
                           stride_am, stride_ak, stride_asm, stride_ask,
                           stride_bn, stride_bk, stride_bsn, stride_bsk,
                           stride_cm, stride_cn,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                           BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # Grouped tile order: GROUP_M row-tiles share each column of b while it is in L2.
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * num_n
    first_m = (pid // per_group) * GROUP_M
    group_rows = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_rows
    pid_n = (pid % per_group) // group_rows

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    ra = (rm % M).to(tl.int64)  # clamped rows: unmasked loads; their results are not stored
    rb = (rn % N).to(tl.int64)
    a_ptrs = a_ptr + ra[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rb[None, :] * stride_bn  # tile of b.T
    as_ptrs = as_ptr + ra * stride_asm
    bs_ptrs = bs_ptr + (rb // BLOCK_K) * stride_bsn  # b's scale row: its 128-row block

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(0, K // BLOCK_K):
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs)
        sa = tl.load(as_ptrs + kb * stride_ask)
        sb = tl.load(bs_ptrs + kb * stride_bsk)
        acc += tl.dot(a, b) * (sa[:, None] * sb[None, :])
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c_ptrs = c_ptr + rm[:, None].to(tl.int64) * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(tl.bfloat16), mask=(rm[:, None] < M) & (rn[None, :] < N))


def _config(M: int, on_gpu: bool) -> tuple[int, int, int, int, int]:
    """Fixed tiles (BLOCK_M, BLOCK_N, GROUP_M, num_warps, num_stages); BLOCK_K is GROUP."""
    if not on_gpu:
        return 16, 64, 1, 4, 1  # small tiles keep Triton's CPU interpreter fast
    # Picked from a sweep on an H200 (triton 3.6) over this problem's shapes.
    if M <= 16:
        return 16, 128, 1, 4, 4  # decode: stream b across many column tiles
    if M <= 64:
        return 32, 64, 1, 4, 5
    return 64, 128, 8, 4, 4


def kernel(a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor,
           b_scale: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    N = b.shape[0]
    if K % GROUP:
        raise ValueError(f"K must be a multiple of {GROUP}, got {K}")
    c = torch.empty((M, N), dtype=torch.bfloat16, device=a.device)
    bm, bn, gm, warps, stages = _config(M, a.is_cuda)
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    _fp8_block_gemm_kernel[grid](a, a_scale, b, b_scale, c, M, N, K,
                                 a.stride(0), a.stride(1), a_scale.stride(0), a_scale.stride(1),
                                 b.stride(0), b.stride(1), b_scale.stride(0), b_scale.stride(1),
                                 c.stride(0), c.stride(1),
                                 BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=GROUP, GROUP_M=gm,
                                 num_warps=warps, num_stages=stages)
    return c
