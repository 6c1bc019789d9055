"""paged_attention_decode in Triton: flash-decoding over a paged KV cache, GQA-aware.

Pass 1: one program per (sequence, kv head, partition of PART context tokens). It loads the
query rows of all `group` query heads that share the kv head (padded to 16 rows for the
tensor cores) and streams the partition's tokens in tiles of BLOCK_N, each token's key and
value row fetched through the block table (token j is in slot j % block_size of block
block_tables[b, j // block_size]); an online softmax keeps the running max and sum. It writes
the partition's unnormalised output, max and sum. Partitions past a sequence's end return at
once (the grid covers the table's width, so the host never reads seq_lens).
Pass 2: one program per (sequence, query head) merges the partitions' partial results, up to
16 partitions at a time (rescaling each by exp(m_p - m)), and writes o in bfloat16.

Under Triton's CPU interpreter (TRITON_INTERPRET=1) `tl.dot` on bfloat16 operands multiplies
their raw 16-bit patterns, so off the GPU the tiles are widened to fp32 before the dots.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def _partial_kernel(q_ptr, k_cache_ptr, v_cache_ptr, table_ptr, lens_ptr,
                    part_out_ptr, part_m_ptr, part_l_ptr, qk_scale,
                    stride_qb, stride_qh, stride_cb, stride_cs, stride_ch, stride_tb,
                    num_parts, heads,
                    GROUP: tl.constexpr, G_PAD: tl.constexpr, HEAD_DIM: tl.constexpr,
                    BLOCK_D: tl.constexpr, PAGE: tl.constexpr, PART: tl.constexpr,
                    BLOCK_N: tl.constexpr, WIDEN: tl.constexpr):
    b = tl.program_id(0)
    kv_head = tl.program_id(1)
    part = tl.program_id(2)
    seq_len = tl.load(lens_ptr + b)
    t_start = part * PART
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
    m_i = tl.full((G_PAD,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((G_PAD,), dtype=tl.float32)
    acc = tl.zeros((G_PAD, BLOCK_D), dtype=tl.float32)
    for n0 in range(t_start, t_end, BLOCK_N):
        t = n0 + tl.arange(0, BLOCK_N)
        t_mask = t < t_end
        # Only the table entries of real tokens are read: the padding (0) never is.
        block = tl.load(table_row + t // PAGE, mask=t_mask, other=0).to(tl.int64)
        row = block * stride_cb + (t % PAGE) * stride_cs + kv_head * stride_ch
        kv_mask = t_mask[:, None] & d_mask[None, :]
        k = tl.load(k_cache_ptr + row[:, None] + d[None, :], mask=kv_mask, other=0.0)
        v = tl.load(v_cache_ptr + row[:, None] + d[None, :], mask=kv_mask, other=0.0)
        if WIDEN:
            k = k.to(tl.float32)
            v = v.to(tl.float32)
        s = tl.dot(q, tl.trans(k)) * qk_scale  # [G_PAD, BLOCK_N], log2 units
        s = tl.where(t_mask[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    # Partial results at [b, head, part] (and [..., d] for the output).
    idx = (b.to(tl.int64) * heads + head) * num_parts + part
    tl.store(part_m_ptr + idx, m_i, mask=g_mask)
    tl.store(part_l_ptr + idx, l_i, mask=g_mask)
    tl.store(part_out_ptr + idx[:, None] * HEAD_DIM + d[None, :], acc,
             mask=g_mask[:, None] & d_mask[None, :])


@triton.jit
def _reduce_kernel(part_out_ptr, part_m_ptr, part_l_ptr, lens_ptr, o_ptr,
                   stride_ob, stride_oh, num_parts, heads,
                   HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, PART: tl.constexpr,
                   BLOCK_P: tl.constexpr):
    b = tl.program_id(0)
    head = tl.program_id(1)
    used = tl.cdiv(tl.load(lens_ptr + b), PART)
    d = tl.arange(0, BLOCK_D)
    d_mask = d < HEAD_DIM
    base = (b.to(tl.int64) * heads + head) * num_parts
    m = tl.full((), float("-inf"), dtype=tl.float32)
    total = tl.zeros((), dtype=tl.float32)
    acc = tl.zeros((BLOCK_D,), dtype=tl.float32)
    # BLOCK_P partitions at a time, loaded together (one pass for most sequences): a loop of
    # one partition at a time is a chain of dependent loads, slow for long contexts.
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
    out = acc / total
    tl.store(o_ptr + b.to(tl.int64) * stride_ob + head * stride_oh + d, out.to(tl.bfloat16),
             mask=d_mask)


def _config(pairs: int, on_gpu: bool) -> tuple[int, int, int, int, int]:
    """(PART, BLOCK_N, BLOCK_P, num_warps, num_stages) for `pairs` = batch * kv_heads programs
    per partition; fixed, no autotuning. Few pairs: short partitions, so that a long context
    still spreads over the GPU's 132 SMs (measured on an H200)."""
    if not on_gpu:
        # Small tiles keep the interpreter fast; several partitions, merged 2 at a time, so
        # that the smoke shapes exercise both loops of the reduction.
        return 16, 16, 2, 4, 1
    if pairs < 32:
        return 128, 64, 16, 4, 2
    if pairs < 128:
        return 256, 64, 16, 4, 2
    return 512, 64, 16, 4, 2


def kernel(q: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
           block_tables: torch.Tensor, seq_lens: torch.Tensor, scale: float) -> torch.Tensor:
    batch, heads, head_dim = q.shape
    _, page, kv_heads, _ = key_cache.shape
    assert heads % kv_heads == 0
    assert q.stride(2) == 1 and key_cache.stride(3) == 1
    assert key_cache.stride() == value_cache.stride()
    group = heads // kv_heads
    part, block_n, block_p, warps, stages = _config(batch * kv_heads, q.is_cuda)
    # The table's width bounds every context: enough partitions for the longest possible one.
    num_parts = triton.cdiv(block_tables.shape[1] * page, part)
    part_out = torch.empty((batch, heads, num_parts, head_dim), dtype=torch.float32,
                           device=q.device)
    part_m = torch.empty((batch, heads, num_parts), dtype=torch.float32, device=q.device)
    part_l = torch.empty((batch, heads, num_parts), dtype=torch.float32, device=q.device)
    block_d = triton.next_power_of_2(head_dim)
    _partial_kernel[(batch, kv_heads, num_parts)](
        q, key_cache, value_cache, block_tables, seq_lens, part_out, part_m, part_l,
        float(scale) * LOG2E, q.stride(0), q.stride(1), key_cache.stride(0),
        key_cache.stride(1), key_cache.stride(2), block_tables.stride(0), num_parts, heads,
        GROUP=group, G_PAD=max(16, triton.next_power_of_2(group)), HEAD_DIM=head_dim,
        BLOCK_D=block_d, PAGE=page, PART=part, BLOCK_N=block_n, WIDEN=not q.is_cuda,
        num_warps=warps, num_stages=stages)
    out = torch.empty((batch, heads, head_dim), dtype=torch.bfloat16, device=q.device)
    _reduce_kernel[(batch, heads)](part_out, part_m, part_l, seq_lens, out,
                                   out.stride(0), out.stride(1), num_parts, heads,
                                   HEAD_DIM=head_dim, BLOCK_D=block_d, PART=part,
                                   BLOCK_P=min(block_p, triton.next_power_of_2(num_parts)),
                                   num_warps=4)
    return out
