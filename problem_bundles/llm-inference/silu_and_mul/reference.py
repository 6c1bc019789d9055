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
    # Drawn where the case runs: gigabytes take milliseconds on a GPU, tens of seconds on
    # a CPU (the same seed gives the same inputs on the same kind of device).
    dev = device if device.startswith("cuda") else "cpu"
    gen = torch.Generator(device=dev).manual_seed(seed)
    scale = torch.rand(tokens, 1, generator=gen, dtype=torch.float32, device=dev) * 1.5 + 0.5
    x = torch.randn(tokens, 2 * inter, generator=gen, dtype=torch.float32, device=dev) * scale
    return (x.to(torch.bfloat16).to(device),)
