"""moe_topk_softmax in Triton: one program per token; softmax statistics over the row, then
topk rounds of argmax-and-mask on the logits (softmax is monotonic), and the chosen
probabilities renormalised to sum to 1."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _topk_softmax_kernel(logits_ptr, weights_ptr, ids_ptr, E, stride_t,
                         TOPK: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_K: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK_E)
    valid = offs < E
    x = tl.load(logits_ptr + row * stride_t + offs, mask=valid, other=float("-inf"))
    x = x.to(tl.float32)
    m = tl.max(x, axis=0)
    p = tl.exp(x - m)  # exp(-inf) = 0 on the padding lanes
    kofs = tl.arange(0, BLOCK_K)
    chosen_w = tl.zeros((BLOCK_K,), dtype=tl.float32)
    chosen_i = tl.zeros((BLOCK_K,), dtype=tl.int32)
    for j in tl.static_range(TOPK):
        best = tl.max(x, axis=0)
        # The smallest index holding the maximum (the logits of a row are distinct anyway).
        idx = tl.min(tl.where(x == best, offs, BLOCK_E), axis=0)
        pj = tl.sum(tl.where(offs == idx, p, 0.0), axis=0)
        chosen_w = tl.where(kofs == j, pj, chosen_w)
        chosen_i = tl.where(kofs == j, idx, chosen_i)
        x = tl.where(offs == idx, float("-inf"), x)
    # The softmax denominator cancels in the renormalisation: w_j = p_j / sum of chosen p.
    total = tl.sum(chosen_w, axis=0)
    kmask = kofs < TOPK
    tl.store(weights_ptr + row * TOPK + kofs, chosen_w / total, mask=kmask)
    tl.store(ids_ptr + row * TOPK + kofs, chosen_i, mask=kmask)


def kernel(logits: torch.Tensor, topk: int) -> tuple[torch.Tensor, torch.Tensor]:
    T, E = logits.shape
    weights = torch.empty((T, topk), dtype=torch.float32, device=logits.device)
    ids = torch.empty((T, topk), dtype=torch.int32, device=logits.device)
    block_e = triton.next_power_of_2(E)
    _topk_softmax_kernel[(T,)](logits, weights, ids, E, logits.stride(0),
                               TOPK=topk, BLOCK_E=block_e,
                               BLOCK_K=triton.next_power_of_2(topk),
                               num_warps=4 if block_e >= 256 else 1)
    return weights, ids
