"""Reference for `moe_topk_softmax`: softmax over experts, top-k, renormalised weights."""

from __future__ import annotations

import torch


def reference(logits: torch.Tensor, topk: int) -> tuple[torch.Tensor, torch.Tensor]:
    x = logits.to(torch.float32)
    m = torch.amax(x, dim=-1, keepdim=True)
    e = torch.exp(x - m)
    probs = e / torch.sum(e, dim=-1, keepdim=True)
    # Softmax is monotonic, so the top-k of the logits are the top-k of the probabilities; the
    # logits of a row are distinct (see make_inputs), so the choice and order are unique.
    ids = torch.topk(x, topk, dim=-1, largest=True, sorted=True).indices
    chosen = torch.gather(probs, -1, ids)
    weights = chosen / torch.sum(chosen, dim=-1, keepdim=True)
    return weights, ids.to(torch.int32)


def make_inputs(
    seed: int, device: str, *, T: int, E: int, topk: int
) -> tuple[torch.Tensor, int]:
    """Skewed router logits: a per-expert bias ~ N(0, 0.3**2), raised by 0.7 for E/16 hot
    experts (which then get 3-5x the mean load, as in a router with a balancing loss), plus
    per-token noise ~ N(0, 1); rounded to a grid of 2**-6 plus a distinct per-expert offset of
    e * 2**-14 (E <= 256), so that no two logits of a row tie and every value is exact in
    fp32."""
    if not 1 <= topk <= E <= 256:
        raise ValueError(f"need 1 <= topk <= E <= 256, got topk={topk}, E={E}")
    gen = torch.Generator(device="cpu").manual_seed(seed)
    bias = torch.randn(E, generator=gen, dtype=torch.float32) * 0.3
    hot = torch.randperm(E, generator=gen)[: max(1, E // 16)]
    bias[hot] += 0.7  # E/16 hot experts: 3-5x the mean load
    # The noise is drawn where the case runs (T x E values, drawn anew for every timed call:
    # on the CPU and moved, the reference's inputs took 4.7 s of a first entry on an H100,
    # 2026-12-05), from a stream of its own; the bias above is drawn on the CPU.
    dev = device if device.startswith("cuda") else "cpu"
    bulk = torch.Generator(device=dev).manual_seed(seed + (1 << 32))
    noise = torch.randn(T, E, generator=bulk, dtype=torch.float32, device=dev)
    grid = torch.round((bias.to(dev) + noise) * 64.0) / 64.0
    offset = torch.arange(E, dtype=torch.float32, device=dev) * 2.0**-14
    logits = grid + offset
    return logits.to(device), int(topk)
