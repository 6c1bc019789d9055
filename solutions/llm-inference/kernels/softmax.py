"""softmax over the vocabulary in Triton: one program per row, two passes over the row in
chunks. Pass 1 keeps a per-lane running max and rescaled sum (online softmax); pass 2 writes
exp(x - max) / sum in fp32."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, out_ptr, vocab, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * vocab
    out_row = out_ptr + row * vocab
    cols = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, vocab, BLOCK):
        mask = start + cols < vocab
        x = tl.load(x_row + start + cols, mask=mask, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        # Lanes still at -inf (nothing seen yet) keep acc = 0 instead of exp(nan).
        alpha = tl.where(m_new == float("-inf"), 0.0, tl.exp(m - m_new))
        p = tl.where(mask, tl.exp(x - m_new), 0.0)
        acc = acc * alpha + p
        m = m_new
    row_max = tl.max(m, axis=0)
    total = tl.sum(tl.where(m == float("-inf"), 0.0, acc * tl.exp(m - row_max)), axis=0)
    inv = 1.0 / total
    for start in range(0, vocab, BLOCK):
        mask = start + cols < vocab
        x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_row + start + cols, tl.exp(x - row_max) * inv, mask=mask)


def kernel(x: torch.Tensor) -> torch.Tensor:
    vocab = x.shape[-1]
    out = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    block = min(4096, triton.next_power_of_2(vocab))
    _softmax_kernel[(x.numel() // vocab,)](x, out, vocab, BLOCK=block, num_warps=8)
    return out
