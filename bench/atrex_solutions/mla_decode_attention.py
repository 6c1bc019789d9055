"""Atrex-Bench mla_decode_attention in Triton: flash-decoding over the packed latent cache (one kv
head of kv_lora_rank + rope dims, its first kv_lora_rank dims the values), each sequence's start
found in the kernel by summing the lengths before it. One program per (sequence, block of 16+
heads, partition of the context) runs an fp32 online softmax (exp2) with tl.dot (bf16 in, fp32
accumulate); the latent and rope dims are two tiles. When one partition covers the context the
launch normalises and writes the output, else a second launch merges the partitions.
Off the GPU (Triton's CPU interpreter multiplies bf16 as raw bit patterns) tiles are widened."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def _seq_start(lens_ptr, b, batch, BLOCK_B: tl.constexpr):
    """Where sequence b's tokens start in the packed cache: the sum of the lengths before it."""
    start = tl.zeros((), dtype=tl.int64)
    for b0 in range(0, batch, BLOCK_B):
        i = b0 + tl.arange(0, BLOCK_B)
        lens = tl.load(lens_ptr + i, mask=i < b, other=0).to(tl.int64)
        start += tl.sum(lens, axis=0)
    return start


@triton.jit
def _mla_partial_kernel(q_ptr, kv_ptr, lens_ptr, o_ptr, part_o_ptr, part_m_ptr, part_l_ptr,
                        qk_scale, batch, heads, num_parts, stride_qb, stride_qh, stride_kv,
                        stride_ob, stride_oh,
                        LORA: tl.constexpr, ROPE: tl.constexpr, BLOCK_L: tl.constexpr,
                        BLOCK_R: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr,
                        PART: tl.constexpr, BLOCK_B: tl.constexpr, SINGLE: tl.constexpr,
                        WIDEN: tl.constexpr):
    b = tl.program_id(0)
    hb = tl.program_id(1)
    part = tl.program_id(2)
    seq_len = tl.load(lens_ptr + b).to(tl.int32)
    t_start = part * PART
    if not SINGLE:
        if t_start >= seq_len:
            return
    t_end = tl.minimum(t_start + PART, seq_len)
    base = _seq_start(lens_ptr, b, batch, BLOCK_B)

    h = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    h_ok = h < heads
    dl = tl.arange(0, BLOCK_L)
    dl_ok = dl < LORA
    dr = tl.arange(0, BLOCK_R)
    dr_ok = dr < ROPE
    q_rows = q_ptr + b.to(tl.int64) * stride_qb + h[:, None] * stride_qh
    q_lat = tl.load(q_rows + dl[None, :], mask=h_ok[:, None] & dl_ok[None, :], other=0.0)
    q_rope = tl.load(q_rows + LORA + dr[None, :], mask=h_ok[:, None] & dr_ok[None, :], other=0.0)
    if WIDEN:
        q_lat = q_lat.to(tl.float32)
        q_rope = q_rope.to(tl.float32)

    m_i = tl.full((BLOCK_H,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_H,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_H, BLOCK_L), dtype=tl.float32)
    for n0 in range(t_start, t_end, BLOCK_N):
        t = n0 + tl.arange(0, BLOCK_N)
        t_ok = t < t_end
        rows = kv_ptr + (base + t) * stride_kv
        # the latent tile serves as K^T (scores) and as V (output)
        kv_lat = tl.load(rows[:, None] + dl[None, :], mask=t_ok[:, None] & dl_ok[None, :],
                         other=0.0)
        k_rope = tl.load(rows[None, :] + LORA + dr[:, None], mask=dr_ok[:, None] & t_ok[None, :],
                         other=0.0)
        if WIDEN:
            kv_lat = kv_lat.to(tl.float32)
            k_rope = k_rope.to(tl.float32)
        s = tl.dot(q_lat, tl.trans(kv_lat))
        s = tl.dot(q_rope, k_rope, s)
        s = s * qk_scale  # log2 units
        s = tl.where(t_ok[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None]
        if WIDEN:
            acc = tl.dot(p, kv_lat, acc)
        else:
            acc = tl.dot(p.to(kv_lat.dtype), kv_lat, acc)
        m_i = m_new
    if SINGLE:
        out = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]  # an empty sequence gives zeros
        tl.store(o_ptr + b.to(tl.int64) * stride_ob + h[:, None] * stride_oh + dl[None, :],
                 out.to(o_ptr.dtype.element_ty), mask=h_ok[:, None] & dl_ok[None, :])
    else:
        idx = (b.to(tl.int64) * heads + h) * num_parts + part
        tl.store(part_m_ptr + idx, m_i, mask=h_ok)
        tl.store(part_l_ptr + idx, l_i, mask=h_ok)
        tl.store(part_o_ptr + idx[:, None] * LORA + dl[None, :], acc,
                 mask=h_ok[:, None] & dl_ok[None, :])


@triton.jit
def _mla_merge_kernel(part_o_ptr, part_m_ptr, part_l_ptr, lens_ptr, o_ptr, heads, num_parts,
                      stride_ob, stride_oh, LORA: tl.constexpr, BLOCK_L: tl.constexpr,
                      PART: tl.constexpr, BLOCK_P: tl.constexpr):
    b = tl.program_id(0)
    head = tl.program_id(1)
    used = tl.cdiv(tl.load(lens_ptr + b).to(tl.int32), PART)
    d = tl.arange(0, BLOCK_L)
    d_ok = d < LORA
    base = (b.to(tl.int64) * heads + head) * num_parts
    m = tl.full((), float("-inf"), dtype=tl.float32)
    total = tl.zeros((), dtype=tl.float32)
    acc = tl.zeros((BLOCK_L,), dtype=tl.float32)
    for p0 in range(0, used, BLOCK_P):
        p = p0 + tl.arange(0, BLOCK_P)
        p_ok = p < used
        m_p = tl.load(part_m_ptr + base + p, mask=p_ok, other=float("-inf"))
        l_p = tl.load(part_l_ptr + base + p, mask=p_ok, other=0.0)
        o_p = tl.load(part_o_ptr + (base + p)[:, None] * LORA + d[None, :],
                      mask=p_ok[:, None] & d_ok[None, :], other=0.0)
        m_new = tl.maximum(m, tl.max(m_p, axis=0))
        alpha = tl.math.exp2(m - m_new)
        w = tl.where(p_ok, tl.math.exp2(m_p - m_new), 0.0)
        total = total * alpha + tl.sum(l_p * w, axis=0)
        acc = acc * alpha + tl.sum(o_p * w[:, None], axis=0)
        m = m_new
    out = acc / tl.where(total > 0, total, 1.0)  # an empty sequence gives zeros
    tl.store(o_ptr + b.to(tl.int64) * stride_ob + head * stride_oh + d,
             out.to(o_ptr.dtype.element_ty), mask=d_ok)


class Model(torch.nn.Module):
    def __init__(self, nhead: int, kv_lora_rank: int, qk_rope_head_dim: int) -> None:
        super().__init__()
        self.nhead = nhead
        self.kv_lora_rank = kv_lora_rank
        self.qk_rope_head_dim = qk_rope_head_dim
        self.qk_head_dim = kv_lora_rank + qk_rope_head_dim
        self.v_head_dim = kv_lora_rank

    def forward(self, q: torch.Tensor, kv_cache: torch.Tensor,
                seq_lens: torch.Tensor) -> torch.Tensor:
        batch = seq_lens.shape[0]
        heads, lora, rope = self.nhead, self.kv_lora_rank, self.qk_rope_head_dim
        q_c = q if q.stride(-1) == 1 else q.contiguous()
        kv = kv_cache.reshape(kv_cache.shape[0], -1)
        if kv.stride(-1) != 1:
            kv = kv.contiguous()
        lens = seq_lens.contiguous()
        out = torch.empty((batch, heads, lora), dtype=q.dtype, device=q.device)
        if batch == 0 or heads == 0:
            return out
        total_kv = kv.shape[0]
        on_gpu = q.is_cuda
        block_h = max(16, min(32 if on_gpu else 16, triton.next_power_of_2(heads)))
        head_blocks = triton.cdiv(heads, block_h)
        block_n = 32 if on_gpu else 16
        # partitions: the packed cache's length bounds every context; the mean context is
        # split so that the programs that do work cover the SMs about twice
        mean_ctx = max(1, total_kv // batch)
        want = triton.cdiv(batch * head_blocks * mean_ctx, 2 * 132)
        part = min(4096, max(block_n, triton.next_power_of_2(want)))
        if not on_gpu:
            part = 64
        num_parts = max(1, triton.cdiv(total_kv, part))
        single = num_parts == 1
        if single:
            part_o = part_m = part_l = out  # unused
        else:
            part_o = torch.empty((batch, heads, num_parts, lora), dtype=torch.float32,
                                 device=q.device)
            part_m = torch.empty((batch, heads, num_parts), dtype=torch.float32,
                                 device=q.device)
            part_l = torch.empty((batch, heads, num_parts), dtype=torch.float32,
                                 device=q.device)
        block_l = triton.next_power_of_2(lora)
        scale = self.qk_head_dim ** -0.5
        _mla_partial_kernel[(batch, head_blocks, num_parts)](
            q_c, kv, lens, out, part_o, part_m, part_l, float(scale) * LOG2E, batch, heads,
            num_parts, q_c.stride(0), q_c.stride(1), kv.stride(0), out.stride(0),
            out.stride(1), LORA=lora, ROPE=rope, BLOCK_L=block_l,
            BLOCK_R=max(16, triton.next_power_of_2(rope)), BLOCK_H=block_h, BLOCK_N=block_n,
            PART=part, BLOCK_B=min(1024, triton.next_power_of_2(batch)), SINGLE=single,
            WIDEN=not on_gpu, num_warps=8 if block_h >= 32 else 4, num_stages=2)
        if not single:
            _mla_merge_kernel[(batch, heads)](
                part_o, part_m, part_l, lens, out, heads, num_parts, out.stride(0),
                out.stride(1), LORA=lora, BLOCK_L=block_l, PART=part,
                BLOCK_P=min(16, triton.next_power_of_2(num_parts)), num_warps=4)
        return out
