"""attention_prefill in Triton: FlashAttention-2 forward, causal, varlen, GQA.

One program per (block of BLOCK_M query rows, sequence, query head); the grid's first axis
covers max_seqlen and programs past their sequence's end return at once. Each program streams
the key/value blocks of its own sequence with an online softmax (running max and sum, in the
exp2 domain), skipping the blocks above the diagonal: the blocks wholly below it need no mask,
only the BLOCK_M / BLOCK_N blocks on the diagonal are masked. Query head h reads kv head
h // group. The last query-row blocks (the most keys) are launched first.

Under Triton's CPU interpreter (TRITON_INTERPRET=1) `tl.dot` on bfloat16 operands multiplies
their raw 16-bit patterns, so off the GPU the tiles are widened to fp32 before the dots; on the
GPU q.k^T takes bf16 as is and the softmax weights are rounded to bf16 for p @ v, as
FlashAttention does.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def _attend(acc, m_i, l_i, q, qk_scale, k_ptr, v_ptr, n_start, n_end, seq_len, rows,
            stride_kt, stride_vt, d, d_mask,
            CAUSAL: tl.constexpr, BLOCK_N: tl.constexpr, WIDEN: tl.constexpr):
    """Fold the keys n_start .. n_end-1 into (acc, m_i, l_i). k_ptr/v_ptr point at the
    sequence's first token and the program's kv head; qk_scale = scale * log2(e)."""
    for n0 in range(n_start, n_end, BLOCK_N):
        cols = n0 + tl.arange(0, BLOCK_N)
        kv_mask = (cols[:, None] < seq_len) & d_mask[None, :]
        k = tl.load(k_ptr + cols[:, None].to(tl.int64) * stride_kt + d[None, :],
                    mask=kv_mask, other=0.0)
        v = tl.load(v_ptr + cols[:, None].to(tl.int64) * stride_vt + d[None, :],
                    mask=kv_mask, other=0.0)
        if WIDEN:
            k = k.to(tl.float32)
            v = v.to(tl.float32)
        s = tl.dot(q, tl.trans(k)) * qk_scale  # [BLOCK_M, BLOCK_N], log2 units
        if CAUSAL:
            # Keys past the sequence's end sit above the diagonal of every real row; rows past
            # the end still see key `rows` >= their own column 0, so no row is all -inf.
            s = tl.where(cols[None, :] <= rows[:, None], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    return acc, m_i, l_i


@triton.jit
def _prefill_kernel(q_ptr, k_ptr, v_ptr, o_ptr, cu_ptr, qk_scale,
                    stride_qt, stride_qh, stride_kt, stride_kh, stride_vt, stride_vh,
                    stride_ot, stride_oh,
                    GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, WIDEN: tl.constexpr):
    m_block = tl.num_programs(0) - 1 - tl.program_id(0)  # the longest rows first
    seq = tl.program_id(1)
    head = tl.program_id(2)
    start = tl.load(cu_ptr + seq).to(tl.int64)
    seq_len = (tl.load(cu_ptr + seq + 1) - tl.load(cu_ptr + seq)).to(tl.int32)
    m0 = m_block * BLOCK_M
    if m0 >= seq_len:
        return
    kv_head = head // GROUP
    rows = m0 + tl.arange(0, BLOCK_M)
    d = tl.arange(0, BLOCK_D)
    d_mask = d < HEAD_DIM
    row_mask = (rows[:, None] < seq_len) & d_mask[None, :]
    q_rows = (start + rows[:, None]) * stride_qt + head * stride_qh
    q = tl.load(q_ptr + q_rows + d[None, :], mask=row_mask, other=0.0)
    if WIDEN:
        q = q.to(tl.float32)
    k_base = k_ptr + start * stride_kt + kv_head * stride_kh
    v_base = v_ptr + start * stride_vt + kv_head * stride_vh
    acc = tl.zeros((BLOCK_M, BLOCK_D), dtype=tl.float32)
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    # Blocks wholly below the diagonal (keys < m0 <= every row): no mask.
    acc, m_i, l_i = _attend(acc, m_i, l_i, q, qk_scale, k_base, v_base, 0, m0, seq_len, rows,
                            stride_kt, stride_vt, d, d_mask,
                            CAUSAL=False, BLOCK_N=BLOCK_N, WIDEN=WIDEN)
    # The diagonal blocks: keys m0 .. min(m0 + BLOCK_M, seq_len) - 1, masked.
    acc, m_i, l_i = _attend(acc, m_i, l_i, q, qk_scale, k_base, v_base, m0,
                            tl.minimum(m0 + BLOCK_M, seq_len), seq_len, rows,
                            stride_kt, stride_vt, d, d_mask,
                            CAUSAL=True, BLOCK_N=BLOCK_N, WIDEN=WIDEN)
    out = acc / l_i[:, None]
    o_rows = (start + rows[:, None]) * stride_ot + head * stride_oh
    tl.store(o_ptr + o_rows + d[None, :], out.to(tl.bfloat16), mask=row_mask)


def _config(max_seqlen: int, on_gpu: bool) -> tuple[int, int, int, int]:
    """(BLOCK_M, BLOCK_N, num_warps, num_stages); fixed, no autotuning (measured on an H200:
    large tiles pay off from about 2048 tokens a sequence, smaller ones keep more programs
    busy below that)."""
    if not on_gpu:
        return 16, 16, 4, 1  # small tiles keep Triton's CPU interpreter fast
    if max_seqlen >= 2048:
        return 128, 128, 8, 3
    return 64, 64, 4, 3


def kernel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor,
           max_seqlen: int, scale: float) -> torch.Tensor:
    T, heads, head_dim = q.shape
    kv_heads = k.shape[1]
    assert heads % kv_heads == 0
    assert q.stride(2) == 1 and k.stride(2) == 1 and v.stride(2) == 1
    seqs = cu_seqlens.shape[0] - 1
    out = torch.empty((T, heads, head_dim), dtype=torch.bfloat16, device=q.device)
    block_m, block_n, warps, stages = _config(max_seqlen, q.is_cuda)
    assert block_m % block_n == 0  # the diagonal loop starts on a BLOCK_N boundary
    grid = (triton.cdiv(max_seqlen, block_m), seqs, heads)
    _prefill_kernel[grid](q, k, v, out, cu_seqlens, float(scale) * LOG2E,
                          q.stride(0), q.stride(1), k.stride(0), k.stride(1),
                          v.stride(0), v.stride(1), out.stride(0), out.stride(1),
                          GROUP=heads // kv_heads, HEAD_DIM=head_dim,
                          BLOCK_D=triton.next_power_of_2(head_dim),
                          BLOCK_M=block_m, BLOCK_N=block_n, WIDEN=not q.is_cuda,
                          num_warps=warps, num_stages=stages)
    return out
