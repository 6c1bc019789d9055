"""Atrex-Bench attention_forward in Triton: varlen non-causal flash attention, one program per
(query tile, head); each program finds its sequence by a binary search of cu_seqlens_q in the
kernel, then streams that sequence's keys with an fp32 online softmax (exp2, bf16 tl.dot with fp32
accumulators). head_dim 72 is two tiles, 64 + 16 wide, not one padded to 128. Off the GPU
(Triton's CPU interpreter multiplies bf16 as raw bit patterns) the tiles are widened to fp32."""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl


@triton.jit
def _attn_tile(q_a, q_b, acc_a, acc_b, m_i, l_i, k_base, v_base, start_n, k_len, row_stride,
               offs_n, offs_da, offs_db, qk_scale, HEAD_DIM: tl.constexpr, DA: tl.constexpr,
               HAS_B: tl.constexpr, MASK_N: tl.constexpr, WIDEN: tl.constexpr):
    """One key tile [start_n, start_n + BLOCK_N) folded into the running softmax state."""
    keys = start_n + offs_n
    key_ok = keys < k_len
    k_rows = k_base + keys.to(tl.int64) * row_stride
    v_rows = v_base + keys.to(tl.int64) * row_stride
    if MASK_N:
        k_a = tl.load(k_rows[None, :] + offs_da[:, None], mask=key_ok[None, :], other=0.0)
        v_a = tl.load(v_rows[:, None] + offs_da[None, :], mask=key_ok[:, None], other=0.0)
    else:
        k_a = tl.load(k_rows[None, :] + offs_da[:, None])
        v_a = tl.load(v_rows[:, None] + offs_da[None, :])
    if WIDEN:
        k_a = k_a.to(tl.float32)
        v_a = v_a.to(tl.float32)
    qk = tl.dot(q_a, k_a)
    if HAS_B:
        db_ok = offs_db < HEAD_DIM
        k_b = tl.load(k_rows[None, :] + offs_db[:, None], mask=key_ok[None, :] & db_ok[:, None],
                      other=0.0)
        v_b = tl.load(v_rows[:, None] + offs_db[None, :], mask=key_ok[:, None] & db_ok[None, :],
                      other=0.0)
        if WIDEN:
            k_b = k_b.to(tl.float32)
            v_b = v_b.to(tl.float32)
        qk = tl.dot(q_b, k_b, qk)
    qk = qk * qk_scale
    if MASK_N:
        qk = tl.where(key_ok[None, :], qk, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(qk, 1))
    alpha = tl.exp2(m_i - m_new)
    p = tl.exp2(qk - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    p = p.to(v_a.dtype)
    acc_a = tl.dot(p, v_a, acc_a * alpha[:, None])
    if HAS_B:
        acc_b = tl.dot(p, v_b, acc_b * alpha[:, None])
    return acc_a, acc_b, m_new, l_i


@triton.jit(do_not_specialize=["num_seqs"])
def _attn_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, cu_q_ptr, cu_k_ptr, num_seqs, num_heads,
                     qk_scale,
                     HEAD_DIM: tl.constexpr, DA: tl.constexpr, DB: tl.constexpr,
                     HAS_B: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     WIDEN: tl.constexpr):
    tile = tl.program_id(0)
    head = tl.program_id(1)
    # q, k, v and out are contiguous [tokens, heads, HEAD_DIM]: strides from the constexpr head
    # size keep its alignment (72 is a multiple of 8) visible, so rows load in 16-byte vectors.
    row_stride = num_heads * HEAD_DIM
    # Sequence s owns tiles [cu_q[s] // BLOCK_M + s, cu_q[s + 1] // BLOCK_M + s + 1): enough
    # for its cdiv(len, BLOCK_M) tiles; find the last s whose first tile is <= this one.
    lo = num_seqs * 0
    hi = num_seqs - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        first = tl.load(cu_q_ptr + mid) // BLOCK_M + mid
        go_up = first <= tile
        lo = tl.where(go_up, mid, lo)
        hi = tl.where(go_up, hi, mid - 1)
    seq = lo
    q_start = tl.load(cu_q_ptr + seq)
    q_len = tl.load(cu_q_ptr + seq + 1) - q_start
    m_start = (tile - (q_start // BLOCK_M + seq)) * BLOCK_M
    if m_start >= q_len:
        return
    k_start = tl.load(cu_k_ptr + seq)
    k_len = tl.load(cu_k_ptr + seq + 1) - k_start

    offs_m = m_start + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_da = tl.arange(0, DA)
    offs_db = DA + tl.arange(0, DB)
    row_ok = offs_m < q_len
    q_rows = q_ptr + (q_start + offs_m).to(tl.int64) * row_stride + head * HEAD_DIM
    q_a = tl.load(q_rows[:, None] + offs_da[None, :], mask=row_ok[:, None], other=0.0)
    if HAS_B:
        q_b = tl.load(q_rows[:, None] + offs_db[None, :],
                      mask=row_ok[:, None] & (offs_db < HEAD_DIM)[None, :], other=0.0)
    else:
        q_b = tl.zeros([BLOCK_M, DB], dtype=q_a.dtype)
    if WIDEN:
        q_a = q_a.to(tl.float32)
        q_b = q_b.to(tl.float32)
    else:
        q_a = q_a.to(k_ptr.dtype.element_ty)
        q_b = q_b.to(k_ptr.dtype.element_ty)

    k_base = k_ptr + k_start.to(tl.int64) * row_stride + head * HEAD_DIM
    v_base = v_ptr + k_start.to(tl.int64) * row_stride + head * HEAD_DIM
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc_a = tl.zeros([BLOCK_M, DA], tl.float32)
    acc_b = tl.zeros([BLOCK_M, DB], tl.float32)
    n_full = (k_len // BLOCK_N) * BLOCK_N
    for start_n in range(0, n_full, BLOCK_N):
        acc_a, acc_b, m_i, l_i = _attn_tile(q_a, q_b, acc_a, acc_b, m_i, l_i, k_base, v_base,
                                            start_n, k_len, row_stride, offs_n, offs_da, offs_db,
                                            qk_scale, HEAD_DIM, DA, HAS_B, False, WIDEN)
    if n_full < k_len:
        acc_a, acc_b, m_i, l_i = _attn_tile(q_a, q_b, acc_a, acc_b, m_i, l_i, k_base, v_base,
                                            n_full, k_len, row_stride, offs_n, offs_da, offs_db,
                                            qk_scale, HEAD_DIM, DA, HAS_B, True, WIDEN)

    inv_l = 1.0 / tl.where(l_i > 0.0, l_i, 1.0)
    o_rows = o_ptr + (q_start + offs_m).to(tl.int64) * row_stride + head * HEAD_DIM
    out_ty = o_ptr.dtype.element_ty
    tl.store(o_rows[:, None] + offs_da[None, :], (acc_a * inv_l[:, None]).to(out_ty),
             mask=row_ok[:, None])
    if HAS_B:
        tl.store(o_rows[:, None] + offs_db[None, :], (acc_b * inv_l[:, None]).to(out_ty),
                 mask=row_ok[:, None] & (offs_db < HEAD_DIM)[None, :])


def _head_tiles(head_dim: int) -> tuple[int, int]:
    """The head dimension as a power-of-two tile plus (if needed) a second one of at least 16."""
    da = triton.next_power_of_2(head_dim)
    if da == head_dim:
        return da, 0
    da //= 2
    return da, max(16, triton.next_power_of_2(head_dim - da))


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor) -> torch.Tensor:
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        cu_q, cu_k = cu_seqlens_q.contiguous(), cu_seqlens_k.contiguous()
        tokens, heads, head_dim = q.shape
        out = torch.empty_like(q)
        num_seqs = cu_q.numel() - 1
        if tokens == 0 or num_seqs <= 0:
            return out
        da, db = _head_tiles(head_dim)
        wide = da + db > 128
        block_m = 64 if wide else 128
        block_n = 64
        grid = (triton.cdiv(tokens, block_m) + num_seqs, heads)
        _attn_fwd_kernel[grid](
            q, k, v, out, cu_q, cu_k, num_seqs, heads, math.log2(math.e) / math.sqrt(head_dim),
            HEAD_DIM=head_dim, DA=da, DB=max(db, 16), HAS_B=db > 0,
            BLOCK_M=block_m, BLOCK_N=block_n, WIDEN=not q.is_cuda, num_warps=8,
            num_stages=2 if wide else 3)
        return out
