"""moe_align_sort in Triton: a deterministic counting sort of the routed ids by expert, over
fixed chunks of the flattened topk_ids, in four launches and without atomics.

1. count:   one program per chunk: the chunk's histogram of expert ids.
2. offsets: one program: per chunk and expert, how many ids of that expert lie in earlier
            chunks (a running sum down the chunks) minus how many ids of the chunk belong to
            smaller experts (a prefix sum across the row); per expert, its count and where its
            block-padded segment starts; num_tokens_post_padded.
3. scatter: one program per chunk: sort the chunk by (expert, index) with tl.sort; the id at
            sorted position p of expert e goes to start[e] + offsets[chunk, e] + p.
4. pad:     one program per expert writes the sentinel into its segment's padding and the
            expert id of its blocks; the last programs write the sentinel and -1 past the end.

Every output slot is written exactly once, by one program, so the result never depends on
the order programs run in (atomic slot claims would make the order inside an expert racy).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _count_kernel(ids_ptr, counts_ptr, n, E, CHUNK: tl.constexpr, BLOCK_E: tl.constexpr):
    c = tl.program_id(0)
    idx = c * CHUNK + tl.arange(0, CHUNK)
    valid = idx < n
    ids = tl.load(ids_ptr + idx, mask=valid, other=0)
    hist = tl.histogram(ids, BLOCK_E, mask=valid)
    e = tl.arange(0, BLOCK_E)
    tl.store(counts_ptr + c * E + e, hist, mask=e < E)


@triton.jit
def _offsets_kernel(counts_ptr, start_ptr, total_count_ptr, post_padded_ptr,
                    num_chunks, E, block_size, ROWS: tl.constexpr, BLOCK_E: tl.constexpr):
    """Turns counts[chunk, e] in place into offsets[chunk, e] (see the module docstring)."""
    e = tl.arange(0, BLOCK_E)
    rows = tl.arange(0, ROWS)
    emask = e < E
    carry = tl.zeros((BLOCK_E,), dtype=tl.int32)  # ids of each expert in the chunks done
    for r0 in range(0, num_chunks, ROWS):
        r = r0 + rows
        mask = (r[:, None] < num_chunks) & emask[None, :]
        ptrs = counts_ptr + r[:, None] * E + e[None, :]
        cnt = tl.load(ptrs, mask=mask, other=0)
        earlier_chunks = tl.cumsum(cnt, axis=0) - cnt + carry[None, :]
        smaller_experts = tl.cumsum(cnt, axis=1) - cnt
        tl.store(ptrs, earlier_chunks - smaller_experts, mask=mask)
        carry += tl.sum(cnt, axis=0)
    padded = (carry + block_size - 1) // block_size * block_size
    ends = tl.cumsum(padded, axis=0)
    tl.store(start_ptr + e, ends - padded, mask=emask)
    tl.store(total_count_ptr + e, carry, mask=emask)
    tl.store(post_padded_ptr, tl.sum(padded, axis=0))


@triton.jit
def _scatter_kernel(ids_ptr, offsets_ptr, start_ptr, sorted_ptr, n, E,
                    CHUNK: tl.constexpr, BLOCK_E: tl.constexpr):
    c = tl.program_id(0)
    local = tl.arange(0, CHUNK)
    idx = c * CHUNK + local
    valid = idx < n
    # Past the end, an id of BLOCK_E sorts after every real one.
    ids = tl.load(ids_ptr + idx, mask=valid, other=BLOCK_E)
    keys = tl.sort(ids * CHUNK + local)  # unique keys: by expert, then by index
    e = keys // CHUNK
    live = e < E
    base = (tl.load(start_ptr + e, mask=live, other=0)
            + tl.load(offsets_ptr + c * E + e, mask=live, other=0))
    tl.store(sorted_ptr + base + local, c * CHUNK + keys % CHUNK, mask=live)


@triton.jit
def _pad_kernel(start_ptr, total_count_ptr, post_padded_ptr, sorted_ptr, expert_ids_ptr,
                E, block_size, max_len, n_blocks, sentinel,
                BLOCK_PAD: tl.constexpr, BLOCK_BLOCKS: tl.constexpr, BLOCK_TAIL: tl.constexpr):
    pid = tl.program_id(0)
    if pid < E:
        start = tl.load(start_ptr + pid)
        count = tl.load(total_count_ptr + pid)
        padded = (count + block_size - 1) // block_size * block_size
        p = tl.arange(0, BLOCK_PAD)
        tl.store(sorted_ptr + start + count + p, sentinel, mask=count + p < padded)
        first_block = start // block_size
        nb = padded // block_size
        b = tl.arange(0, BLOCK_BLOCKS)
        for b0 in range(0, nb, BLOCK_BLOCKS):
            tl.store(expert_ids_ptr + first_block + b0 + b, pid, mask=b0 + b < nb)
    else:
        # The tail, [num_tokens_post_padded, max_len), in slices of BLOCK_TAIL.
        total = tl.load(post_padded_ptr)
        j = (pid - E) * BLOCK_TAIL + tl.arange(0, BLOCK_TAIL)
        pos = total + j
        tl.store(sorted_ptr + pos, sentinel, mask=pos < max_len)
        blk = total // block_size + j
        tl.store(expert_ids_ptr + blk, -1, mask=blk < n_blocks)


def kernel(topk_ids: torch.Tensor, num_experts: int, block_size: int
           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    assert topk_ids.is_contiguous()
    n = topk_ids.numel()
    E = num_experts
    dev = topk_ids.device
    max_len = n + E * (block_size - 1)
    n_blocks = triton.cdiv(max_len, block_size)
    sorted_ids = torch.empty((max_len,), dtype=torch.int32, device=dev)
    expert_ids = torch.empty((n_blocks,), dtype=torch.int32, device=dev)
    post_padded = torch.empty((1,), dtype=torch.int32, device=dev)
    # Small chunks under the interpreter, so that even the smoke shapes span several chunks.
    chunk = 512 if topk_ids.is_cuda else 4
    num_chunks = max(1, triton.cdiv(n, chunk))
    block_e = triton.next_power_of_2(E)
    offsets = torch.empty((num_chunks, E), dtype=torch.int32, device=dev)
    start = torch.empty((E,), dtype=torch.int32, device=dev)
    total_count = torch.empty((E,), dtype=torch.int32, device=dev)
    _count_kernel[(num_chunks,)](topk_ids, offsets, n, E, CHUNK=chunk, BLOCK_E=block_e,
                                 num_warps=4)
    rows = max(1, min(triton.next_power_of_2(num_chunks), 4096 // block_e))
    _offsets_kernel[(1,)](offsets, start, total_count, post_padded, num_chunks, E, block_size,
                          ROWS=rows, BLOCK_E=block_e, num_warps=8 if block_e >= 128 else 4)
    _scatter_kernel[(num_chunks,)](topk_ids, offsets, start, sorted_ids, n, E,
                                   CHUNK=chunk, BLOCK_E=block_e, num_warps=4)
    # The tail is at most E * (block_size - 1) slots long (the total is at least n).
    block_tail = 1024 if topk_ids.is_cuda else 16
    tail_programs = max(1, triton.cdiv(E * (block_size - 1) + 1, block_tail))
    _pad_kernel[(E + tail_programs,)](start, total_count, post_padded, sorted_ids, expert_ids,
                                      E, block_size, max_len, n_blocks, n,
                                      BLOCK_PAD=triton.next_power_of_2(block_size),
                                      BLOCK_BLOCKS=256 if topk_ids.is_cuda else 4,
                                      BLOCK_TAIL=block_tail, num_warps=4)
    return sorted_ids, expert_ids, post_padded
