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
    gen = torch.Generator(device="cpu").manual_seed(seed)
    scale = torch.rand(M, 1, generator=gen, dtype=torch.float32) * 1.5 + 0.5
    x = (torch.randn(M, K, generator=gen, dtype=torch.float32) * scale).to(torch.bfloat16)
    w = (torch.randn(N, K, generator=gen, dtype=torch.float32) / math.sqrt(K)).to(torch.bfloat16)
    return x.to(device), w.to(device)
