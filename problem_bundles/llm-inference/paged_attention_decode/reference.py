"""Reference for `paged_attention_decode`: one query token per sequence over its paged KV cache."""

from __future__ import annotations

import math

import torch


def reference(
    q: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
    block_tables: torch.Tensor, seq_lens: torch.Tensor, scale: float,
) -> torch.Tensor:
    """o[b, h] = softmax_j(scale * q[b, h] . K_b[j, h // group]) @ V_b[j, h // group] over the
    seq_lens[b] tokens j of sequence b, where token j sits in slot j % block_size of cache
    block block_tables[b, j // block_size]. fp32 inside, rounded once to bfloat16.

    The sequence lengths are read with .tolist(): data-dependent, so this cannot run on the
    meta device (derive it on the CPU)."""
    batch, heads, head_dim = q.shape
    _, block_size, kv_heads, _ = key_cache.shape
    group = heads // kv_heads
    # Query head h reads kv head h // group (index_select: no FLOPs for derive to count).
    kv_of_head = torch.tensor([h // group for h in range(heads)], device=q.device)
    out = torch.empty(batch, heads, head_dim, dtype=torch.float32, device=q.device)
    for b, length in enumerate(seq_lens.tolist()):
        blocks = block_tables[b, : math.ceil(length / block_size)].to(torch.int64)
        # The sequence's tokens in order: its blocks one after the other, cut at its length.
        k = key_cache[blocks].reshape(-1, kv_heads, head_dim)[:length]
        v = value_cache[blocks].reshape(-1, kv_heads, head_dim)[:length]
        kf = k.to(torch.float32).index_select(1, kv_of_head).transpose(0, 1)  # [heads, L, D]
        vf = v.to(torch.float32).index_select(1, kv_of_head).transpose(0, 1)
        qb = q[b].to(torch.float32)[:, None, :]  # [heads, 1, D]
        scores = (qb @ kf.transpose(1, 2)) * scale  # [heads, 1, L]
        m = torch.amax(scores, dim=-1, keepdim=True)
        p = torch.exp(scores - m)
        denom = torch.sum(p, dim=-1, keepdim=True)
        out[b] = ((p @ vf) / denom)[:, 0]
    return out.to(torch.bfloat16)


def context_lengths(gen: torch.Generator, *, batch: int, total: int,
                    max_len: int) -> list[int]:
    """`batch` context lengths in [1, max_len] that sum to exactly `total`, skewed as chat
    contexts are (many short, a few long): lognormal weights (sigma 1) scaled so that, clamped
    to [1, max_len], they sum to `total`, floored, and the remainder handed out one token at a
    time to sequences with room, in a random order."""
    if not batch <= total <= batch * max_len:
        raise ValueError(f"need batch <= total <= batch * max_len, got {batch}, {total}, "
                         f"{max_len}")
    w = torch.exp(torch.randn(batch, generator=gen, dtype=torch.float64))
    lo, hi = 0.0, max_len / float(w.min())  # at hi every length is max_len
    for _ in range(200):
        mid = (lo + hi) / 2
        if float((mid * w).clamp(1, max_len).sum()) < total:
            lo = mid
        else:
            hi = mid
    lengths = [int(x) for x in (lo * w).clamp(1, max_len).floor().tolist()]
    rest = total - sum(lengths)
    while rest > 0:
        for i in torch.randperm(batch, generator=gen).tolist():
            if rest and lengths[i] < max_len:
                lengths[i] += 1
                rest -= 1
    assert sum(lengths) == total and 1 <= min(lengths) and max(lengths) <= max_len
    return lengths


def make_inputs(
    seed: int, device: str, *, B: int, ctx: int, max_ctx: int, block_size: int, heads: int,
    kv_heads: int, head_dim: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, float]:
    """B sequences whose context lengths (seq_lens, int32) lie in [1, max_ctx] and sum to
    exactly B * ctx (see context_lengths). The cache holds exactly their blocks, drawn at
    random as a paged allocator hands them out, plus block 0: vLLM's null block, never given to
    a sequence; block_tables[B, ceil(max_ctx / block_size)] int32 lists each sequence's blocks
    and is padded with 0 (the null block). Every cache slot holds a finite value, the unused
    ones (the null block, the tails of last blocks) stale entries that must not be attended.
    q and cached k ~ N(0, 1.6**2) times a per-token scale in [0.75, 1.25] (logits of std about
    2.5 at scale 1/sqrt(D)), cached v ~ N(0, 1); scale = 1 / sqrt(head_dim)."""
    if heads % kv_heads:
        raise ValueError(f"heads={heads} is not a multiple of kv_heads={kv_heads}")
    gen = torch.Generator(device="cpu").manual_seed(seed)
    lengths = context_lengths(gen, batch=B, total=B * ctx, max_len=max_ctx)
    n_blocks = [math.ceil(n / block_size) for n in lengths]
    # Sequence b takes the next n_blocks[b] blocks of a random order (block 0 is the null one).
    free = (torch.randperm(sum(n_blocks), generator=gen) + 1).to(torch.int32)
    block_tables = torch.zeros(B, math.ceil(max_ctx / block_size), dtype=torch.int32)
    start = 0
    for b, n in enumerate(n_blocks):
        block_tables[b, :n] = free[start:start + n]
        start += n
    cache_shape = (sum(n_blocks) + 1, block_size, kv_heads, head_dim)
    # The bulk is drawn where the case runs (gigabytes take milliseconds on a GPU, tens of
    # seconds on a CPU), from a stream of its own; the layout above is drawn on the CPU, the
    # same on every device.
    dev = device if device.startswith("cuda") else "cpu"
    bulk = torch.Generator(device=dev).manual_seed(seed + (1 << 32))
    f32 = {"generator": bulk, "dtype": torch.float32, "device": dev}
    q_scale = torch.rand(B, 1, 1, **f32) * 0.5 + 0.75
    q = torch.randn(B, heads, head_dim, **f32) * 1.6 * q_scale
    # The caches are drawn in bfloat16 directly (they reach gigabytes): a scaled bf16 draw.
    k_scale = torch.rand(*cache_shape[:2], 1, 1, **f32) * 0.5 + 0.75
    key_cache = torch.randn(cache_shape, generator=bulk, dtype=torch.bfloat16, device=dev)
    key_cache *= (1.6 * k_scale).to(torch.bfloat16)
    value_cache = torch.randn(cache_shape, generator=bulk, dtype=torch.bfloat16, device=dev)
    return (q.to(torch.bfloat16).to(device), key_cache.to(device), value_cache.to(device),
            block_tables.to(device), torch.tensor(lengths, dtype=torch.int32).to(device),
            head_dim ** -0.5)
