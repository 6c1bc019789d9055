"""Atrex-Bench mrope in Triton: one launch; each program takes a block of tokens and a group of
the q and k heads. It gathers that block's cos/sin rows once (each frequency's axis, t/h/w, from
the sections or the interleaved pattern, worked out in the kernel) and reuses them for every
head of its group, rotating in fp32 (NeoX halves or even/odd pairs) and copying the dims past
rotary_dim. Off the GPU (Triton's CPU interpreter truncates fp32 -> bf16) rounding is by hand."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _round_bf16(x):
    """fp32 x rounded to the nearest bf16 value (ties to even), kept in fp32."""
    bits = x.to(tl.uint32, bitcast=True)
    bits = (bits + ((bits >> 16) & 1) + 0x7FFF) & 0xFFFF0000
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _rotate_head(src, dst, rows_ok, j, j_ok, c, s, HALF: tl.constexpr, HEAD: tl.constexpr,
                 ROT: tl.constexpr, PASS_PAD: tl.constexpr, NEOX: tl.constexpr,
                 BF16_BY_HAND: tl.constexpr):
    """src/dst: [BLOCK_T, 1] pointers to one head of each token."""
    m = rows_ok & j_ok
    if NEOX:
        i1 = j
        i2 = j + HALF
    else:
        i1 = 2 * j
        i2 = 2 * j + 1
    x1 = tl.load(src + i1, mask=m, other=0.0).to(tl.float32)
    x2 = tl.load(src + i2, mask=m, other=0.0).to(tl.float32)
    o1 = x1 * c - x2 * s
    o2 = x2 * c + x1 * s
    if BF16_BY_HAND:
        o1 = _round_bf16(o1)
        o2 = _round_bf16(o2)
    dtype = dst.dtype.element_ty
    tl.store(dst + i1, o1.to(dtype), mask=m)
    tl.store(dst + i2, o2.to(dtype), mask=m)
    if PASS_PAD > 0:
        p = ROT + tl.arange(0, PASS_PAD)[None, :]
        pm = rows_ok & (p < HEAD)
        tl.store(dst + p, tl.load(src + p, mask=pm, other=0.0), mask=pm)


@triton.jit
def _mrope_kernel(q_ptr, k_ptr, cos_ptr, sin_ptr, q_out_ptr, k_out_ptr, tokens, q_heads,
                  k_heads, heads_per_group, stride_qt, stride_kt, stride_ca, stride_ct,
                  stride_sa, stride_st, sec0, sec1, sec2,
                  HALF: tl.constexpr, HALF_PAD: tl.constexpr, HEAD: tl.constexpr,
                  ROT: tl.constexpr, PASS_PAD: tl.constexpr, BLOCK_T: tl.constexpr,
                  NEOX: tl.constexpr, INTERLEAVED: tl.constexpr,
                  BF16_BY_HAND: tl.constexpr):
    tb = tl.program_id(0)
    grp = tl.program_id(1)
    t = tb * BLOCK_T + tl.arange(0, BLOCK_T)
    t_ok = t < tokens
    j = tl.arange(0, HALF_PAD)
    j_ok = j < HALF
    # the axis (0: t, 1: h, 2: w) each frequency reads its cos/sin from
    if INTERLEAVED:
        axis = tl.where((j % 3 == 1) & (j <= 3 * sec1), 1,
                        tl.where((j % 3 == 2) & (j <= 3 * sec2), 2, 0))
    else:
        axis = tl.where(j < sec0, 0, tl.where(j < sec0 + sec1, 1, 2))
    t64 = t.to(tl.int64)[:, None]
    cs_m = t_ok[:, None] & j_ok[None, :]
    c = tl.load(cos_ptr + axis[None, :] * stride_ca + t64 * stride_ct + j[None, :], mask=cs_m,
                other=0.0).to(tl.float32)
    s = tl.load(sin_ptr + axis[None, :] * stride_sa + t64 * stride_st + j[None, :], mask=cs_m,
                other=0.0).to(tl.float32)
    rows_ok = t_ok[:, None]
    jj = j[None, :]
    jm = j_ok[None, :]
    # this group's heads: [lo, hi) of the q heads followed by the k heads
    lo = grp * heads_per_group
    hi = tl.minimum(lo + heads_per_group, q_heads + k_heads)
    for h in range(lo, tl.minimum(hi, q_heads)):
        _rotate_head(q_ptr + t64 * stride_qt + h * HEAD, q_out_ptr + t64 * (q_heads * HEAD)
                     + h * HEAD, rows_ok, jj, jm, c, s, HALF, HEAD, ROT, PASS_PAD, NEOX,
                     BF16_BY_HAND)
    for h in range(tl.maximum(lo, q_heads) - q_heads, hi - q_heads):
        _rotate_head(k_ptr + t64 * stride_kt + h * HEAD, k_out_ptr + t64 * (k_heads * HEAD)
                     + h * HEAD, rows_ok, jj, jm, c, s, HALF, HEAD, ROT, PASS_PAD, NEOX,
                     BF16_BY_HAND)


class Model(torch.nn.Module):
    def __init__(self, head_size: int, rotary_dim: int, mrope_section: list[int],
                 mrope_interleaved: bool = False, is_neox_style: bool = True) -> None:
        super().__init__()
        self.head_size = int(head_size)
        self.rotary_dim = int(rotary_dim)
        self.mrope_section = [int(x) for x in mrope_section]
        self.mrope_interleaved = bool(mrope_interleaved)
        self.is_neox_style = bool(is_neox_style)

    def forward(self, q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                sin: torch.Tensor) -> dict[str, torch.Tensor]:
        tokens = q.shape[0]
        head = self.head_size
        q_heads = q.shape[1] // head
        k_heads = k.shape[1] // head
        q_in = q if q.stride(-1) == 1 else q.contiguous()
        k_in = k if k.stride(-1) == 1 else k.contiguous()
        cos_in = cos if cos.stride(-1) == 1 else cos.contiguous()
        sin_in = sin if sin.stride(-1) == 1 else sin.contiguous()
        q_out = torch.empty((tokens, q.shape[1]), dtype=q.dtype, device=q.device)
        k_out = torch.empty((tokens, k.shape[1]), dtype=k.dtype, device=k.device)
        if tokens == 0 or q_heads + k_heads == 0:
            return {'q': q_out, 'k': k_out}
        half = self.rotary_dim // 2
        sec = [*self.mrope_section, 0, 0, 0][:3]
        # tokens per program, then enough head groups that the grid covers the SMs twice
        block_t = 16 if q.is_cuda else 8
        t_blocks = triton.cdiv(tokens, block_t)
        heads_total = q_heads + k_heads
        groups = max(1, min(heads_total, triton.cdiv(2 * 132, t_blocks)))
        per_group = triton.cdiv(heads_total, groups)
        groups = triton.cdiv(heads_total, per_group)
        half_pad = triton.next_power_of_2(max(half, 1))
        _mrope_kernel[(t_blocks, groups)](
            q_in, k_in, cos_in, sin_in, q_out, k_out, tokens, q_heads, k_heads, per_group,
            q_in.stride(0), k_in.stride(0), cos_in.stride(0), cos_in.stride(1),
            sin_in.stride(0), sin_in.stride(1), sec[0], sec[1], sec[2],
            HALF=half, HALF_PAD=half_pad, HEAD=head, ROT=self.rotary_dim,
            PASS_PAD=(triton.next_power_of_2(head - self.rotary_dim)
                      if head > self.rotary_dim else 0),
            BLOCK_T=block_t, NEOX=self.is_neox_style, INTERLEAVED=self.mrope_interleaved,
            BF16_BY_HAND=(not q.is_cuda) and q.dtype == torch.bfloat16,
            num_warps=4)
        return {'q': q_out, 'k': k_out}
