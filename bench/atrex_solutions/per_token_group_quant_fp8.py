"""Atrex-Bench per_token_group_quant_fp8 in Triton: x [m, n] contiguous is a flat run of m*n/g
groups, and so is scales [m, n/g], so each program takes BLOCK_G consecutive groups as a
[BLOCK_G, g] tile, reduces max|x| along each, and writes scale = max(amax / 448, 1e-10) and
q = clamp(x / scale, -448, 448) as float8_e4m3fn (divisions round to nearest, as torch's do).

From the project's fp8_per_group_quant kernel: under Triton's CPU interpreter (triton 3.9) the
fp32 -> fp8e4nv cast rounds values just below a power of two wrongly, so off the GPU the kernel
rounds onto the fp8 grid itself first (the cast is then exact); on the GPU the hardware cast
rounds to nearest even.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

FP8_MAX = 448.0  # torch.finfo(torch.float8_e4m3fn).max: the reference's CUDA branch
SCALE_MIN = 1e-10


@triton.jit
def _round_to_e4m3fn_grid(v):
    """v (fp32, |v| <= 448) rounded to the nearest float8_e4m3fn value, ties to even."""
    bits = v.to(tl.int32, bitcast=True)
    exp = ((bits >> 23) & 0xFF) - 127
    exp = tl.maximum(exp, -6)  # below 2**-6 the fp8 values are subnormal: step 2**-9
    step = ((exp - 3 + 127) << 23).to(tl.float32, bitcast=True)  # 3 mantissa bits
    y = v / step  # exact: a power-of-two divisor, |y| < 16
    r = ((y + 12582912.0) - 12582912.0) * step  # 1.5 * 2**23: y rounded to an integer, RNE
    sign = (bits >> 31) << 31  # the sign bit, kept where v rounds to zero (-0.0, as torch's)
    return (r.to(tl.int32, bitcast=True) | sign).to(tl.float32, bitcast=True)


@triton.jit
def _group_quant_kernel(x_ptr, q_ptr, s_ptr, total_groups, fp8_max, scale_min,
                        GROUP: tl.constexpr, BLOCK_G: tl.constexpr,
                        ROUND_IN_FP32: tl.constexpr):
    g = tl.program_id(0).to(tl.int64) * BLOCK_G + tl.arange(0, BLOCK_G)
    offs = g[:, None] * GROUP + tl.arange(0, GROUP)[None, :]
    live = g < total_groups
    mask = live[:, None]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    amax = tl.max(tl.abs(x), axis=1)
    scale = tl.maximum(tl.div_rn(amax, fp8_max), scale_min)
    tl.store(s_ptr + g, scale, mask=live)
    q = tl.minimum(tl.maximum(tl.div_rn(x, scale[:, None]), -fp8_max), fp8_max)
    if ROUND_IN_FP32:
        q = _round_to_e4m3fn_grid(q)
    tl.store(q_ptr + offs, q.to(q_ptr.dtype.element_ty), mask=mask)


class Model(torch.nn.Module):
    def __init__(self, group_size: int) -> None:
        super().__init__()
        self.group_size = group_size

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        m, n = x.shape
        gs = self.group_size
        if n % gs or gs & (gs - 1):
            raise ValueError(f"hidden size {n} must be a multiple of group_size {gs}, "
                             "a power of two")
        x = x.contiguous()
        quantized = torch.empty((m, n), dtype=torch.float8_e4m3fn, device=x.device)
        scales = torch.empty((m, n // gs), dtype=torch.float32, device=x.device)
        total = m * (n // gs)
        if total:
            # about 2048 elements a program on the GPU (4 warps); smaller under the interpreter
            block_g = max(1, (2048 if x.is_cuda else 1024) // gs)
            _group_quant_kernel[(triton.cdiv(total, block_g),)](
                x, quantized, scales, total, FP8_MAX, SCALE_MIN, GROUP=gs, BLOCK_G=block_g,
                ROUND_IN_FP32=not x.is_cuda, num_warps=4)
        return {'quantized': quantized, 'scales': scales}
