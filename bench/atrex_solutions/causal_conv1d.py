"""Atrex-Bench causal_conv1d in Triton: x [dim, T] and the state's last width-1 columns form the
padded sequence; each program takes a [channels, time] tile and sums its width taps (shifted,
masked loads, reading the state where a tap falls before t = 0) in fp32 with the bias, rounds
the convolution to the weight's dtype as the reference's conv does, then applies silu and
rounds to x's dtype: one launch, every input element read from memory once. Triton's CPU
interpreter truncates fp32 -> bf16, so off the GPU bf16 roundings are done by hand first."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _round_bf16(x):
    """fp32 x rounded to the nearest bf16 value (ties to even), kept in fp32."""
    bits = x.to(tl.uint32, bitcast=True)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _to_dtype(v, dtype: tl.constexpr, FIX_BF16: tl.constexpr):
    if FIX_BF16:
        v = _round_bf16(v)
    return v.to(dtype)


@triton.jit
def _causal_conv1d_kernel(x_ptr, w_ptr, b_ptr, s_ptr, out_ptr, dim, T, S,
                          WIDTH: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_T: tl.constexpr,
                          SILU: tl.constexpr, FIX_CONV: tl.constexpr, FIX_OUT: tl.constexpr):
    c = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    t = tl.program_id(1) * BLOCK_T + tl.arange(0, BLOCK_T)
    c_ok = c < dim
    c64 = c.to(tl.int64)[:, None]
    acc = tl.zeros((BLOCK_C, BLOCK_T), dtype=tl.float32)
    acc += tl.load(b_ptr + c, mask=c_ok, other=0.0).to(tl.float32)[:, None]
    for j in tl.static_range(WIDTH):
        # tap j of output t reads padded position t + j: x[t + j - (WIDTH - 1)] when that is
        # >= 0, else the state column S - (WIDTH - 1) + t + j
        src = t[None, :] + (j - (WIDTH - 1))
        in_x = (src >= 0) & (src < T) & c_ok[:, None]
        in_s = (src < 0) & c_ok[:, None]
        xv = tl.load(x_ptr + c64 * T + src, mask=in_x, other=0.0)
        sv = tl.load(s_ptr + c64 * S + (S + src), mask=in_s, other=0.0)
        v = tl.where(src < 0, sv.to(w_ptr.dtype.element_ty), xv.to(w_ptr.dtype.element_ty))
        w = tl.load(w_ptr + c * WIDTH + j, mask=c_ok, other=0.0).to(tl.float32)
        acc += w[:, None] * v.to(tl.float32)
    conv = _to_dtype(acc, w_ptr.dtype.element_ty, FIX_CONV).to(tl.float32)
    if SILU:
        conv = conv / (1.0 + tl.exp(-conv))
    mask = c_ok[:, None] & (t[None, :] < T)
    tl.store(out_ptr + c64 * T + t[None, :], _to_dtype(conv, out_ptr.dtype.element_ty, FIX_OUT),
             mask=mask)


class Model(torch.nn.Module):
    def __init__(self, activation: str | None = 'silu') -> None:
        super().__init__()
        self.activation = activation

    def forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                initial_state: torch.Tensor) -> torch.Tensor:
        if self.activation not in ('silu', 'swish', None):
            raise ValueError(f'unsupported activation: {self.activation}')
        dim, T = x.shape
        width = weight.shape[1]
        S = initial_state.shape[-1]
        if width > 1 and S < width - 1:
            raise ValueError(f"initial_state has {S} columns, width {width} needs {width - 1}")
        x = x.contiguous()
        state = initial_state.reshape(dim, S).contiguous()
        out = torch.empty((dim, T), dtype=x.dtype, device=x.device)
        if dim and T:
            block_t = min(max(triton.next_power_of_2(T), 2), 256)
            block_c = min(triton.next_power_of_2(dim), max(1, 4096 // block_t))
            warps = 8 if block_c * block_t >= 4096 else 4
            grid = (triton.cdiv(dim, block_c), triton.cdiv(T, block_t))
            _causal_conv1d_kernel[grid](
                x, weight.contiguous(), bias.contiguous(), state, out, dim, T, S,
                WIDTH=width, BLOCK_C=block_c, BLOCK_T=block_t,
                SILU=self.activation is not None,
                FIX_CONV=not x.is_cuda and weight.dtype == torch.bfloat16,
                FIX_OUT=not x.is_cuda and x.dtype == torch.bfloat16, num_warps=warps)
        return out
