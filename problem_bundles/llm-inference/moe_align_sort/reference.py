"""Reference for `moe_align_sort`: vLLM's moe_align_block_size, with a unique, static output."""

from __future__ import annotations

import torch


def reference(
    topk_ids: torch.Tensor, num_experts: int, block_size: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Written without data-dependent shapes or Python branches, so it also runs on the meta
    device: every output has the static maximal size, padded with sentinels."""
    flat = topk_ids.reshape(-1).to(torch.int64)
    n = flat.numel()
    max_len = n + num_experts * (block_size - 1)
    n_blocks = (max_len + block_size - 1) // block_size
    counts = torch.zeros(num_experts, dtype=torch.int64, device=flat.device)
    counts.scatter_add_(0, flat, torch.ones_like(flat))
    # Each expert's segment is its count rounded up to a multiple of block_size (0 stays 0).
    padded = (counts + (block_size - 1)) // block_size * block_size
    ends = torch.cumsum(padded, 0)  # where each segment ends in sorted_token_ids
    starts = ends - padded
    # A stable sort by expert id: within an expert, ascending flat index.
    order = torch.sort(flat, stable=True).indices
    expert = flat[order]
    # The i-th id of the sorted order is the (i - first[e])-th of its expert e.
    first = torch.cumsum(counts, 0) - counts
    dest = starts[expert] + (torch.arange(n, device=flat.device) - first[expert])
    sorted_token_ids = torch.full((max_len,), n, dtype=torch.int32, device=flat.device)
    sorted_token_ids[dest] = order.to(torch.int32)
    # Block b starts at b * block_size; its expert is the first whose segment ends after that.
    # Blocks past the end (num_tokens_post_padded) get -1.
    block_start = torch.arange(0, n_blocks * block_size, block_size, device=flat.device)
    expert_of_block = torch.searchsorted(ends, block_start, right=True)
    expert_ids = torch.where(block_start < ends[-1], expert_of_block, -1).to(torch.int32)
    num_tokens_post_padded = ends[-1:].to(torch.int32)
    return sorted_token_ids, expert_ids, num_tokens_post_padded


def make_inputs(
    seed: int, device: str, *, T: int, E: int, k: int, block_size: int
) -> tuple[torch.Tensor, int, int]:
    """Router choices as a softmax top-k router makes them, with a skew: each expert has a
    popularity bias ~ N(0, 0.3**2), raised by 0.7 for E/16 hot experts (which then get 3-5x
    the mean load), plus per-token noise ~ N(0, 1); each token takes the k experts of largest
    score, in decreasing order (so the ids of a row are distinct). Cold experts may get no
    token at all, as in real decode batches."""
    if not 1 <= k <= E:
        raise ValueError(f"need 1 <= k <= E, got k={k}, E={E}")
    if block_size < 1:
        raise ValueError(f"need block_size >= 1, got {block_size}")
    gen = torch.Generator(device="cpu").manual_seed(seed)
    bias = torch.randn(E, generator=gen, dtype=torch.float32) * 0.3
    hot = torch.randperm(E, generator=gen)[: max(1, E // 16)]
    bias[hot] += 0.7
    # The noise and the top-k are drawn and taken where the case runs (drawn anew for every
    # timed call), from a stream of their own; the bias above is drawn on the CPU.
    dev = device if device.startswith("cuda") else "cpu"
    bulk = torch.Generator(device=dev).manual_seed(seed + (1 << 32))
    scores = bias.to(dev) + torch.randn(T, E, generator=bulk, dtype=torch.float32, device=dev)
    topk_ids = torch.topk(scores, k, dim=-1, largest=True, sorted=True).indices
    return topk_ids.to(torch.int32).to(device), int(E), int(block_size)
