"""Reference for `layer_norm`: LayerNorm with weight and bias over the last dimension, fp32
statistics (mean and biased variance), bf16 in and out."""

from __future__ import annotations

import torch


def reference(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.to(torch.float32)
    mean = xf.mean(dim=-1, keepdim=True)
    xc = xf - mean
    var = (xc * xc).mean(dim=-1, keepdim=True)  # biased, as torch.nn.LayerNorm
    out = xc * torch.rsqrt(var + eps) * w.to(torch.float32) + b.to(torch.float32)
    return out.to(torch.bfloat16)


def make_inputs(
    seed: int, device: str, *, tokens: int, hidden: int, eps: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    """Activations with a per-token scale and shift and a few outlier channels; a learnt weight
    near 1 and a small bias; eps is passed through as a Python float."""
    # Drawn where the case runs: gigabytes take milliseconds on a GPU, tens of seconds on
    # a CPU (the same seed gives the same inputs on the same kind of device).
    dev = device if device.startswith("cuda") else "cpu"
    gen = torch.Generator(device=dev).manual_seed(seed)
    scale = torch.rand(tokens, 1, generator=gen, dtype=torch.float32, device=dev) * 3.5 + 0.5
    shift = torch.randn(tokens, 1, generator=gen, dtype=torch.float32, device=dev)
    x = torch.randn(tokens, hidden, generator=gen, dtype=torch.float32, device=dev) * scale + shift
    outliers = torch.randperm(hidden, generator=gen, device=dev)[: max(1, hidden // 256)]
    x[:, outliers] *= 8.0
    w = 1.0 + 0.1 * torch.randn(hidden, generator=gen, dtype=torch.float32, device=dev)
    b = 0.05 * torch.randn(hidden, generator=gen, dtype=torch.float32, device=dev)
    bf16 = torch.bfloat16
    return x.to(bf16).to(device), w.to(bf16).to(device), b.to(bf16).to(device), float(eps)
