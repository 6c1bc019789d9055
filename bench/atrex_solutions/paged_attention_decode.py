"""Atrex-Bench paged_attention_decode in Triton: flash-decoding over its paged caches (K as
[blocks, kv_heads, head/x, block, x], V as [blocks, kv_heads, head, block]), GQA-aware: one
program per (sequence, kv head, partition of the context) runs an fp32 online softmax (exp2) for
all query heads of its group (padded to 16 rows for tl.dot), each token's K/V found through the
block table; QK^T in the cache dtype with fp32 accumulation, P@V as P's hi + lo halves (near fp32).
When the table's width fits one partition (all the real shapes) that launch normalises and writes
the output; else a second launch merges the partitions. Sequences of length <= 0 give zeros.
Off the GPU (Triton's CPU interpreter multiplies bf16 as raw bit patterns) tiles are widened."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def _partial_kernel(q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, o_ptr,
                    part_out_ptr, part_m_ptr, part_l_ptr, qk_scale, max_ctx,
                    stride_qb, stride_qh, stride_ob, stride_oh,
                    stride_kb, stride_kh, stride_kd, stride_ks,
                    stride_vb, stride_vh, stride_vd, stride_vs, stride_tb,
                    num_parts, heads,
                    GROUP: tl.constexpr, G_PAD: tl.constexpr, HEAD_DIM: tl.constexpr,
                    BLOCK_D: tl.constexpr, X: tl.constexpr, PAGE: tl.constexpr,
                    PART: tl.constexpr, BLOCK_N: tl.constexpr, SINGLE: tl.constexpr,
                    WIDEN: tl.constexpr):
    b = tl.program_id(0)
    kv_head = tl.program_id(1)
    part = tl.program_id(2)
    seq_len = tl.minimum(tl.load(lens_ptr + b), max_ctx)
    t_start = part * PART
    if not SINGLE:
        if t_start >= seq_len:
            return
    t_end = tl.minimum(t_start + PART, seq_len)
    g = tl.arange(0, G_PAD)
    head = kv_head * GROUP + g
    g_mask = g < GROUP
    d = tl.arange(0, BLOCK_D)
    d_mask = d < HEAD_DIM
    q = tl.load(q_ptr + b.to(tl.int64) * stride_qb + head[:, None] * stride_qh + d[None, :],
                mask=g_mask[:, None] & d_mask[None, :], other=0.0)
    if WIDEN:
        q = q.to(tl.float32)
    table_row = table_ptr + b.to(tl.int64) * stride_tb
    k_head = k_ptr + kv_head.to(tl.int64) * stride_kh
    v_head = v_ptr + kv_head.to(tl.int64) * stride_vh
    k_dim = (d // X) * stride_kd + d % X  # K's head dim is split in chunks of x elements
    m_i = tl.full((G_PAD,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((G_PAD,), dtype=tl.float32)
    acc = tl.zeros((G_PAD, BLOCK_D), dtype=tl.float32)
    for n0 in range(t_start, t_end, BLOCK_N):
        t = n0 + tl.arange(0, BLOCK_N)
        t_mask = t < t_end
        # Only the table entries of real tokens are read.
        block = tl.load(table_row + t // PAGE, mask=t_mask, other=0).to(tl.int64)
        slot = t % PAGE
        # K^T tile [BLOCK_D, BLOCK_N] and V tile [BLOCK_N, BLOCK_D].
        kt = tl.load(k_head + (block * stride_kb + slot * stride_ks)[None, :] + k_dim[:, None],
                     mask=d_mask[:, None] & t_mask[None, :], other=0.0)
        v = tl.load(v_head + (block * stride_vb + slot * stride_vs)[:, None]
                    + d[None, :] * stride_vd, mask=t_mask[:, None] & d_mask[None, :], other=0.0)
        if WIDEN:
            kt = kt.to(tl.float32)
        s = tl.dot(q, kt) * qk_scale  # [G_PAD, BLOCK_N], log2 units
        s = tl.where(t_mask[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        # P in the cache dtype as hi + lo: the product with V keeps about 16 bits of P.
        p_hi = p.to(v_ptr.dtype.element_ty)
        p_lo = (p - p_hi.to(tl.float32)).to(v_ptr.dtype.element_ty)
        if WIDEN:
            v = v.to(tl.float32)
            p_hi = p_hi.to(tl.float32)
            p_lo = p_lo.to(tl.float32)
        acc = acc * alpha[:, None]
        acc = tl.dot(p_hi, v, acc)
        acc = tl.dot(p_lo, v, acc)
        m_i = m_new
    if SINGLE:
        out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]  # an empty sequence gives zeros
        tl.store(o_ptr + b.to(tl.int64) * stride_ob + head[:, None] * stride_oh + d[None, :],
                 out.to(o_ptr.dtype.element_ty), mask=g_mask[:, None] & d_mask[None, :])
    else:
        idx = (b.to(tl.int64) * heads + head) * num_parts + part
        tl.store(part_m_ptr + idx, m_i, mask=g_mask)
        tl.store(part_l_ptr + idx, l_i, mask=g_mask)
        tl.store(part_out_ptr + idx[:, None] * HEAD_DIM + d[None, :], acc,
                 mask=g_mask[:, None] & d_mask[None, :])


@triton.jit
def _reduce_kernel(part_out_ptr, part_m_ptr, part_l_ptr, lens_ptr, o_ptr, max_ctx,
                   stride_ob, stride_oh, num_parts, heads,
                   HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, PART: tl.constexpr,
                   BLOCK_P: tl.constexpr):
    b = tl.program_id(0)
    head = tl.program_id(1)
    used = tl.cdiv(tl.minimum(tl.load(lens_ptr + b), max_ctx), PART)
    d = tl.arange(0, BLOCK_D)
    d_mask = d < HEAD_DIM
    base = (b.to(tl.int64) * heads + head) * num_parts
    m = tl.full((), float("-inf"), dtype=tl.float32)
    total = tl.zeros((), dtype=tl.float32)
    acc = tl.zeros((BLOCK_D,), dtype=tl.float32)
    for p0 in range(0, used, BLOCK_P):
        p = p0 + tl.arange(0, BLOCK_P)
        p_mask = p < used
        m_p = tl.load(part_m_ptr + base + p, mask=p_mask, other=float("-inf"))
        l_p = tl.load(part_l_ptr + base + p, mask=p_mask, other=0.0)
        o_p = tl.load(part_out_ptr + (base + p)[:, None] * HEAD_DIM + d[None, :],
                      mask=p_mask[:, None] & d_mask[None, :], other=0.0)
        m_new = tl.maximum(m, tl.max(m_p, axis=0))
        alpha = tl.math.exp2(m - m_new)
        w = tl.where(p_mask, tl.math.exp2(m_p - m_new), 0.0)
        total = total * alpha + tl.sum(l_p * w, axis=0)
        acc = acc * alpha + tl.sum(o_p * w[:, None], axis=0)
        m = m_new
    out = acc / tl.where(total > 0, total, 1.0)  # an empty sequence gives zeros
    tl.store(o_ptr + b.to(tl.int64) * stride_ob + head * stride_oh + d,
             out.to(o_ptr.dtype.element_ty), mask=d_mask)


def _config(pairs: int, on_gpu: bool) -> tuple[int, int, int, int, int]:
    """(PART, BLOCK_N, BLOCK_P, num_warps, num_stages) for `pairs` = batch * kv_heads programs
    per partition; fixed, no autotuning. Few pairs: shorter partitions so that a long context
    still spreads over the SMs; contexts up to 128 tokens (the real shapes) take one launch."""
    if not on_gpu:  # small tiles keep the interpreter fast
        return 32, 16, 2, 4, 1
    if pairs < 32:
        return 128, 64, 16, 4, 2
    if pairs < 128:
        return 256, 64, 16, 4, 2
    return 512, 64, 16, 4, 2


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, query: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                block_tables: torch.Tensor, seq_lens: torch.Tensor) -> torch.Tensor:
        batch, heads, head_dim = query.shape
        kv_heads = v_cache.shape[1]
        page = v_cache.shape[3]
        x = k_cache.shape[4]
        group = heads // kv_heads
        query = query.contiguous()
        k_cache = k_cache.contiguous()
        v_cache = v_cache.contiguous()
        block_tables = block_tables.contiguous()
        seq_lens = seq_lens.contiguous()
        out = torch.empty_like(query)
        if batch == 0:
            return out
        part, block_n, block_p, warps, stages = _config(batch * kv_heads, query.is_cuda)
        # The table's width bounds every context: enough partitions for the longest possible.
        max_ctx = block_tables.shape[1] * page
        num_parts = max(1, triton.cdiv(max_ctx, part))
        single = num_parts == 1
        if single:
            part_out = part_m = part_l = out  # unused
        else:
            part_out = torch.empty((batch, heads, num_parts, head_dim), dtype=torch.float32,
                                   device=query.device)
            part_m = torch.empty((batch, heads, num_parts), dtype=torch.float32,
                                 device=query.device)
            part_l = torch.empty((batch, heads, num_parts), dtype=torch.float32,
                                 device=query.device)
        block_d = triton.next_power_of_2(head_dim)
        _partial_kernel[(batch, kv_heads, num_parts)](
            query, k_cache, v_cache, block_tables, seq_lens, out, part_out, part_m, part_l,
            float(head_dim ** -0.5) * LOG2E, max_ctx, query.stride(0), query.stride(1),
            out.stride(0), out.stride(1), k_cache.stride(0), k_cache.stride(1),
            k_cache.stride(2), k_cache.stride(3), v_cache.stride(0), v_cache.stride(1),
            v_cache.stride(2), v_cache.stride(3), block_tables.stride(0), num_parts, heads,
            GROUP=group, G_PAD=max(16, triton.next_power_of_2(group)), HEAD_DIM=head_dim,
            BLOCK_D=block_d, X=x, PAGE=page, PART=part, BLOCK_N=block_n, SINGLE=single,
            WIDEN=not query.is_cuda, num_warps=warps, num_stages=stages)
        if not single:
            _reduce_kernel[(batch, heads)](part_out, part_m, part_l, seq_lens, out, max_ctx,
                                           out.stride(0), out.stride(1), num_parts, heads,
                                           HEAD_DIM=head_dim, BLOCK_D=block_d, PART=part,
                                           BLOCK_P=min(block_p, triton.next_power_of_2(num_parts)),
                                           num_warps=4)
        return out
