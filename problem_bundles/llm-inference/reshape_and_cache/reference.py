"""Reference for `reshape_and_cache`: vLLM's paged KV-cache write."""

from __future__ import annotations

import torch

MAX_CONTEXT = 4096  # the largest position a sequence's first new token may sit at


def reference(
    key: torch.Tensor,
    value: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token t's key and value go to slot s = slot_mapping[t] of the caches, that is to
    cache[s // block_size, s % block_size]; a token whose slot is -1 (padding) is skipped.
    Returns updated copies of (key_cache, value_cache); the inputs are not modified."""
    num_blocks, block_size, kv_heads, head_dim = key_cache.shape
    n_slots = num_blocks * block_size
    # A padding token is sent to one scratch slot past the end, which is dropped afterwards
    # (written this way, without boolean indexing, so that it also runs on the meta device).
    slots = torch.where(slot_mapping >= 0, slot_mapping, n_slots)
    out = []
    for new, cache in ((key, key_cache), (value, value_cache)):
        flat = torch.cat([cache.reshape(n_slots, kv_heads, head_dim),
                          cache.new_zeros(1, kv_heads, head_dim)])  # a copy of the cache
        flat[slots] = new
        out.append(flat[:n_slots].reshape(cache.shape))
    return out[0], out[1]


def _slots(gen: torch.Generator, *, tokens: int, seqs: int, num_blocks: int,
           block_size: int) -> torch.Tensor:
    """Slots of `tokens` new tokens split over `seqs` sequences, as a paged allocator gives
    them: each sequence continues at a random position (its context so far), and every block
    its new tokens touch is a distinct block of the cache, drawn at random."""
    if not 1 <= seqs <= tokens:
        raise ValueError(f"need 1 <= seqs <= tokens, got seqs={seqs}, tokens={tokens}")
    cuts = torch.randperm(tokens - 1, generator=gen)[: seqs - 1] + 1
    bounds = [0, *sorted(int(c) for c in cuts), tokens]
    free = torch.randperm(num_blocks, generator=gen)
    used = 0
    out = []
    for i in range(seqs):
        length = bounds[i + 1] - bounds[i]
        start = int(torch.randint(0, MAX_CONTEXT, (1,), generator=gen))
        pos = torch.arange(start, start + length)
        first = start // block_size
        n_blocks = (start + length - 1) // block_size - first + 1
        if used + n_blocks > num_blocks:
            raise ValueError(f"num_blocks={num_blocks} is too small for these tokens")
        blocks = free[used: used + n_blocks]
        used += n_blocks
        out.append(blocks[pos // block_size - first] * block_size + pos % block_size)
    return torch.cat(out)


def make_inputs(
    seed: int, device: str, *, T: int, pad: int, seqs: int, kv_heads: int, head_dim: int,
    num_blocks: int, block_size: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """New keys and values ~ N(0, 1); caches full of earlier (random, never zero) entries; the
    slots of T - pad real tokens over `seqs` sequences, then `pad` padding tokens (slot -1)
    at the end, as a CUDA-graph-padded batch has."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    slots = _slots(gen, tokens=T - pad, seqs=seqs, num_blocks=num_blocks,
                   block_size=block_size)
    slot_mapping = torch.cat([slots, torch.full((pad,), -1)]).to(torch.int64)
    # The bulk is drawn where the case runs (gigabytes take milliseconds on a GPU, tens of
    # seconds on a CPU), from a stream of its own; the layout above is drawn on the CPU, the
    # same on every device.
    dev = device if device.startswith("cuda") else "cpu"
    bulk = torch.Generator(device=dev).manual_seed(seed + (1 << 32))
    bf16 = {"generator": bulk, "dtype": torch.bfloat16, "device": dev}
    key = torch.randn(T, kv_heads, head_dim, **bf16)
    value = torch.randn(T, kv_heads, head_dim, **bf16)
    cache_shape = (num_blocks, block_size, kv_heads, head_dim)
    key_cache = torch.randn(cache_shape, **bf16)
    value_cache = torch.randn(cache_shape, **bf16)
    return (key.to(device), value.to(device), key_cache.to(device), value_cache.to(device),
            slot_mapping.to(device))
