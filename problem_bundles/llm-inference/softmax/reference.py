"""Reference for `softmax`: softmax over the vocabulary of bf16 logits, fp32 inside and out."""

from __future__ import annotations

import torch


def reference(x: torch.Tensor) -> torch.Tensor:
    xf = x.to(torch.float32)
    e = torch.exp(xf - xf.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)


def make_inputs(seed: int, device: str, *, tokens: int, vocab: int) -> tuple[torch.Tensor]:
    """Logits with a per-token spread (sigma in [1, 4]) and, per token, four candidate tokens
    raised by 8-16, one in each quarter of the vocabulary: from near-flat rows to confident
    ones. The four are distinct, so the scatter adds no two boosts into one logit: on a GPU
    that order is an atomic race, and both containers draw these inputs (the reference's and
    the entry's) and must get the same bits."""
    # Drawn where the case runs: gigabytes take milliseconds on a GPU, tens of seconds on
    # a CPU (the same seed gives the same inputs on the same kind of device).
    dev = device if device.startswith("cuda") else "cpu"
    gen = torch.Generator(device=dev).manual_seed(seed)
    sigma = torch.rand(tokens, 1, generator=gen, dtype=torch.float32, device=dev) * 3.0 + 1.0
    x = torch.randn(tokens, vocab, generator=gen, dtype=torch.float32, device=dev) * sigma
    quarter = vocab // 4
    peaks = (torch.randint(0, quarter, (tokens, 4), generator=gen, device=dev)
             + torch.arange(4, device=dev) * quarter)
    boost = torch.rand(tokens, 4, generator=gen, dtype=torch.float32, device=dev) * 8.0 + 8.0
    x.scatter_add_(1, peaks, boost)
    return (x.to(torch.bfloat16).to(device),)
