"""layer_norm in Triton: one program per row; the row is read once and kept in registers, the
mean and the centred (biased) variance are computed from it in fp32, then it is normalised."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _layer_norm_kernel(x_ptr, w_ptr, b_ptr, out_ptr, hidden, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < hidden
    x = tl.load(x_ptr + row * hidden + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / hidden
    xc = tl.where(mask, x - mean, 0.0)  # the padding lanes must not add (0 - mean)**2
    var = tl.sum(xc * xc, axis=0) / hidden
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * hidden + cols, (xc * rstd * w + b).to(tl.bfloat16), mask=mask)


def kernel(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    hidden = x.shape[-1]
    out = torch.empty_like(x)
    block = triton.next_power_of_2(hidden)
    num_warps = 16 if block >= 8192 else 8 if block >= 2048 else 4
    _layer_norm_kernel[(x.numel() // hidden,)](x, w, b, out, hidden, eps, BLOCK=block,
                                               num_warps=num_warps)
    return out
