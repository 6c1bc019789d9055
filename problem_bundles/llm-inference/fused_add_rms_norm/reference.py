"""Reference for `fused_add_rms_norm`: residual add, then RMSNorm of the bf16 sum."""

from __future__ import annotations

import torch


def reference(
    x: torch.Tensor, residual: torch.Tensor, w: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    new_residual = (x.to(torch.float32) + residual.to(torch.float32)).to(torch.bfloat16)
    hf = new_residual.to(torch.float32)
    mean_sq = (hf * hf).mean(dim=-1, keepdim=True)
    out = hf * torch.rsqrt(mean_sq + eps) * w.to(torch.float32)
    return out.to(torch.bfloat16), new_residual


def make_inputs(
    seed: int, device: str, *, tokens: int, hidden: int, eps: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    """A residual stream with a per-token scale, a smaller sub-layer output to add to it, and a
    learnt weight near 1; eps is passed through as a Python float."""
    # Drawn where the case runs: gigabytes take milliseconds on a GPU, tens of seconds on
    # a CPU (the same seed gives the same inputs on the same kind of device).
    dev = device if device.startswith("cuda") else "cpu"
    gen = torch.Generator(device=dev).manual_seed(seed)
    scale = torch.rand(tokens, 1, generator=gen, dtype=torch.float32, device=dev) * 3.5 + 0.5
    residual = torch.randn(tokens, hidden, generator=gen, dtype=torch.float32, device=dev) * scale
    x = torch.randn(tokens, hidden, generator=gen, dtype=torch.float32, device=dev) * (0.5 * scale)
    w = 1.0 + 0.1 * torch.randn(hidden, generator=gen, dtype=torch.float32, device=dev)
    return (x.to(torch.bfloat16).to(device), residual.to(torch.bfloat16).to(device),
            w.to(torch.bfloat16).to(device), float(eps))
