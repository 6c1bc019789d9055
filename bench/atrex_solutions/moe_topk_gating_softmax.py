"""Atrex-Bench moe_topk_gating_softmax in Triton: a tile of ROWS tokens per program; the fp32
softmax statistics of each row, then top_k rounds of argmax-and-remove on the logits (softmax is
monotonic; the smallest index wins a tie), each winner's probability exp(x - max) / sum stored as
is (no renormalisation, as the reference). With expert groups, the topk_group groups of largest
max are kept first and every other expert scores 0 (picked, lowest index first, only when the
kept groups run out)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _topk_gating_kernel(logits_ptr, weights_ptr, ids_ptr, T, E, group_size, stride_t,
                        TOPK: tl.constexpr, ROWS: tl.constexpr, BLOCK_E: tl.constexpr,
                        BLOCK_K: tl.constexpr, GROUPS: tl.constexpr, BLOCK_G: tl.constexpr,
                        TOPK_GROUP: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < T
    offs = tl.arange(0, BLOCK_E)
    col_ok = offs < E
    x = tl.load(logits_ptr + rows[:, None] * stride_t + offs[None, :],
                mask=row_ok[:, None] & col_ok[None, :], other=float("-inf")).to(tl.float32)
    x = tl.where(col_ok[None, :], x, float("-inf"))
    m = tl.max(x, axis=1)
    m = tl.where(row_ok, m, 0.0)  # rows past T: keep the arithmetic finite
    p = tl.exp(x - m[:, None])  # exp(-inf) = 0 on the padding lanes
    p = p / tl.where(row_ok, tl.sum(p, axis=1), 1.0)[:, None]
    key = x  # what the experts are ranked by
    if GROUPS > 0:
        # Group g holds experts [g * group_size, (g + 1) * group_size); its score is its max.
        g = tl.arange(0, BLOCK_G)
        member = (offs[None, :] // group_size) == g[:, None]  # [BLOCK_G, BLOCK_E]
        member = member & col_ok[None, :] & (g[:, None] < GROUPS)
        gmax = tl.max(tl.where(member[None, :, :], x[:, None, :], float("-inf")), axis=2)
        g_avail = (g < GROUPS)[None, :] & row_ok[:, None]
        kept = tl.zeros((ROWS, BLOCK_G), dtype=tl.int32)
        for _ in tl.static_range(TOPK_GROUP):
            gbest = tl.max(tl.where(g_avail, gmax, float("-inf")), axis=1)
            gidx = tl.min(tl.where(g_avail & (gmax == gbest[:, None]), g[None, :], BLOCK_G),
                          axis=1)
            hit = g[None, :] == gidx[:, None]
            kept = tl.where(hit, 1, kept)
            g_avail = g_avail & (hit == 0)
        in_kept = tl.max(tl.where(member[None, :, :], kept[:, :, None], 0), axis=1) > 0
        key = tl.where(in_kept, x, float("-inf"))
        p = tl.where(in_kept, p, 0.0)  # the reference's masked_fill(~mask, 0.0)
    avail = col_ok[None, :] & row_ok[:, None]
    kofs = tl.arange(0, BLOCK_K)
    chosen_w = tl.zeros((ROWS, BLOCK_K), dtype=tl.float32)
    chosen_i = tl.zeros((ROWS, BLOCK_K), dtype=tl.int32)
    for j in tl.static_range(TOPK):
        best = tl.max(tl.where(avail, key, float("-inf")), axis=1)
        idx = tl.min(tl.where(avail & (key == best[:, None]), offs[None, :], BLOCK_E), axis=1)
        hit = offs[None, :] == idx[:, None]
        pj = tl.sum(tl.where(hit, p, 0.0), axis=1)
        chosen_w = tl.where(kofs[None, :] == j, pj[:, None], chosen_w)
        chosen_i = tl.where(kofs[None, :] == j, idx[:, None], chosen_i)
        avail = avail & (hit == 0)
    out_mask = row_ok[:, None] & (kofs < TOPK)[None, :]
    out_offs = rows[:, None] * TOPK + kofs[None, :]
    tl.store(weights_ptr + out_offs, chosen_w, mask=out_mask)
    tl.store(ids_ptr + out_offs, chosen_i, mask=out_mask)


class Model(torch.nn.Module):
    def __init__(self, top_k: int, num_expert_groups: int = 0, topk_group: int = 0) -> None:
        super().__init__()
        self.top_k = top_k
        self.num_expert_groups = num_expert_groups
        self.topk_group = topk_group

    def forward(self, gating_output: torch.Tensor) -> dict[str, torch.Tensor]:
        logits = gating_output if gating_output.stride(-1) == 1 else gating_output.contiguous()
        T, E = logits.shape
        k = self.top_k
        assert 0 < k <= E
        weights = torch.empty((T, k), dtype=torch.float32, device=logits.device)
        ids = torch.empty((T, k), dtype=torch.int32, device=logits.device)
        if T == 0:
            return {"topk_weights": weights, "topk_ids": ids}
        grouped = self.num_expert_groups > 0 and self.topk_group > 0
        groups = self.num_expert_groups if grouped else 0
        topk_group = min(self.topk_group, groups) if grouped else 0
        block_e = triton.next_power_of_2(E)
        block_g = triton.next_power_of_2(max(groups, 1))
        per = max(1, min(16, 2048 // (block_e * block_g)))  # tokens per program
        warps = 4 if per * block_e * block_g >= 1024 else 2
        _topk_gating_kernel[(triton.cdiv(T, per),)](
            logits, weights, ids, T, E, E // groups if groups else E, logits.stride(0),
            TOPK=k, ROWS=per, BLOCK_E=block_e, BLOCK_K=triton.next_power_of_2(k),
            GROUPS=groups, BLOCK_G=block_g, TOPK_GROUP=topk_group, num_warps=warps)
        return {"topk_weights": weights, "topk_ids": ids}
