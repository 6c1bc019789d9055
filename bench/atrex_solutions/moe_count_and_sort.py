"""Atrex-Bench moe_count_and_sort in Triton: a counting sort of the flat routed ids by expert,
no atomics and no host reads. Chunks of ids are histogrammed (a first launch when there are
many chunks, else inside the one launch); a program per chunk then derives each expert's
segment from the counts, sorts its (expert, index) keys and scatters them in place; program 0
also writes the counts and their running sum."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _count_kernel(ids_ptr, counts_ptr, n, E, CHUNK: tl.constexpr, BLOCK_E: tl.constexpr):
    c = tl.program_id(0)
    idx = c * CHUNK + tl.arange(0, CHUNK)
    ids = tl.load(ids_ptr + idx, mask=idx < n, other=-1)
    ok = (ids >= 0) & (ids < E)  # ids outside [0, E) belong to no expert
    hist = tl.histogram(tl.where(ok, ids, 0), BLOCK_E, mask=ok)
    tl.store(counts_ptr + c * BLOCK_E + tl.arange(0, BLOCK_E), hist)


@triton.jit
def _sort_kernel(ids_ptr, counts_ptr, sorted_ptr, expert_counts_ptr, cumsum_ptr,
                 n, E, num_chunks, FUSED: tl.constexpr, CHUNK: tl.constexpr,
                 BLOCK_E: tl.constexpr, ROWS: tl.constexpr):
    pid = tl.program_id(0)
    e = tl.arange(0, BLOCK_E)
    # Per expert: ids in all chunks (total) and in the chunks before this one (before).
    total = tl.zeros((BLOCK_E,), dtype=tl.int32)
    before = tl.zeros((BLOCK_E,), dtype=tl.int32)
    if FUSED:  # few chunks: histogram them here rather than in a launch of their own
        local = tl.arange(0, CHUNK)
        for j in range(num_chunks):
            idx = j * CHUNK + local
            ids = tl.load(ids_ptr + idx, mask=idx < n, other=-1)
            ok = (ids >= 0) & (ids < E)
            h = tl.histogram(tl.where(ok, ids, 0), BLOCK_E, mask=ok)
            total += h
            before += tl.where(j < pid, h, 0)
    else:
        rows = tl.arange(0, ROWS)
        for r0 in range(0, num_chunks, ROWS):
            r = r0 + rows
            cnt = tl.load(counts_ptr + r[:, None] * BLOCK_E + e[None, :],
                          mask=r[:, None] < num_chunks, other=0)
            total += tl.sum(cnt, axis=0)
            before += tl.sum(tl.where(r[:, None] < pid, cnt, 0), axis=0)
    ends = tl.cumsum(total, axis=0)
    if pid == 0:
        tl.store(expert_counts_ptr + e, total, mask=e < E)
        tl.store(cumsum_ptr + 1 + e, ends, mask=e < E)
        tl.store(cumsum_ptr, 0)
    # The id at sorted position p of the chunk, of expert x, goes to
    # start[x] + before[x] + (p - ids of smaller experts in the chunk).
    local = tl.arange(0, CHUNK)
    idx = pid * CHUNK + local
    ids = tl.load(ids_ptr + idx, mask=idx < n, other=-1)
    ok = (ids >= 0) & (ids < E)
    own = tl.histogram(tl.where(ok, ids, 0), BLOCK_E, mask=ok)
    base = ends - total + before - (tl.cumsum(own, axis=0) - own)
    keys = tl.sort(tl.where(ok, ids, BLOCK_E) * CHUNK + local)  # unique keys
    x = keys // CHUNK
    live = x < E
    dest = tl.gather(base, tl.where(live, x, 0), 0) + local
    tl.store(sorted_ptr + dest, pid * CHUNK + keys % CHUNK, mask=live)


class Model(torch.nn.Module):
    def __init__(self, num_experts: int = 128, block_size: int = 128) -> None:
        super().__init__()
        self.num_experts = int(num_experts)
        self.block_size = int(block_size)

    def forward(self, topk_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        ids = topk_ids.contiguous().view(-1)
        n = ids.numel()
        E = self.num_experts
        dev = ids.device
        # Every id lies in [0, num_experts) (the inputs' contract): all n are sorted.
        sorted_ids = torch.empty((n,), dtype=torch.int32, device=dev)
        counts_out = torch.empty((E,), dtype=torch.int32, device=dev)
        cumsum = torch.empty((E + 1,), dtype=torch.int32, device=dev)
        block_e = triton.next_power_of_2(E)
        if ids.is_cuda:
            chunk = 1024 if n >= 32768 else 512
        else:  # small chunks under the interpreter, so that small tests span several
            chunk = 16
        chunk = max(16, min(chunk, triton.next_power_of_2(max(1, n))))
        num_chunks = max(1, triton.cdiv(n, chunk))
        fused = num_chunks <= 4
        counts = torch.empty((1 if fused else num_chunks, block_e), dtype=torch.int32,
                             device=dev)
        if not fused:
            _count_kernel[(num_chunks,)](ids, counts, n, E, CHUNK=chunk, BLOCK_E=block_e,
                                         num_warps=4)
        rows = max(1, min(triton.next_power_of_2(num_chunks), 4096 // block_e))
        _sort_kernel[(num_chunks,)](ids, counts, sorted_ids, counts_out, cumsum, n, E,
                                    num_chunks, FUSED=fused, CHUNK=chunk, BLOCK_E=block_e,
                                    ROWS=rows, num_warps=4)
        return {"sorted_token_ids": sorted_ids, "expert_token_counts": counts_out,
                "cumsum": cumsum}
