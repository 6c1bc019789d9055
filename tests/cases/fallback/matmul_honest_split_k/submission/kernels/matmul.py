import torch
import triton
import triton.language as tl


@triton.jit
def _splitk_kernel(a_ptr, b_ptr, acc_ptr, M, N, K, K_PER_SPLIT, stride_am, stride_bk,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   WIDEN: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    k_start = tl.program_id(2) * K_PER_SPLIT
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(k_start, k_start + K_PER_SPLIT, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * stride_am + (k0 + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k0 + rk)[:, None] * stride_bk + rn[None, :],
                    mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        if WIDEN:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc)
    tl.atomic_add(acc_ptr + rm[:, None] * N + rn[None, :], acc,
                  mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def _round_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask).to(tl.bfloat16), mask=mask)


def kernel(a, b):
    a = a.contiguous()
    b = b.contiguous()
    M, K = a.shape
    N = b.shape[1]
    splits, bk = 2, 32
    k_per_split = triton.cdiv(triton.cdiv(K, splits), bk) * bk
    acc = torch.zeros((M, N), dtype=torch.float32, device=a.device)
    grid = (triton.cdiv(M, 32), triton.cdiv(N, 32), triton.cdiv(K, k_per_split))
    _splitk_kernel[grid](a, b, acc, M, N, K, k_per_split, a.stride(0), b.stride(0),
                         BLOCK_M=32, BLOCK_N=32, BLOCK_K=bk, WIDEN=not a.is_cuda)
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    _round_kernel[(triton.cdiv(M * N, 1024),)](acc, c, M * N, BLOCK=1024)
    return c
