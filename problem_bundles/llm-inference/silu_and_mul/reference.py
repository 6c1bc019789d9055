"""Reference for `silu_and_mul`: silu(gate) * up over the two halves of each row, fp32 inside."""

from __future__ import annotations

import torch


def reference(x: torch.Tensor) -> torch.Tensor:
    inter = x.shape[-1] // 2
    xf = x.to(torch.float32)
    gate, up = xf[:, :inter], xf[:, inter:]
    out = gate * torch.sigmoid(gate) * up
    return out.to(torch.bfloat16)


def make_inputs(seed: int, device: str, *, tokens: int, inter: int) -> tuple[torch.Tensor]:
    """Projection outputs: roughly N(0, 1) with a per-token scale, gate and up alike; the gate
    spans both the saturated (|g| > 4) and the linear part of silu."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    scale = torch.rand(tokens, 1, generator=gen, dtype=torch.float32) * 1.5 + 0.5
    x = torch.randn(tokens, 2 * inter, generator=gen, dtype=torch.float32) * scale
    return (x.to(torch.bfloat16).to(device),)
