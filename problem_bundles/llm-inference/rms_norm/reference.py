"""Reference for `rms_norm`: RMSNorm over the last dimension, fp32 inside, bf16 in and out."""

from __future__ import annotations

import torch


def reference(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.to(torch.float32)
    mean_sq = (xf * xf).mean(dim=-1, keepdim=True)
    out = xf * torch.rsqrt(mean_sq + eps) * w.to(torch.float32)
    return out.to(torch.bfloat16)


def make_inputs(
    seed: int, device: str, *, tokens: int, hidden: int, eps: float
) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Activations with a per-token scale (as in a real residual stream) and a learnt weight
    near 1; eps is passed through as a Python float."""
    # Drawn where the case runs: gigabytes take milliseconds on a GPU, tens of seconds on
    # a CPU (the same seed gives the same inputs on the same kind of device).
    dev = device if device.startswith("cuda") else "cpu"
    gen = torch.Generator(device=dev).manual_seed(seed)
    scale = torch.rand(tokens, 1, generator=gen, dtype=torch.float32, device=dev) * 3.5 + 0.5
    x = torch.randn(tokens, hidden, generator=gen, dtype=torch.float32, device=dev) * scale
    w = 1.0 + 0.1 * torch.randn(hidden, generator=gen, dtype=torch.float32, device=dev)
    return x.to(torch.bfloat16).to(device), w.to(torch.bfloat16).to(device), float(eps)
