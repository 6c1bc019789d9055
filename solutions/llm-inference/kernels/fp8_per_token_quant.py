"""fp8_per_token_quant in Triton: one program per token; a first pass over the row finds
max(|x|), a second writes q = clamp(x / scale, -448, 448) as float8_e4m3fn.

Under Triton's CPU interpreter (TRITON_INTERPRET=1, triton 3.9) the fp32 -> fp8e4nv cast gets
values that round up to the next power of two wrong (31.4 becomes 16, not 32). So off the GPU
the kernel first rounds onto the fp8 grid itself (round to nearest even at the value's fp8
step), after which the cast is exact; on the GPU the hardware cast rounds correctly.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _round_to_e4m3_grid(v):
    """v (fp32, |v| <= 448) rounded to the nearest float8_e4m3fn value, ties to even."""
    bits = v.to(tl.int32, bitcast=True)
    exp = ((bits >> 23) & 0xFF) - 127
    exp = tl.maximum(exp, -6)  # below 2**-6 the fp8 values are subnormal: step 2**-9
    step = ((exp - 3 + 127) << 23).to(tl.float32, bitcast=True)  # 3 mantissa bits
    y = v / step  # exact: a power-of-two divisor, |y| < 16
    r = (y + 12582912.0) - 12582912.0  # 1.5 * 2**23: rounds |y| < 2**22 to an integer, RNE
    return r * step


@triton.jit
def _per_token_quant_kernel(x_ptr, q_ptr, scale_ptr, H, stride_x, stride_q,
                            BLOCK: tl.constexpr, ROUND_IN_FP32: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    x_row = x_ptr + row * stride_x
    q_row = q_ptr + row * stride_q
    amax = tl.zeros((BLOCK,), dtype=tl.float32)
    for h0 in range(0, H, BLOCK):
        mask = h0 + offs < H
        x = tl.load(x_row + h0 + offs, mask=mask, other=0.0).to(tl.float32)
        amax = tl.maximum(amax, tl.abs(x))
    scale = tl.maximum(tl.max(amax, axis=0) / 448.0, 1e-12)
    tl.store(scale_ptr + row, scale)
    for h0 in range(0, H, BLOCK):
        mask = h0 + offs < H
        x = tl.load(x_row + h0 + offs, mask=mask, other=0.0).to(tl.float32)
        q = tl.minimum(tl.maximum(x / scale, -448.0), 448.0)
        if ROUND_IN_FP32:
            q = _round_to_e4m3_grid(q)
        tl.store(q_row + h0 + offs, q.to(q_ptr.dtype.element_ty), mask=mask)


def kernel(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    T, H = x.shape
    q = torch.empty((T, H), dtype=torch.float8_e4m3fn, device=x.device)
    scale = torch.empty((T, 1), dtype=torch.float32, device=x.device)
    block = min(triton.next_power_of_2(H), 1024 if x.is_cuda else 512)
    _per_token_quant_kernel[(T,)](x, q, scale, H, x.stride(0), q.stride(0),
                                  BLOCK=block, ROUND_IN_FP32=not x.is_cuda,
                                  num_warps=4)
    return q, scale
