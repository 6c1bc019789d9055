"""Reference for `gelu_tanh_and_mul`: gelu_tanh(gate) * up over the two halves of each row,
fp32 inside."""

from __future__ import annotations

import math

import torch

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def reference(x: torch.Tensor) -> torch.Tensor:
    inter = x.shape[-1] // 2
    xf = x.to(torch.float32)
    gate, up = xf[:, :inter], xf[:, inter:]
    inner = SQRT_2_OVER_PI * (gate + 0.044715 * torch.pow(gate, 3))
    out = 0.5 * gate * (1.0 + torch.tanh(inner)) * up
    return out.to(torch.bfloat16)


def make_inputs(seed: int, device: str, *, tokens: int, inter: int) -> tuple[torch.Tensor]:
    """Projection outputs: roughly N(0, 1) with a per-token scale in [0.5, 2.5], gate and up
    alike, so the gate spans the saturated (|g| > 3) and the curved part of GELU."""
    # Drawn where the case runs: gigabytes take milliseconds on a GPU, tens of seconds on
    # a CPU (the same seed gives the same inputs on the same kind of device).
    dev = device if device.startswith("cuda") else "cpu"
    gen = torch.Generator(device=dev).manual_seed(seed)
    scale = torch.rand(tokens, 1, generator=gen, dtype=torch.float32, device=dev) * 2.0 + 0.5
    x = torch.randn(tokens, 2 * inter, generator=gen, dtype=torch.float32, device=dev) * scale
    return (x.to(torch.bfloat16).to(device),)
