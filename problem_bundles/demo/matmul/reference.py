"""Reference for `matmul`: C = A @ B with bf16 inputs, fp32 accumulation, bf16 output."""

from __future__ import annotations

import math

import torch


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # bf16 values are exact in fp32 (and in TF32), so this product is fp32-accurate everywhere.
    return torch.matmul(a.to(torch.float32), b.to(torch.float32)).to(torch.bfloat16)


def make_inputs(
    seed: int, device: str, *, M: int, N: int, K: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Activations ~ N(0, 1) and weights ~ N(0, 1/K), so that outputs are O(1) at every K."""
    # Drawn where the case runs: gigabytes take milliseconds on a GPU, tens of seconds on
    # a CPU (the same seed gives the same inputs on the same kind of device).
    dev = device if device.startswith("cuda") else "cpu"
    gen = torch.Generator(device=dev).manual_seed(seed)
    a = torch.randn(M, K, generator=gen, dtype=torch.float32, device=dev)
    b = torch.randn(K, N, generator=gen, dtype=torch.float32, device=dev) / math.sqrt(K)
    return a.to(torch.bfloat16).to(device), b.to(torch.bfloat16).to(device)
