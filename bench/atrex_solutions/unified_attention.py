"""Atrex-Bench unified_attention in Triton: flash attention over a paged KV cache, one program per
(tile of query tokens, kv head) whose rows are every (token, query head) pair of that kv head's
GQA group, so each K/V tile read through block_table serves the whole group. Each program finds
its sequence by a binary search of cu_seqlens_q in the kernel; causal when q_len == kv_len,
else all kv_len keys (the reference's SDPA calls). fp32 online softmax (exp2), bf16 tl.dot with
fp32 accumulators; head sizes 72/80/192 are two tiles (64 + 16, 128 + 64), not one padded to a
power of two. Off the GPU (Triton's CPU interpreter multiplies bf16 as raw bit patterns) the
tiles are widened to fp32."""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl


@triton.jit
def _paged_tile(q_a, q_b, acc_a, acc_b, m_i, l_i, k_ptr, v_ptr, bt_row, start_n, kv_len, limit,
                offs_n, offs_da, offs_db, page_stride, slot_stride, qk_scale,
                HEAD_DIM: tl.constexpr, HAS_B: tl.constexpr, PAGE: tl.constexpr,
                MASK_N: tl.constexpr, WIDEN: tl.constexpr):
    """One tile of keys [start_n, start_n + BLOCK_N), gathered page by page through the block
    table row `bt_row`, folded into the running softmax state. `limit` [BLOCK_M]: each row's
    first key not attended (only read when MASK_N)."""
    keys = start_n + offs_n
    key_ok = keys < kv_len
    if MASK_N:
        page = tl.load(bt_row + keys // PAGE, mask=key_ok, other=0).to(tl.int64)
    else:
        page = tl.load(bt_row + keys // PAGE).to(tl.int64)
    slot = keys % PAGE
    k_rows = k_ptr + page * page_stride + slot * slot_stride
    v_rows = v_ptr + page * page_stride + slot * slot_stride
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
        qk = tl.where(keys[None, :] < limit[:, None], qk, float("-inf"))
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
def _unified_attn_kernel(q_ptr, k_ptr, v_ptr, o_ptr, cu_q_ptr, seqused_ptr, bt_ptr, num_seqs,
                         num_kv_heads, bt_stride, qk_scale, HEAD_DIM: tl.constexpr,
                         DA: tl.constexpr, DB: tl.constexpr, HAS_B: tl.constexpr,
                         GROUP: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_M: tl.constexpr,
                         BLOCK_N: tl.constexpr, PAGE: tl.constexpr, WIDEN: tl.constexpr):
    # Last tiles first: under the causal mask they have the most keys.
    tile = tl.num_programs(0) - 1 - tl.program_id(0)
    kv_head = tl.program_id(1)
    # q and out are contiguous [tokens, heads, HEAD_DIM], the caches [pages, PAGE, kv heads,
    # HEAD_DIM]: strides from the constexpr head size keep its alignment (72 is a multiple of 8)
    # visible, so rows load in 16-byte vectors.
    slot_stride = num_kv_heads * HEAD_DIM
    page_stride = PAGE * slot_stride
    q_stride = GROUP * slot_stride
    # Sequence s owns tiles [cu_q[s] // BLOCK_Q + s, cu_q[s + 1] // BLOCK_Q + s + 1): enough
    # for its cdiv(q_len, BLOCK_Q) tiles; find the last s whose first tile is <= this one.
    lo = num_seqs * 0
    hi = num_seqs - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        first = tl.load(cu_q_ptr + mid) // BLOCK_Q + mid
        go_up = first <= tile
        lo = tl.where(go_up, mid, lo)
        hi = tl.where(go_up, hi, mid - 1)
    seq = lo
    q_start = tl.load(cu_q_ptr + seq)
    q_len = tl.load(cu_q_ptr + seq + 1) - q_start
    t0 = (tile - (q_start // BLOCK_Q + seq)) * BLOCK_Q
    if t0 >= q_len:
        return
    kv_len = tl.load(seqused_ptr + seq)
    causal = q_len == kv_len

    # Row r of the tile: token t0 + r // GROUP, query head kv_head * GROUP + r % GROUP.
    rows = tl.arange(0, BLOCK_M)
    tok = t0 + rows // GROUP
    head = kv_head * GROUP + rows % GROUP
    row_ok = (rows < BLOCK_Q * GROUP) & (tok < q_len)
    # Each row's first key not attended; every row sees key 0, so no row is all -inf.
    limit = tl.minimum(tl.where(causal, tok + 1, kv_len), kv_len)
    t_end = tl.minimum(t0 + BLOCK_Q, q_len)
    n_end = tl.where(causal, t_end, kv_len)  # keys any real row of the tile attends
    n_free = (tl.where(causal, t0 + 1, kv_len) // BLOCK_N) * BLOCK_N  # keys every row attends

    offs_n = tl.arange(0, BLOCK_N)
    offs_da = tl.arange(0, DA)
    offs_db = DA + tl.arange(0, DB)
    q_rows = q_ptr + (q_start + tok).to(tl.int64) * q_stride + head * HEAD_DIM
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

    k_base = k_ptr + kv_head * HEAD_DIM
    v_base = v_ptr + kv_head * HEAD_DIM
    bt_row = bt_ptr + seq.to(tl.int64) * bt_stride
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc_a = tl.zeros([BLOCK_M, DA], tl.float32)
    acc_b = tl.zeros([BLOCK_M, DB], tl.float32)
    for start_n in range(0, n_free, BLOCK_N):
        acc_a, acc_b, m_i, l_i = _paged_tile(q_a, q_b, acc_a, acc_b, m_i, l_i, k_base, v_base,
                                             bt_row, start_n, kv_len, limit, offs_n, offs_da,
                                             offs_db, page_stride, slot_stride, qk_scale,
                                             HEAD_DIM, HAS_B, PAGE, False, WIDEN)
    for start_n in range(n_free, n_end, BLOCK_N):
        acc_a, acc_b, m_i, l_i = _paged_tile(q_a, q_b, acc_a, acc_b, m_i, l_i, k_base, v_base,
                                             bt_row, start_n, kv_len, limit, offs_n, offs_da,
                                             offs_db, page_stride, slot_stride, qk_scale,
                                             HEAD_DIM, HAS_B, PAGE, True, WIDEN)

    inv_l = 1.0 / tl.where(l_i > 0.0, l_i, 1.0)
    o_rows = o_ptr + (q_start + tok).to(tl.int64) * q_stride + head * HEAD_DIM
    out_ty = o_ptr.dtype.element_ty
    tl.store(o_rows[:, None] + offs_da[None, :], (acc_a * inv_l[:, None]).to(out_ty),
             mask=row_ok[:, None])
    if HAS_B:
        tl.store(o_rows[:, None] + offs_db[None, :], (acc_b * inv_l[:, None]).to(out_ty),
                 mask=row_ok[:, None] & (offs_db < HEAD_DIM)[None, :])


def _head_tiles(head_size: int) -> tuple[int, int]:
    """The head size as a power-of-two tile plus (if needed) a second one of at least 16."""
    da = triton.next_power_of_2(head_size)
    if da == head_size:
        return da, 0
    da //= 2
    return da, max(16, triton.next_power_of_2(head_size - da))


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                cu_seqlens_q: torch.Tensor, seqused_k: torch.Tensor,
                block_table: torch.Tensor) -> torch.Tensor:
        q, k_cache, v_cache = q.contiguous(), k_cache.contiguous(), v_cache.contiguous()
        cu_q, seqused, table = (cu_seqlens_q.contiguous(), seqused_k.contiguous(),
                                block_table.contiguous())
        num_tokens, num_heads, head_size = q.shape
        page, num_kv_heads = k_cache.shape[1], k_cache.shape[2]
        group = num_heads // num_kv_heads
        out = torch.empty(num_tokens, num_heads, head_size, dtype=q.dtype, device=q.device)
        num_seqs = seqused.numel()
        if num_tokens == 0 or num_seqs == 0:
            return out
        da, db = _head_tiles(head_size)
        wide = da + db > 128
        block_m = max(64 if wide else 128, triton.next_power_of_2(group))
        block_q = block_m // group
        grid = (triton.cdiv(num_tokens, block_q) + num_seqs, num_kv_heads)
        _unified_attn_kernel[grid](
            q, k_cache, v_cache, out, cu_q, seqused, table, num_seqs, num_kv_heads,
            table.stride(0), math.log2(math.e) / math.sqrt(head_size),
            HEAD_DIM=head_size, DA=da, DB=max(db, 16), HAS_B=db > 0, GROUP=group,
            BLOCK_Q=block_q, BLOCK_M=block_m, BLOCK_N=64, PAGE=page, WIDEN=not q.is_cuda,
            num_warps=8, num_stages=2 if wide else 3)
        return out
