"""Atrex-Bench gated_delta_rule_update in Triton: one launch; a program per (value block, v head,
batch row) keeps its [key_dim, BV] fp32 state tile in registers and walks the tokens in-kernel
(l2 norm, softplus gate, sigmoid beta, delta update, output), while extra programs of the same
grid copy the state rows no batch row updates into final_state."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _log1p(x):
    # log1p without libdevice: log(1 + x) corrected by x / ((1 + x) - 1) (Goldberg's trick).
    u = 1.0 + x
    return tl.where(u == 1.0, x, tl.log(u) * (x / (u - 1.0)))


@triton.jit
def _gdr_kernel(a_log_ptr, a_ptr, dt_bias_ptr, q_ptr, k_ptr, v_ptr, b_ptr, state_ptr, idx_ptr,
                out_ptr, final_ptr, batch, tokens, hq_count, hv_count, heads_per_q, key_dim,
                value_dim, scale, sp_beta, sp_threshold, USE_L2NORM: tl.constexpr,
                BK: tl.constexpr, BV: tl.constexpr, BB: tl.constexpr):
    pv = tl.program_id(0)
    hv = tl.program_id(1)
    row = tl.program_id(2)  # < batch: a batch row to update; else the state row row - batch
    rk = tl.arange(0, BK)
    rv = pv * BV + tl.arange(0, BV)
    mk = rk < key_dim
    mv = rv < value_dim
    tile = rk[:, None] * value_dim + rv[None, :]
    tmask = mk[:, None] & mv[None, :]
    head_elems = key_dim * value_dim
    rb = tl.arange(0, BB)
    if row < batch:
        sidx = tl.load(idx_ptr + row).to(tl.int64)
        # index_copy_ with a repeated index keeps the last batch row's state: an earlier row
        # sharing its index with a later one computes its output but writes no state.
        later = 0
        for j0 in range(0, batch, BB):
            j = j0 + rb
            other = tl.load(idx_ptr + j, mask=j < batch, other=-1).to(tl.int64)
            later += tl.sum(((other == sidx) & (j > row) & (j < batch)).to(tl.int32), axis=0)
        state_off = (sidx * hv_count + hv) * head_elems
        h = tl.load(state_ptr + state_off + tile, mask=tmask, other=0.0).to(tl.float32)

        hq = tl.minimum(hv // heads_per_q, hq_count - 1)
        neg_a = -tl.exp(tl.load(a_log_ptr + hv).to(tl.float32))
        dt_b = tl.load(dt_bias_ptr + hv).to(tl.float32)
        row64 = row.to(tl.int64)
        qk_p = (row64 * tokens * hq_count + hq) * key_dim + rk
        v_p = (row64 * tokens * hv_count + hv) * value_dim + rv
        g_p = row64 * tokens * hv_count + hv
        qk_step = hq_count * key_dim
        v_step = hv_count * value_dim
        for _t in range(0, tokens):
            qt = tl.load(q_ptr + qk_p, mask=mk, other=0.0).to(tl.float32)
            kt = tl.load(k_ptr + qk_p, mask=mk, other=0.0).to(tl.float32)
            vt = tl.load(v_ptr + v_p, mask=mv, other=0.0).to(tl.float32)
            at = tl.load(a_ptr + g_p).to(tl.float32)
            bt = tl.load(b_ptr + g_p).to(tl.float32)
            if USE_L2NORM:  # F.normalize: x / max(||x||, 1e-6)
                qt = tl.div_rn(qt, tl.maximum(tl.sqrt_rn(tl.sum(qt * qt, axis=0)), 1e-6))
                kt = tl.div_rn(kt, tl.maximum(tl.sqrt_rn(tl.sum(kt * kt, axis=0)), 1e-6))
            x = at + dt_b
            xb = x * sp_beta  # F.softplus: x where x * beta > threshold
            soft = tl.where(xb > sp_threshold, x, _log1p(tl.exp(xb)) / sp_beta)
            gate = soft * neg_a
            beta = 1.0 / (1.0 + tl.exp(-bt))
            h = h * tl.exp(gate)
            hk = tl.sum(h * kt[:, None], axis=0)
            v_new = (vt - hk) * beta
            h = h + kt[:, None] * v_new[None, :]
            o = tl.sum(h * (qt * scale)[:, None], axis=0)
            tl.store(out_ptr + v_p, o.to(out_ptr.dtype.element_ty), mask=mv)
            qk_p += qk_step
            v_p += v_step
            g_p += hv_count
        if later == 0:
            tl.store(final_ptr + state_off + tile, h.to(final_ptr.dtype.element_ty),
                     mask=tmask)
    else:
        srow = (row - batch).to(tl.int64)
        hits = 0
        for j0 in range(0, batch, BB):
            j = j0 + rb
            other = tl.load(idx_ptr + j, mask=j < batch, other=-1).to(tl.int64)
            hits += tl.sum(((other == srow) & (j < batch)).to(tl.int32), axis=0)
        if hits == 0:  # a state row no batch row updates: copied unchanged
            off = (srow * hv_count + hv) * head_elems
            h0 = tl.load(state_ptr + off + tile, mask=tmask, other=0.0)
            tl.store(final_ptr + off + tile, h0.to(final_ptr.dtype.element_ty), mask=tmask)


class Model(torch.nn.Module):
    def __init__(self, softplus_beta: float = 1.0, softplus_threshold: float = 20.0,
                 scale: float | None = None, use_qk_l2norm: bool = True) -> None:
        super().__init__()
        self.softplus_beta = float(softplus_beta)
        self.softplus_threshold = float(softplus_threshold)
        self.scale = scale
        self.use_qk_l2norm = bool(use_qk_l2norm)

    def forward(self, A_log: torch.Tensor, a: torch.Tensor, dt_bias: torch.Tensor,
                q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, b: torch.Tensor,
                initial_state: torch.Tensor,
                initial_state_indices: torch.Tensor) -> dict[str, torch.Tensor]:
        batch, tokens, num_q_heads, key_dim = q.shape
        num_v_heads, value_dim = v.shape[2], v.shape[3]
        state_count = initial_state.shape[0]
        heads_per_q = max(num_v_heads // num_q_heads, 1)
        scale = float(self.scale) if self.scale is not None else key_dim ** (-0.5)
        q, k, v, a, b = (t.contiguous() for t in (q, k, v, a, b))
        state = initial_state.contiguous()
        idx = initial_state_indices.contiguous()
        out = torch.empty_like(v)
        final = torch.empty_like(state)
        bk = triton.next_power_of_2(key_dim)
        # Small value blocks: more programs in flight for the sequential token loop, and a
        # [BK, BV] tile that fits one warp's registers.
        bv = min(triton.next_power_of_2(value_dim), max(8, 1024 // bk))
        bb = min(triton.next_power_of_2(max(batch, 1)), 128)
        grid = (triton.cdiv(value_dim, bv), num_v_heads, batch + state_count)
        _gdr_kernel[grid](A_log.contiguous(), a, dt_bias.contiguous(), q, k, v, b, state, idx,
                          out, final, batch, tokens, num_q_heads, num_v_heads, heads_per_q,
                          key_dim, value_dim, scale, self.softplus_beta,
                          self.softplus_threshold, USE_L2NORM=self.use_qk_l2norm, BK=bk,
                          BV=bv, BB=bb, num_warps=1)
        return {"out": out, "final_state": final}
