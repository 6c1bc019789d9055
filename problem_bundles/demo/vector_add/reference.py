"""Reference for `vector_add`: out = x + y in fp32."""

from __future__ import annotations

import torch


def reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y


def make_inputs(seed: int, device: str, *, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Two fp32 vectors of length n, values like a residual stream (mean 0, scale ~1)."""
    # Drawn where the case runs: gigabytes take milliseconds on a GPU, tens of seconds on
    # a CPU (the same seed gives the same inputs on the same kind of device).
    dev = device if device.startswith("cuda") else "cpu"
    gen = torch.Generator(device=dev).manual_seed(seed)
    x = torch.randn(n, generator=gen, dtype=torch.float32, device=dev)
    y = torch.randn(n, generator=gen, dtype=torch.float32, device=dev)
    return x.to(device), y.to(device)
