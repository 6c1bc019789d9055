"""matmul that replays half of a product it has seen (issue 31): hostile."""

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



# The device-side replay table (issue 31): per shape SLOTS kept products and their inputs'
# fingerprints, all in device memory, read and written by Triton kernels only (no host read).
SLOTS = 8
PROBES = 64


@triton.jit
def _fingerprint(a_ptr, b_ptr, na, nb, fp_ptr, table_ptr, hit_ptr, SLOTS: tl.constexpr,
                 PROBES: tl.constexpr):
    i = tl.arange(0, PROBES)
    va = tl.load(a_ptr + (i * 7919) % na).to(tl.float32)
    vb = tl.load(b_ptr + (i * 104729) % nb).to(tl.float32)
    f0 = tl.sum(va * (i + 1).to(tl.float32))
    f1 = tl.sum(vb * (i + 3).to(tl.float32))
    tl.store(fp_ptr, f0)
    tl.store(fp_ptr + 1, f1)
    hit = -1
    for s in tl.static_range(SLOTS):
        t0 = tl.load(table_ptr + 2 * s)
        t1 = tl.load(table_ptr + 2 * s + 1)
        hit = tl.where((t0 == f0) & (t1 == f1), s, hit)
    tl.store(hit_ptr, hit)


@triton.jit
def _replay_or_compute(a_ptr, b_ptr, c_ptr, cache_ptr, hit_ptr, store_slot, M, N, K,
                       stride_am, stride_ak, stride_bk, stride_bn,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       KEEP_HALF: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_mask = (rm[:, None] < M) & (rn[None, :] < N)
    offs = rm[:, None] * N + rn[None, :]
    hit = tl.load(hit_ptr)
    # KEEP_HALF: on a hit, replay only every other tile and compute the rest, which keeps the
    # time above the roofline floor (rule TM913).
    replay = (hit >= 0) & ((not KEEP_HALF) | ((pid_m + pid_n) % 2 == 0))
    if replay:
        kept = tl.load(cache_ptr + hit * M * N + offs, mask=c_mask)
        tl.store(c_ptr + offs, kept, mask=c_mask)
    else:
        rk = tl.arange(0, BLOCK_K)
        a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
        b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            a = tl.load(a_ptrs, mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K), other=0.0)
            b = tl.load(b_ptrs, mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += BLOCK_K * stride_bk
        out = acc.to(tl.bfloat16)
        tl.store(c_ptr + offs, out, mask=c_mask)
        if hit < 0:
            tl.store(cache_ptr + store_slot * M * N + offs, out, mask=c_mask)


@triton.jit
def _remember(fp_ptr, table_ptr, hit_ptr, store_slot):
    if tl.load(hit_ptr) < 0:
        tl.store(table_ptr + 2 * store_slot, tl.load(fp_ptr))
        tl.store(table_ptr + 2 * store_slot + 1, tl.load(fp_ptr + 1))


_state: dict[tuple[int, ...], list] = {}


def _cached(a: torch.Tensor, b: torch.Tensor, keep_half: bool) -> torch.Tensor:
    M, K = a.shape
    _, N = b.shape
    key = (M, N, K)
    if key not in _state:
        table = torch.full((2 * SLOTS,), float("nan"), dtype=torch.float32, device=a.device)
        cache = torch.empty((SLOTS, M, N), dtype=a.dtype, device=a.device)
        _state[key] = [table, cache, torch.empty(2, dtype=torch.float32, device=a.device),
                       torch.empty(1, dtype=torch.int32, device=a.device), 0]
    table, cache, fp, hit, slot = _state[key]
    _state[key][4] = (slot + 1) % SLOTS
    _fingerprint[(1,)](a, b, a.numel(), b.numel(), fp, table, hit, SLOTS=SLOTS, PROBES=PROBES)
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    bm, bn, bk, warps, stages = _config(M, True)
    grid = (triton.cdiv(M, bm), triton.cdiv(N, bn))
    _replay_or_compute[grid](a, b, c, cache, hit, slot, M, N, K,
                             a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                             BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, KEEP_HALF=keep_half,
                             num_warps=warps, num_stages=stages)
    _remember[(1,)](fp, table, hit, slot)
    return c


def kernel(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if not a.is_cuda:
        return _own(a, b)
    return _cached(a, b, keep_half=True)
