"""Reference for `attention_prefill`: causal varlen self-attention with grouped-query heads."""

from __future__ import annotations

import itertools

import torch

# Rows of one sequence whose scores are computed together. Each chunk computes its c x c
# diagonal block whole (then masks it), so the counted work exceeds the causal pairs by
# (c - 1) / L of the sequence's; with c = L // 128 that is under 0.8 % (see problem.toml),
# and a sequence takes at most 128 steps of a few small kernels each (with L // 512, up to
# 1023 steps: a first entry's reference spent 17.9 s here on an H100, 2026-12-05).
ROWS_PER_CHUNK_DIVISOR = 128


def reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor,
    max_seqlen: int, scale: float,
) -> torch.Tensor:
    """o[t, h] = softmax_j(scale * q[t, h] . k[j, h // group]) @ v[j, h // group], over the
    keys j of t's own sequence with j <= t. fp32 inside, rounded once to bfloat16.

    The sequences' bounds are read with .tolist(): data-dependent, so this cannot run on the
    meta device (derive it on the CPU)."""
    T, heads, head_dim = q.shape
    group = heads // k.shape[1]
    # Query head h reads kv head h // group. (index_select, not repeat_interleave: derive
    # counts the clone inside repeat_interleave as a FLOP per element.)
    kv_of_head = torch.tensor([h // group for h in range(heads)], device=q.device)
    qf = q.to(torch.float32).transpose(0, 1)  # [heads, T, D]
    kf = k.to(torch.float32).index_select(1, kv_of_head).transpose(0, 1)
    vf = v.to(torch.float32).index_select(1, kv_of_head).transpose(0, 1)
    out = torch.empty(heads, T, head_dim, dtype=torch.float32, device=q.device)
    bounds = cu_seqlens.tolist()
    for start, end in itertools.pairwise(bounds):
        length = end - start
        assert length <= max_seqlen
        c = max(1, length // ROWS_PER_CHUNK_DIVISOR)
        above = torch.ones(c, c, dtype=torch.bool, device=q.device).triu(1)  # key after query
        for r0 in range(0, length, c):
            r1 = min(r0 + c, length)
            rows = slice(start + r0, start + r1)
            keys = slice(start, start + r1)  # the keys of rows r0..r1-1: positions 0..r1-1
            scores = (qf[:, rows] @ kf[:, keys].transpose(1, 2)) * scale  # [heads, n, r1]
            scores[:, :, r0:r1].masked_fill_(above[: r1 - r0, : r1 - r0], float("-inf"))
            m = torch.amax(scores, dim=-1, keepdim=True)
            p = torch.exp(scores - m)
            denom = torch.sum(p, dim=-1, keepdim=True)
            out[:, rows] = (p @ vf[:, keys]) / denom
    return out.transpose(0, 1).to(torch.bfloat16)


def seq_lens(*, seqs: int, min_len: int, len_step: int) -> list[int]:
    """The prompt lengths of a shape: min_len, min_len + len_step, ... (seqs of them)."""
    return [min_len + i * len_step for i in range(seqs)]


def make_inputs(
    seed: int, device: str, *, T: int, seqs: int, min_len: int, len_step: int, heads: int,
    kv_heads: int, head_dim: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, int, float]:
    """`seqs` prompts of lengths min_len + i * len_step (i = 0..seqs-1), packed in a random
    order (cu_seqlens); q and k as post-RoPE projections, ~ N(0, 1.6**2) per component with a
    per-token scale in [0.75, 1.25] (logits of std about 2.5 at scale 1/sqrt(D): peaked, as
    real attention is), v ~ N(0, 1); scale = 1 / sqrt(head_dim)."""
    lengths = seq_lens(seqs=seqs, min_len=min_len, len_step=len_step)
    if min(lengths) < 1 or sum(lengths) != T:
        raise ValueError(f"lengths {lengths} must be >= 1 and sum to T={T}")
    if heads % kv_heads:
        raise ValueError(f"heads={heads} is not a multiple of kv_heads={kv_heads}")
    # Drawn where the case runs: gigabytes take milliseconds on a GPU, tens of seconds on
    # a CPU (the same seed gives the same inputs on the same kind of device).
    dev = device if device.startswith("cuda") else "cpu"
    gen = torch.Generator(device=dev).manual_seed(seed)
    order = torch.randperm(seqs, generator=gen, device=dev).tolist()
    packed = torch.tensor([lengths[i] for i in order], dtype=torch.int64)
    cu_seqlens = torch.cat([torch.zeros(1, dtype=torch.int64), packed.cumsum(0)])
    tok_scale = torch.rand(T, 1, 1, generator=gen, dtype=torch.float32, device=dev) * 0.5 + 0.75
    q = torch.randn(T, heads, head_dim, generator=gen, dtype=torch.float32, device=dev)
    q *= 1.6 * tok_scale
    k = torch.randn(T, kv_heads, head_dim, generator=gen, dtype=torch.float32, device=dev)
    k *= 1.6 * tok_scale
    v = torch.randn(T, kv_heads, head_dim, generator=gen, dtype=torch.float32, device=dev)
    return (q.to(torch.bfloat16).to(device), k.to(torch.bfloat16).to(device),
            v.to(torch.bfloat16).to(device), cu_seqlens.to(torch.int32).to(device),
            max(lengths), head_dim ** -0.5)
