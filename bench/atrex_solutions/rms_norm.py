"""Atrex-Bench rms_norm in Triton: a tile of rows per program (several short rows share one,
so hidden sizes of 128 do not launch half a million programs); each row is read once and
normalised in fp32, then rounded once to the input's dtype."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, out_ptr, rows, hidden, eps, ROWS: tl.constexpr,
                     BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    mask = (row < rows) & (cols < hidden)
    x = tl.load(x_ptr + row * hidden + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=cols < hidden, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / hidden + eps)
    out = x * rstd[:, None] * w
    tl.store(out_ptr + row * hidden + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = float(eps)

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        hidden = x.shape[-1]
        x2 = x.reshape(-1, hidden).contiguous()
        out = torch.empty_like(x2)
        rows = x2.shape[0]
        block = triton.next_power_of_2(hidden)
        per = max(1, min(16, 2048 // block))  # rows per program: about 2048 elements a tile
        warps = 16 if block >= 8192 else 8 if block >= 2048 else 4
        _rms_norm_kernel[(triton.cdiv(rows, per),)](x2, weight.contiguous(), out, rows, hidden,
                                                    self.eps, ROWS=per, BLOCK=block,
                                                    num_warps=warps)
        return out.reshape(x.shape)
