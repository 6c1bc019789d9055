"""embedding in Triton: out[t, :] = table[ids[t], :], one program per (token, block of H)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _embedding_kernel(ids_ptr, table_ptr, out_ptr, H, stride_v, stride_t,
                      BLOCK_H: tl.constexpr):
    tok = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    mask = offs < H
    row = tl.load(ids_ptr + tok).to(tl.int64)
    vals = tl.load(table_ptr + row * stride_v + offs, mask=mask)
    tl.store(out_ptr + tok * stride_t + offs, vals, mask=mask)


def kernel(ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    T = ids.shape[0]
    H = table.shape[1]
    out = torch.empty((T, H), dtype=table.dtype, device=table.device)
    block = min(triton.next_power_of_2(H), 1024)
    grid = (T, triton.cdiv(H, block))
    _embedding_kernel[grid](ids, table, out, H, table.stride(0), out.stride(0),
                            BLOCK_H=block, num_warps=4)
    return out
