"""Reference for `gemm_bf16`: out = x @ w.T (nn.Linear layout), fp32 accumulation, bf16 out."""

from __future__ import annotations

import math

import torch


def reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    # bf16 values are exact in fp32, so this product is fp32-accurate.
    return torch.matmul(x.to(torch.float32), w.to(torch.float32).t()).to(torch.bfloat16)


def make_inputs(
    seed: int, device: str, *, M: int, N: int, K: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Activations ~ N(0, 1) with a per-token scale in [0.5, 2], weights ~ N(0, 1/K): the
    outputs are O(1) at every K."""
    # Drawn where the case runs: gigabytes take milliseconds on a GPU, tens of seconds on
    # a CPU (the same seed gives the same inputs on the same kind of device).
    dev = device if device.startswith("cuda") else "cpu"
    gen = torch.Generator(device=dev).manual_seed(seed)
    scale = torch.rand(M, 1, generator=gen, dtype=torch.float32, device=dev) * 1.5 + 0.5
    x = torch.randn(M, K, generator=gen, dtype=torch.float32, device=dev) * scale
    w = torch.randn(N, K, generator=gen, dtype=torch.float32, device=dev) / math.sqrt(K)
    x, w = x.to(torch.bfloat16), w.to(torch.bfloat16)
    return x.to(device), w.to(device)
