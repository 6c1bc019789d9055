"""RMSNorm in Triton, honest: one program per row, fp32 inside."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from triton.language.extra import libdevice


@triton.jit
def _rmsnorm(x_ptr, w_ptr, out_ptr, hidden, stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < hidden
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    mean_sq = tl.sum(x * x, axis=0) / hidden
    rstd = libdevice.rsqrt(mean_sq + eps)  # a stub returning None in the interpreter
    y = x * rstd * w
    tl.store(out_ptr + row * stride + cols, y.to(tl.bfloat16), mask=mask)


def kernel(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    hidden = x.shape[-1]
    out = torch.empty_like(x)
    _rmsnorm[(x.numel() // hidden,)](x, w, out, hidden, hidden, eps,
                                     BLOCK=triton.next_power_of_2(hidden))
    return out
