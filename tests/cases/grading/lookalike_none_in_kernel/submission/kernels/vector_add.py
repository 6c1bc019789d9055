"""Vector add in Triton with a bug of its own."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _scale(v):
    v * 2.0  # forgot the return: the helper gives None on any device


@triton.jit
def _add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, _scale(x) + y, mask=mask)


def kernel(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    _add[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return out
