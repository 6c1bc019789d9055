"""Atrex-Bench fused_rmsnorm_quant in Triton: one program per token holds its row in registers:
residual_out = x + residual rounded to bf16 (stored), its rms norm times the weight in fp32
rounded once to the input's dtype (as rms_norm does), then scale = max|normed| / 240 (1 where
that is 0) and quantized = normed / scale as float8_e4m3fnuz, in one read and one write.

Triton has no fp8e4b8 (fnuz) cast on NVIDIA GPUs, so the kernel assembles the fnuz bytes itself
(rounded to nearest even, zero always 0x00) into a uint8 view of the output, as the project's
fp8_dynamic_per_token_quant entry does. Triton's CPU interpreter truncates fp32 -> bf16, so off
the GPU bf16 roundings are done by hand first."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

FNUZ_MAX = 240.0  # torch.finfo(torch.float8_e4m3fnuz).max


@triton.jit
def _round_bf16(x):
    """fp32 x rounded to the nearest bf16 value (ties to even), kept in fp32."""
    bits = x.to(tl.uint32, bitcast=True)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _to_dtype(v, dtype: tl.constexpr, FIX_BF16: tl.constexpr):
    """v (fp32) rounded to dtype, to nearest even on the GPU and under the interpreter."""
    if FIX_BF16:
        v = _round_bf16(v)
    return v.to(dtype)


@triton.jit
def _fnuz_byte(q):
    """The float8_e4m3fnuz encoding (int32) of fp32 q, |q| <= 240, rounded to nearest even."""
    a = tl.abs(q)
    e = ((a.to(tl.int32, bitcast=True) >> 23) & 0xFF) - 127
    e = tl.maximum(e, -7)  # fnuz normals start at 2**-7; below, a fixed step of 2**-10
    ulp = ((e - 3 + 127) << 23).to(tl.float32, bitcast=True)  # 3 mantissa bits
    inv_ulp = ((3 - e + 127) << 23).to(tl.float32, bitcast=True)
    # a * inv_ulp < 16 is exact (a power of two); adding and removing 1.5 * 2**23 rounds it
    # to an integer, ties to even
    r = ((a * inv_ulp + 12582912.0) - 12582912.0) * ulp
    rb = r.to(tl.int32, bitcast=True)
    re = ((rb >> 23) & 0xFF) - 127
    normal = ((re + 8) << 3) | ((rb >> 20) & 0x7)  # exponent bias 8; a carry is kept
    sub = (r * 1024.0).to(tl.int32)  # r < 2**-7 is m * 2**-10, m in 0..7
    code = tl.where(re >= -7, normal, sub)
    return tl.where((q < 0) & (code != 0), code | 0x80, code)  # 0x80 is NaN: no -0


@triton.jit
def _rmsnorm_quant_kernel(x_ptr, r_ptr, w_ptr, q_ptr, s_ptr, res_ptr, H, eps, fnuz_max,
                          BLOCK: tl.constexpr, FIX_BF16: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < H
    offs = row * H + cols
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    s = _to_dtype(x + r, res_ptr.dtype.element_ty, FIX_BF16)
    tl.store(res_ptr + offs, s, mask=mask)
    s32 = s.to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt_rn(tl.sum(s32 * s32, axis=0) / H + eps)
    normed = _to_dtype(s32 * rstd * w, res_ptr.dtype.element_ty, FIX_BF16).to(tl.float32)
    scale = tl.div_rn(tl.max(tl.abs(normed), axis=0), fnuz_max)
    scale = tl.where(scale == 0.0, 1.0, scale)
    tl.store(s_ptr + row, scale)
    q = tl.minimum(tl.maximum(tl.div_rn(normed, scale), -fnuz_max), fnuz_max)
    tl.store(q_ptr + offs, _fnuz_byte(q).to(tl.uint8), mask=mask)


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-05) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor,
                weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        H = x.shape[-1]
        lead = x.shape[:-1]
        x2 = x.reshape(-1, H).contiguous()
        r2 = residual.reshape(-1, H).contiguous()
        T = x2.shape[0]
        quantized = torch.empty((T, H), dtype=torch.float8_e4m3fnuz, device=x.device)
        scale = torch.empty((T, 1), dtype=torch.float32, device=x.device)
        residual_out = torch.empty_like(x2)
        if T and H:
            block = triton.next_power_of_2(H)
            warps = 16 if block >= 8192 else 8 if block >= 4096 else 4
            _rmsnorm_quant_kernel[(T,)](
                x2, r2, weight.contiguous(), quantized.view(torch.uint8), scale, residual_out,
                H, float(self.eps), FNUZ_MAX, BLOCK=block,
                FIX_BF16=not x.is_cuda and x.dtype == torch.bfloat16, num_warps=warps)
        return (quantized.reshape(*lead, H), scale.reshape(*lead, 1),
                residual_out.reshape(*lead, H))
