"""Atrex-Bench fused_add_rms_norm in Triton: residual + x rounded to the residual's dtype (the
new residual, stored), then that rounded sum normalised in fp32 as rms_norm does; one read of
each input, one write of each output, a tile of rows per program."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _fused_add_rms_norm_kernel(x_ptr, r_ptr, w_ptr, out_ptr, res_ptr, rows, hidden, eps,
                               ROWS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    mask = (row < rows) & (cols < hidden)
    offs = row * hidden + cols
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    # The reference rounds the sum to the residual's dtype before normalising it.
    s = (x + r).to(res_ptr.dtype.element_ty)
    tl.store(res_ptr + offs, s, mask=mask)
    s32 = s.to(tl.float32)
    w = tl.load(w_ptr + cols, mask=cols < hidden, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(s32 * s32, axis=1) / hidden + eps)
    tl.store(out_ptr + offs, (s32 * rstd[:, None] * w).to(out_ptr.dtype.element_ty), mask=mask)


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = float(eps)

    def forward(self, x: torch.Tensor, residual: torch.Tensor,
                weight: torch.Tensor) -> dict[str, torch.Tensor]:
        hidden = x.shape[-1]
        x2 = x.reshape(-1, hidden).contiguous()
        r2 = residual.reshape(-1, hidden).contiguous()
        out = torch.empty_like(x2)
        res = torch.empty_like(r2)
        rows = x2.shape[0]
        block = triton.next_power_of_2(hidden)
        per = max(1, min(16, 2048 // block))
        warps = 16 if block >= 8192 else 8 if block >= 2048 else 4
        _fused_add_rms_norm_kernel[(triton.cdiv(rows, per),)](
            x2, r2, weight.contiguous(), out, res, rows, hidden, self.eps, ROWS=per,
            BLOCK=block, num_warps=warps)
        return {"out": out.reshape(x.shape), "residual": res.reshape(residual.shape)}
