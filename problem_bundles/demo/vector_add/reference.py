"""Reference for `vector_add`: out = x + y in fp32."""

from __future__ import annotations

import torch


def reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y


def make_inputs(seed: int, device: str, *, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Two fp32 vectors of length n, values like a residual stream (mean 0, scale ~1)."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(n, generator=gen, dtype=torch.float32)
    y = torch.randn(n, generator=gen, dtype=torch.float32)
    return x.to(device), y.to(device)
