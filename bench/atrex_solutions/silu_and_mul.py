"""Atrex-Bench silu_and_mul in Triton: out = silu(gate) * up over the last dimension's two
halves, one flat pass over the output. Rounded as the reference rounds: silu(gate) in fp32
then to the input's dtype, the product rounded again."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _silu_and_mul_kernel(x_ptr, out_ptr, n_out, inter, width, BLOCK: tl.constexpr):
    idx = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n_out
    row = idx // inter
    col = idx - row * inter
    gate = tl.load(x_ptr + row * width + col, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * width + inter + col, mask=mask, other=0.0)
    act = (gate / (1.0 + tl.exp(-gate))).to(out_ptr.dtype.element_ty)
    out = act.to(tl.float32) * up.to(tl.float32)
    tl.store(out_ptr + idx, out.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _silu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    idx = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n
    x = tl.load(x_ptr + idx, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + idx, (x / (1.0 + tl.exp(-x))).to(out_ptr.dtype.element_ty), mask=mask)


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xc = x.contiguous()
        width = x.shape[-1]
        if width < 2:  # the reference's own case: silu of the whole tensor
            out = torch.empty_like(xc)
            _silu_kernel[(triton.cdiv(xc.numel(), 1024),)](xc, out, xc.numel(), BLOCK=1024)
            return out
        inter = width // 2
        out = torch.empty((*x.shape[:-1], inter), dtype=x.dtype, device=x.device)
        n_out = out.numel()
        _silu_and_mul_kernel[(triton.cdiv(n_out, 1024),)](xc, out, n_out, inter, width,
                                                          BLOCK=1024, num_warps=4)
        return out
