"""Atrex-Bench layer_norm in Triton: a tile of rows per program (about 2048 elements, so short
rows share one), each row read once into registers; mean and centred (biased) variance in fp32,
eps 1e-5 as F.layer_norm, then x_hat * w + b rounded once to the input's dtype. A 0-d input
is copied, as the reference returns it."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _layer_norm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, rows, hidden, eps, ROWS: tl.constexpr,
                       BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    col_ok = cols < hidden
    mask = (row < rows) & col_ok
    x = tl.load(x_ptr + row * hidden + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=1) / hidden
    xc = tl.where(col_ok, x - mean[:, None], 0.0)  # padding lanes add no (0 - mean)**2
    var = tl.sum(xc * xc, axis=1) / hidden
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
    out = xc * rstd[:, None] * w + b
    tl.store(out_ptr + row * hidden + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.eps = 1e-5  # F.layer_norm's default

    def forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        if x.ndim == 0:
            out = torch.empty_like(x)
            _copy_kernel[(1,)](x, out, 1, BLOCK=16)
            return out
        hidden = x.shape[-1]
        x2 = x.reshape(-1, hidden).contiguous()
        out = torch.empty_like(x2)
        rows = x2.shape[0]
        if rows == 0 or hidden == 0:
            return out.reshape(x.shape)
        block = triton.next_power_of_2(hidden)
        per = max(1, min(16, 2048 // block))  # rows per program: about 2048 elements a tile
        warps = 16 if block >= 8192 else 8 if block >= 2048 else 4
        _layer_norm_kernel[(triton.cdiv(rows, per),)](x2, weight.contiguous(),
                                                      bias.contiguous(), out, rows, hidden,
                                                      self.eps, ROWS=per, BLOCK=block,
                                                      num_warps=warps)
        return out.reshape(x.shape)
