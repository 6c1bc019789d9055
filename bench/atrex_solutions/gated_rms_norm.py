"""Atrex-Bench gated_rms_norm in Triton: a tile of rows per program (hidden sizes of 128 would
otherwise launch hundreds of thousands of tiny programs); x and z are read once, the norm, the
weight and the silu/sigmoid gate are applied in fp32 (gate before or after the norm, as the
module says) and the result rounded once to the input's dtype. Triton's CPU interpreter
truncates fp32 -> bf16, so off the GPU the result is rounded to nearest even by hand first."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

_ACTIVATIONS = {"silu": 0, "swish": 0, "sigmoid": 1}


@triton.jit
def _round_bf16(x):
    """fp32 x rounded to the nearest bf16 value (ties to even), kept in fp32."""
    bits = x.to(tl.uint32, bitcast=True)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _gate(z, SIGMOID: tl.constexpr):
    s = 1.0 / (1.0 + tl.exp(-z))
    if SIGMOID:
        return s
    return z * s


@triton.jit
def _gated_rms_norm_kernel(x_ptr, w_ptr, z_ptr, out_ptr, rows, hidden, eps,
                           ROWS: tl.constexpr, BLOCK: tl.constexpr,
                           NORM_BEFORE_GATE: tl.constexpr, SIGMOID: tl.constexpr,
                           FIX_BF16: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    mask = (row < rows) & (cols < hidden)
    offs = row * hidden + cols
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    z = tl.load(z_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=cols < hidden, other=0.0).to(tl.float32)
    if not NORM_BEFORE_GATE:
        x = x * _gate(z, SIGMOID)
    rstd = 1.0 / tl.sqrt_rn(tl.sum(x * x, axis=1) / hidden + eps)
    out = x * rstd[:, None] * w
    if NORM_BEFORE_GATE:
        out = out * _gate(z, SIGMOID)
    if FIX_BF16:
        out = _round_bf16(out)
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-06, norm_before_gate: bool = True,
                 activation: str = 'silu') -> None:
        super().__init__()
        self.eps = float(eps)
        self.norm_before_gate = bool(norm_before_gate)
        self.activation = activation

    def forward(self, x: torch.Tensor, weight: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        if self.activation not in _ACTIVATIONS:
            raise ValueError(f'unsupported activation: {self.activation}')
        hidden = x.shape[-1]
        x2 = x.reshape(-1, hidden).contiguous()
        z2 = z.reshape(-1, hidden).contiguous()
        out = torch.empty_like(x2)
        rows = x2.shape[0]
        if rows and hidden:
            block = triton.next_power_of_2(hidden)
            per = max(1, min(32, 4096 // block))  # rows per program: about 4096 elements
            warps = 16 if block >= 8192 else 8 if block * per >= 4096 else 4
            _gated_rms_norm_kernel[(triton.cdiv(rows, per),)](
                x2, weight.contiguous(), z2, out, rows, hidden, self.eps, ROWS=per,
                BLOCK=block, NORM_BEFORE_GATE=self.norm_before_gate,
                SIGMOID=_ACTIVATIONS[self.activation] == 1,
                FIX_BF16=not x.is_cuda and x.dtype == torch.bfloat16, num_warps=warps)
        return out.reshape(x.shape)
