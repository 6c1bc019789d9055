"""Atrex-Bench fused_qkv_rope in Triton: one launch; each program takes one token and a block of
the packed row's q/k/v heads, adds the bias (rounded to the input dtype as the reference does),
rotates q and k heads with fp32 cos/sin built in the kernel (inverse frequencies by exp2, angles
reduced modulo 2*pi before cos/sin) and writes q, k and v as contiguous tensors. Off the GPU
(Triton's CPU interpreter truncates fp32 -> bf16) the bf16 roundings are done by hand."""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

_INV_2PI = tl.constexpr(0.15915494309189535)
_2PI_HI = tl.constexpr(6.28125)  # 8 significant bits: k * _2PI_HI is exact for k < 2**16
_2PI_LO = tl.constexpr(0.0019353071795864769)  # 2*pi - _2PI_HI


@triton.jit
def _round_bf16(x):
    """fp32 x rounded to the nearest bf16 value (ties to even), kept in fp32."""
    bits = x.to(tl.uint32, bitcast=True)
    bits = (bits + ((bits >> 16) & 1) + 0x7FFF) & 0xFFFF0000
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _to_out(x, dtype: tl.constexpr, BF16_BY_HAND: tl.constexpr):
    """fp32 x rounded to the output dtype, returned in that dtype."""
    if BF16_BY_HAND:
        x = _round_bf16(x)
    return x.to(dtype)


@triton.jit
def _qkv_rope_kernel(qkv_ptr, bias_ptr, pos_ptr, q_ptr, k_ptr, v_ptr,
                     n_heads, n_kv_heads, heads_total, head_blocks, row_stride,
                     log2_base_hi, log2_base_lo,
                     HEAD_DIM: tl.constexpr, ROPE_DIM: tl.constexpr, HALF_PAD: tl.constexpr,
                     PASS_PAD: tl.constexpr, BLOCK_H: tl.constexpr, HAS_BIAS: tl.constexpr,
                     BF16_BY_HAND: tl.constexpr):
    pid = tl.program_id(0)
    tok = (pid // head_blocks).to(tl.int64)
    hb = pid % head_blocks
    half: tl.constexpr = ROPE_DIM // 2
    dtype = q_ptr.dtype.element_ty

    # cos/sin for this token: inv_freq_j = base ** (-2j / rope_dim), the exponent split in an
    # exactly multiplied high part and a small low part.
    j = tl.arange(0, HALF_PAD)
    e = (2 * j).to(tl.float32) / ROPE_DIM
    inv_freq = tl.exp2(-e * log2_base_hi) * tl.exp2(-e * log2_base_lo)
    angle = tl.load(pos_ptr + tok).to(tl.float32) * inv_freq
    turns = tl.floor(angle * _INV_2PI + 0.5)
    reduced = (angle - turns * _2PI_HI) - turns * _2PI_LO
    c = tl.cos(reduced)[None, :]
    s = tl.sin(reduced)[None, :]

    h = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    h_ok = h < heads_total
    is_q = h < n_heads
    is_k = (h >= n_heads) & (h < n_heads + n_kv_heads)
    is_v = h >= n_heads + n_kv_heads
    rope = (is_q | is_k)[:, None]
    # destination rows: q[tok, h], k[tok, h - n_heads], v[tok, h - n_heads - n_kv_heads]
    q_row = (tok * n_heads + h) * HEAD_DIM
    k_row = (tok * n_kv_heads + (h - n_heads)) * HEAD_DIM
    v_row = (tok * n_kv_heads + (h - n_heads - n_kv_heads)) * HEAD_DIM
    src_row = qkv_ptr + tok * row_stride + h * HEAD_DIM

    jm = (h_ok[:, None]) & (j[None, :] < half)
    x1 = tl.load(src_row[:, None] + j[None, :], mask=jm, other=0.0).to(tl.float32)
    x2 = tl.load(src_row[:, None] + half + j[None, :], mask=jm, other=0.0).to(tl.float32)
    if HAS_BIAS:
        b_row = bias_ptr + h * HEAD_DIM
        b1 = tl.load(b_row[:, None] + j[None, :], mask=jm, other=0.0).to(tl.float32)
        b2 = tl.load(b_row[:, None] + half + j[None, :], mask=jm, other=0.0).to(tl.float32)
        # qkv + bias is a tensor of the input dtype in the reference
        x1 = _to_out(x1 + b1, dtype, BF16_BY_HAND).to(tl.float32)
        x2 = _to_out(x2 + b2, dtype, BF16_BY_HAND).to(tl.float32)
    o1 = tl.where(rope, x1 * c - x2 * s, x1)
    o2 = tl.where(rope, x2 * c + x1 * s, x2)
    o1 = _to_out(o1, dtype, BF16_BY_HAND)
    o2 = _to_out(o2, dtype, BF16_BY_HAND)
    jq = j[None, :]
    tl.store(q_ptr + q_row[:, None] + jq, o1, mask=jm & is_q[:, None])
    tl.store(q_ptr + q_row[:, None] + half + jq, o2, mask=jm & is_q[:, None])
    tl.store(k_ptr + k_row[:, None] + jq, o1, mask=jm & is_k[:, None])
    tl.store(k_ptr + k_row[:, None] + half + jq, o2, mask=jm & is_k[:, None])
    tl.store(v_ptr + v_row[:, None] + jq, o1, mask=jm & is_v[:, None])
    tl.store(v_ptr + v_row[:, None] + half + jq, o2, mask=jm & is_v[:, None])

    if PASS_PAD > 0:
        # the dims past rope_dim pass through (bias added)
        p = ROPE_DIM + tl.arange(0, PASS_PAD)[None, :]
        pm = h_ok[:, None] & (p < HEAD_DIM)
        xp = tl.load(src_row[:, None] + p, mask=pm, other=0.0)
        if HAS_BIAS:
            bp = tl.load(bias_ptr + h[:, None] * HEAD_DIM + p, mask=pm, other=0.0)
            xp = _to_out(xp.to(tl.float32) + bp.to(tl.float32), dtype, BF16_BY_HAND)
        xp = xp.to(dtype)
        tl.store(q_ptr + q_row[:, None] + p, xp, mask=pm & is_q[:, None])
        tl.store(k_ptr + k_row[:, None] + p, xp, mask=pm & is_k[:, None])
        tl.store(v_ptr + v_row[:, None] + p, xp, mask=pm & is_v[:, None])


def _split_log2(base: float) -> tuple[float, float]:
    """log2(base) as hi + lo, hi with 12 significant bits so that e * hi is exact in fp32 for
    the dyadic exponents e = 2j / rope_dim of a power-of-two rope_dim."""
    full = math.log2(base)
    if full == 0.0:
        return 0.0, 0.0
    exp = math.floor(math.log2(abs(full)))
    step = 2.0 ** (exp - 11)
    hi = round(full / step) * step
    return hi, full - hi


class Model(torch.nn.Module):
    def __init__(self, num_heads: int, num_kv_heads: int, head_dim: int, rope_dim: int,
                 rope_base: float = 10000.0) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.rope_dim = rope_dim
        self.rope_base = rope_base

    def forward(self, qkv: torch.Tensor, positions: torch.Tensor,
                qkv_bias: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        heads, kv_heads, head_dim = self.num_heads, self.num_kv_heads, self.head_dim
        width = qkv.shape[-1]
        x = qkv.reshape(-1, width)
        if x.stride(-1) != 1:
            x = x.contiguous()
        pos = positions.reshape(-1).contiguous()
        tokens = x.shape[0]
        q = torch.empty((tokens, heads, head_dim), dtype=qkv.dtype, device=qkv.device)
        k = torch.empty((tokens, kv_heads, head_dim), dtype=qkv.dtype, device=qkv.device)
        v = torch.empty((tokens, kv_heads, head_dim), dtype=qkv.dtype, device=qkv.device)
        if tokens == 0:
            return q, k, v
        bias = qkv_bias.reshape(-1).contiguous() if qkv_bias is not None else x
        heads_total = heads + 2 * kv_heads
        # heads per program: a few for decode (spread over the SMs), more for long prefills
        block_h = 2 if tokens <= 16 else 4 if tokens <= 256 else 8
        block_h = min(block_h, triton.next_power_of_2(heads_total))
        head_blocks = triton.cdiv(heads_total, block_h)
        hi, lo = _split_log2(float(self.rope_base))
        _qkv_rope_kernel[(tokens * head_blocks,)](
            x, bias, pos, q, k, v, heads, kv_heads, heads_total, head_blocks, x.stride(0),
            hi, lo, HEAD_DIM=head_dim, ROPE_DIM=self.rope_dim,
            HALF_PAD=triton.next_power_of_2(max(1, self.rope_dim // 2)),
            PASS_PAD=(triton.next_power_of_2(head_dim - self.rope_dim)
                      if head_dim > self.rope_dim else 0),
            BLOCK_H=block_h, HAS_BIAS=qkv_bias is not None,
            BF16_BY_HAND=(not qkv.is_cuda) and qkv.dtype == torch.bfloat16,
            num_warps=1 if block_h * self.rope_dim <= 256 else 2 if block_h <= 4 else 4)
        return q, k, v
