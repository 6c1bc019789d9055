"""Reference for `l2_norm`: per-head L2 normalisation (FLA's l2norm, as Qwen3-Next uses on its
linear-attention q and k), fp32 inside, bf16 in and out."""

from __future__ import annotations

import torch


def reference(x: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.to(torch.float32)
    sum_sq = (xf * xf).sum(dim=-1, keepdim=True)
    return (xf * torch.rsqrt(sum_sq + eps)).to(torch.bfloat16)


def make_inputs(
    seed: int, device: str, *, tokens: int, heads: int, head_dim: int, eps: float
) -> tuple[torch.Tensor, float]:
    """N(0, 1) values with a per-(token, head) scale in [0.25, 3] (the conv + SiLU outputs that
    Qwen3-Next normalises); eps is passed through as a Python float."""
    # Drawn where the case runs: gigabytes take milliseconds on a GPU, tens of seconds on
    # a CPU (the same seed gives the same inputs on the same kind of device).
    dev = device if device.startswith("cuda") else "cpu"
    gen = torch.Generator(device=dev).manual_seed(seed)
    scale = torch.rand(tokens, heads, 1, generator=gen, dtype=torch.float32, device=dev)
    scale = scale * 2.75 + 0.25
    x = torch.randn(tokens, heads, head_dim, generator=gen, dtype=torch.float32, device=dev) * scale
    return x.to(torch.bfloat16).to(device), float(eps)
