"""reshape_and_cache in Triton: one program per token copies its key and value rows into the
paged caches at slot_mapping[t], in place; padding tokens (slot -1) read and write nothing.
Returns the updated (key_cache, value_cache)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _reshape_and_cache_kernel(key_ptr, value_ptr, key_cache_ptr, value_cache_ptr, slot_ptr,
                              block_size, head_dim, row_elems,
                              stride_kt, stride_kh, stride_vt, stride_vh,
                              stride_cb, stride_cs, stride_ch,
                              BLOCK: tl.constexpr):
    tok = tl.program_id(0).to(tl.int64)
    slot = tl.load(slot_ptr + tok).to(tl.int64)
    blk = slot // block_size
    off = slot % block_size
    # A padding token (slot -1) has nothing to copy: its row length is taken as 0.
    limit = tl.where(slot >= 0, row_elems, 0)
    for e0 in range(0, row_elems, BLOCK):
        offs = e0 + tl.arange(0, BLOCK)
        mask = offs < limit
        head = offs // head_dim
        dim = offs % head_dim
        k = tl.load(key_ptr + tok * stride_kt + head * stride_kh + dim, mask=mask)
        v = tl.load(value_ptr + tok * stride_vt + head * stride_vh + dim, mask=mask)
        dst = blk * stride_cb + off * stride_cs + head * stride_ch + dim
        tl.store(key_cache_ptr + dst, k, mask=mask)
        tl.store(value_cache_ptr + dst, v, mask=mask)


def kernel(key: torch.Tensor, value: torch.Tensor, key_cache: torch.Tensor,
           value_cache: torch.Tensor, slot_mapping: torch.Tensor
           ) -> tuple[torch.Tensor, torch.Tensor]:
    T, kv_heads, head_dim = key.shape
    block_size = key_cache.shape[1]
    # The innermost dimension must be contiguous and both caches laid out alike (as vLLM's are).
    assert key.stride(2) == 1 and value.stride(2) == 1 and key_cache.stride(3) == 1
    assert key_cache.stride() == value_cache.stride()
    row_elems = kv_heads * head_dim
    block = min(triton.next_power_of_2(row_elems), 1024)
    _reshape_and_cache_kernel[(T,)](key, value, key_cache, value_cache, slot_mapping,
                                    block_size, head_dim, row_elems,
                                    key.stride(0), key.stride(1), value.stride(0),
                                    value.stride(1), key_cache.stride(0), key_cache.stride(1),
                                    key_cache.stride(2), BLOCK=block, num_warps=4)
    return key_cache, value_cache
