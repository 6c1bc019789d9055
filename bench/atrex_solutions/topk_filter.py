"""Atrex-Bench topk_filter in Triton: each row's k-th largest logit, found exactly by a bitwise
search over order-preserving int32 keys of the floats (32 counting passes, the row held in
registers), then every logit below it set to -inf; one program per row, one launch. Very long
rows (vocabularies) are split: a launch keeps each slice's top keys, a second finds the
threshold among them and filters its slice."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _key(x):
    """An int32 whose signed order is the float order (-0.0 just below +0.0)."""
    b = x.to(tl.int32, bitcast=True)
    return b ^ ((b >> 31) & 0x7FFFFFFF)


@triton.jit
def _value(key):
    """The float of a key (the map is its own inverse)."""
    return (key ^ ((key >> 31) & 0x7FFFFFFF)).to(tl.float32, bitcast=True)


@triton.jit
def _kth_largest(keys, k):
    """The k-th largest of `keys` (a 1-D tensor, counted with repeats), built bit by bit: the
    largest t with at least k keys >= t. Keys of -2**31 never count (padding)."""
    ans = tl.where(tl.sum((keys >= 0).to(tl.int32), axis=0) >= k, 0, -2147483648)
    for i in range(31):
        cand = ans | (1 << (30 - i))
        ans = tl.where(tl.sum((keys >= cand).to(tl.int32), axis=0) >= k, cand, ans)
    return ans


@triton.jit
def _filter_rows_kernel(x_ptr, out_ptr, V, k, stride_x, stride_o, BLOCK: tl.constexpr,
                        NT: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    o_row = out_ptr + row * stride_o
    cols = tl.arange(0, BLOCK)
    if NT == 1:  # the row in registers
        mask = cols < V
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        thr = _value(_kth_largest(tl.where(mask, _key(x), -2147483648), k))
        y = tl.where(x < thr, float("-inf"), x)
        tl.store(o_row + cols, y.to(out_ptr.dtype.element_ty), mask=mask)
    else:  # a row too long for registers: each counting pass reads it again, by tiles
        ans = tl.where(_count_ge(x_row, V, 0, BLOCK, NT) >= k, 0, -2147483648)
        for i in range(31):
            cand = ans | (1 << (30 - i))
            ans = tl.where(_count_ge(x_row, V, cand, BLOCK, NT) >= k, cand, ans)
        thr = _value(ans)
        for t in range(NT):
            c = t * BLOCK + cols
            x = tl.load(x_row + c, mask=c < V, other=0.0).to(tl.float32)
            y = tl.where(x < thr, float("-inf"), x)
            tl.store(o_row + c, y.to(out_ptr.dtype.element_ty), mask=c < V)


@triton.jit
def _count_ge(x_row, V, cand, BLOCK: tl.constexpr, NT: tl.constexpr):
    """How many of the row's V logits have keys >= cand, read by tiles of BLOCK."""
    acc = tl.zeros((BLOCK,), dtype=tl.int32)
    for t in range(NT):
        c = t * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_row + c, mask=c < V, other=0.0).to(tl.float32)
        acc += ((c < V) & (_key(x) >= cand)).to(tl.int32)
    return tl.sum(acc, axis=0)


@triton.jit
def _slice_top_kernel(x_ptr, cand_ptr, V, stride_x, num_slices, SLICE: tl.constexpr,
                      K2: tl.constexpr):
    """The K2 largest keys of one slice of a row (with repeats, padding as -2**31): the
    row's k <= K2 largest are among the union of its slices'."""
    row = tl.program_id(0).to(tl.int64)
    s = tl.program_id(1)
    c = s * SLICE + tl.arange(0, SLICE)
    x = tl.load(x_ptr + row * stride_x + c, mask=c < V, other=0.0).to(tl.float32)
    top = tl.topk(tl.where(c < V, _key(x), -2147483648), K2)
    tl.store(cand_ptr + (row * num_slices + s) * K2 + tl.arange(0, K2), top)


@triton.jit
def _slice_filter_kernel(x_ptr, cand_ptr, out_ptr, V, k, stride_x, stride_o, num_slices,
                         SLICE: tl.constexpr, K2: tl.constexpr, BLOCK_C: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    s = tl.program_id(1)
    j = tl.arange(0, BLOCK_C)
    keys = tl.load(cand_ptr + row * num_slices * K2 + j, mask=j < num_slices * K2,
                   other=-2147483648)
    thr = _value(_kth_largest(keys, k))
    c = s * SLICE + tl.arange(0, SLICE)
    x = tl.load(x_ptr + row * stride_x + c, mask=c < V, other=0.0).to(tl.float32)
    y = tl.where(x < thr, float("-inf"), x)
    tl.store(out_ptr + row * stride_o + c, y.to(out_ptr.dtype.element_ty), mask=c < V)


class Model(torch.nn.Module):
    def __init__(self, top_k: int = 50) -> None:
        super().__init__()
        self.top_k = top_k

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        V = logits.shape[-1]
        x = logits.reshape(-1, V)
        if x.stride(-1) != 1:
            x = x.contiguous()
        rows = x.shape[0]
        out = torch.empty((rows, V), dtype=logits.dtype, device=logits.device)
        if rows == 0 or V == 0:
            return out.reshape(logits.shape)
        k = max(1, min(self.top_k, V))
        on_gpu = x.is_cuda
        max_block = 16384 if on_gpu else 4096
        slice_len = 4096 if on_gpu else 256
        k2 = triton.next_power_of_2(k)
        if V <= max_block:
            block = triton.next_power_of_2(V)
            warps = 16 if block >= 8192 else 8 if block >= 2048 else 4
            _filter_rows_kernel[(rows,)](x, out, V, k, x.stride(0), out.stride(0),
                                         BLOCK=block, NT=1, num_warps=warps)
        elif 2 * k2 <= slice_len:
            num_slices = triton.cdiv(V, slice_len)
            cand = torch.empty((rows, num_slices, k2), dtype=torch.int32, device=x.device)
            _slice_top_kernel[(rows, num_slices)](x, cand, V, x.stride(0), num_slices,
                                                  SLICE=slice_len, K2=k2, num_warps=8)
            _slice_filter_kernel[(rows, num_slices)](
                x, cand, out, V, k, x.stride(0), out.stride(0), num_slices, SLICE=slice_len,
                K2=k2, BLOCK_C=triton.next_power_of_2(num_slices * k2), num_warps=8)
        else:  # a long row and a large k: one program per row, reading it by tiles
            _filter_rows_kernel[(rows,)](x, out, V, k, x.stride(0), out.stride(0),
                                         BLOCK=max_block, NT=triton.cdiv(V, max_block),
                                         num_warps=16 if on_gpu else 4)
        return out.reshape(logits.shape)
