"""Atrex-Bench chunk_delta_rule_output in Triton: one launch, one program per (batch*head, chunk,
value block). Over key blocks it accumulates q @ h and q @ k^T with tl.dot (bf16 in, fp32
accumulate), then gates them (exp(g_i), and exp(g_i - g_j) where that is <= 0 on the lower
triangle), rounds the attention to bf16 as the reference does, adds attn @ v and scales.
Off the GPU (Triton's CPU interpreter, whose bf16 dot and fp32->bf16 cast are wrong) the bf16
roundings are done by hand in fp32 and the dots take fp32 tiles holding the same bf16 values."""

from __future__ import annotations

import math

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
def _chunk_o_kernel(q_ptr, k_ptr, v_ptr, h_ptr, g_ptr, o_ptr, scale,
                    T, NT, H, HQ, HPQ, K, V, n_vb,
                    CS: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
                    WIDEN: tl.constexpr):
    pid = tl.program_id(0)
    iv = pid % n_vb
    rest = pid // n_vb
    c = rest % NT
    bh = rest // NT
    b = bh // H
    hd = bh % H
    qh = tl.minimum(hd // HPQ, HQ - 1)
    b64 = b.to(tl.int64)

    rt = tl.arange(0, BT)
    t = c * CS + rt
    mt = (rt < CS) & (t < T)
    tok = b64 * T + t  # [BT] flat (batch, token) rows
    rv = iv * BV + tl.arange(0, BV)
    mv = rv < V
    rk = tl.arange(0, BK)

    acc = tl.zeros((BT, BV), dtype=tl.float32)  # q @ h
    att = tl.zeros((BT, BT), dtype=tl.float32)  # q @ k^T
    h_base = h_ptr + ((b64 * NT + c) * H + hd) * K * V
    for k0 in range(0, K, BK):
        kk = k0 + rk
        mk = kk < K
        qt = tl.load(q_ptr + (tok[:, None] * HQ + qh) * K + kk[None, :],
                     mask=mt[:, None] & mk[None, :], other=0.0)
        kt = tl.load(k_ptr + (tok[None, :] * HQ + qh) * K + kk[:, None],
                     mask=mk[:, None] & mt[None, :], other=0.0)
        ht = tl.load(h_base + kk[:, None] * V + rv[None, :], mask=mk[:, None] & mv[None, :],
                     other=0.0)
        if WIDEN:
            qt = qt.to(tl.float32)
            kt = kt.to(tl.float32)
            ht = ht.to(tl.float32)
        acc = tl.dot(qt, ht, acc)
        att = tl.dot(qt, kt, att)

    gt = tl.load(g_ptr + tok * H + hd, mask=mt, other=0.0).to(tl.float32)
    acc = acc * tl.exp(gt)[:, None]
    gd = gt[:, None] - gt[None, :]
    keep = (rt[:, None] >= rt[None, :]) & (gd <= 0) & mt[None, :]
    att = att * tl.exp(tl.where(keep, gd, float("-inf")))
    vt = tl.load(v_ptr + (tok[:, None] * H + hd) * V + rv[None, :],
                 mask=mt[:, None] & mv[None, :], other=0.0)
    if WIDEN:
        att = _round_bf16(att)
        vt = vt.to(tl.float32)
    else:
        att = att.to(vt.dtype)
    acc = tl.dot(att, vt, acc)
    out = acc * scale
    if WIDEN:
        out = _round_bf16(out)
    tl.store(o_ptr + (tok[:, None] * H + hd) * V + rv[None, :], out.to(o_ptr.dtype.element_ty),
             mask=mt[:, None] & mv[None, :])


class Model(torch.nn.Module):
    def __init__(self, chunk_size: int = 64, scale: float | None = None) -> None:
        super().__init__()
        self.chunk_size = int(chunk_size)
        self.scale = scale

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, h: torch.Tensor,
                g: torch.Tensor) -> torch.Tensor:
        batch, tokens, num_q_heads, key_dim = q.shape
        num_heads, value_dim = v.shape[2], v.shape[3]
        heads_per_q = max(num_heads // num_q_heads, 1)
        cs = self.chunk_size
        scale = self.scale if self.scale is not None else key_dim ** (-0.5)
        num_chunks = math.ceil(tokens / cs)
        q_c, k_c, v_c = q.contiguous(), k.contiguous(), v.contiguous()
        h_c, g_c = h.contiguous(), g.contiguous()
        out = torch.empty((batch, tokens, num_heads, value_dim), dtype=v.dtype, device=v.device)
        if batch * tokens * num_heads * value_dim == 0:
            return out
        bt = max(16, triton.next_power_of_2(cs))
        bk = max(16, min(64, triton.next_power_of_2(key_dim)))
        bv = max(16, min(128, triton.next_power_of_2(value_dim)))
        # narrower value blocks when there are too few (batch*head, chunk) programs for the SMs
        pairs = batch * num_heads * num_chunks
        while bv > 32 and pairs * triton.cdiv(value_dim, bv) < 264:
            bv //= 2
        if not q.is_cuda:  # small tiles keep the interpreter fast
            bk = max(16, min(32, bk))
        n_vb = triton.cdiv(value_dim, bv)
        warps = 8 if bt * bv >= 8192 else 4
        _chunk_o_kernel[(pairs * n_vb,)](
            q_c, k_c, v_c, h_c, g_c, out, float(scale), tokens, num_chunks, num_heads,
            num_q_heads, heads_per_q, key_dim, value_dim, n_vb,
            CS=cs, BT=bt, BK=bk, BV=bv, WIDEN=not q.is_cuda, num_warps=warps, num_stages=2)
        return out
