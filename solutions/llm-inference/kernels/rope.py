"""rope in Triton: one program per token rotates all its query and key heads (NeoX style).

cos/sin are computed once per token and reused by every head. The fp32 angle is reduced modulo
2*pi (Cody-Waite, two-part constant) before cos/sin, so the result stays accurate at positions
of ~1e5 even where the hardware cos/sin is only accurate near zero."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

_INV_2PI = tl.constexpr(0.15915494309189535)
_2PI_HI = tl.constexpr(6.28125)      # 8 significant bits: k * _2PI_HI is exact for k < 2**16
_2PI_LO = tl.constexpr(0.0019353071795864769)  # 2*pi - _2PI_HI


@triton.jit
def _rotate_heads(src_ptr, dst_ptr, tok, n_heads, c, s, HALF: tl.constexpr,
                  BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr):
    heads = tl.arange(0, BLOCK_H)[:, None]
    dims = tl.arange(0, BLOCK_D)[None, :]
    mask = (heads < n_heads) & (dims < HALF)
    base = (tok * n_heads + heads) * (2 * HALF) + dims
    a = tl.load(src_ptr + base, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(src_ptr + base + HALF, mask=mask, other=0.0).to(tl.float32)
    tl.store(dst_ptr + base, (a * c - b * s).to(tl.bfloat16), mask=mask)
    tl.store(dst_ptr + base + HALF, (b * c + a * s).to(tl.bfloat16), mask=mask)


@triton.jit
def _rope_kernel(q_ptr, k_ptr, pos_ptr, inv_freq_ptr, q_out_ptr, k_out_ptr, heads, kv_heads,
                 HALF: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_HQ: tl.constexpr,
                 BLOCK_HK: tl.constexpr):
    tok = tl.program_id(0).to(tl.int64)
    dims = tl.arange(0, BLOCK_D)
    inv_freq = tl.load(inv_freq_ptr + dims, mask=dims < HALF, other=0.0)
    angle = tl.load(pos_ptr + tok).to(tl.float32) * inv_freq
    k = tl.floor(angle * _INV_2PI + 0.5)
    reduced = (angle - k * _2PI_HI) - k * _2PI_LO
    c = tl.cos(reduced)[None, :]
    s = tl.sin(reduced)[None, :]
    _rotate_heads(q_ptr, q_out_ptr, tok, heads, c, s, HALF, BLOCK_HQ, BLOCK_D)
    _rotate_heads(k_ptr, k_out_ptr, tok, kv_heads, c, s, HALF, BLOCK_HK, BLOCK_D)


def kernel(query: torch.Tensor, key: torch.Tensor, positions: torch.Tensor,
           inv_freq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    tokens, heads, head_dim = query.shape
    kv_heads = key.shape[1]
    q_out, k_out = torch.empty_like(query), torch.empty_like(key)
    half = head_dim // 2
    _rope_kernel[(tokens,)](query, key, positions, inv_freq, q_out, k_out, heads, kv_heads,
                            HALF=half, BLOCK_D=triton.next_power_of_2(half),
                            BLOCK_HQ=triton.next_power_of_2(heads),
                            BLOCK_HK=triton.next_power_of_2(kv_heads), num_warps=4)
    return q_out, k_out
