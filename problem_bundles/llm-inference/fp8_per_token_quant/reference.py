"""Reference for `fp8_per_token_quant`: per-token dynamic float8_e4m3fn quantisation."""

from __future__ import annotations

import torch

FP8_MAX = 448.0  # the largest finite float8_e4m3fn value


def reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    xf = x.to(torch.float32)
    amax = torch.amax(torch.abs(xf), dim=-1, keepdim=True)
    scale = torch.clamp(amax / FP8_MAX, min=1e-12)
    q = torch.clamp(xf / scale, -FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q, scale


def make_inputs(seed: int, device: str, *, T: int, H: int) -> tuple[torch.Tensor]:
    """Activations ~ N(0, 1) times a per-token scale in [0.1, 4], with a few outlier channels
    (x20) shared by all tokens."""
    # Drawn where the case runs: gigabytes take milliseconds on a GPU, tens of seconds on
    # a CPU (the same seed gives the same inputs on the same kind of device).
    dev = device if device.startswith("cuda") else "cpu"
    gen = torch.Generator(device=dev).manual_seed(seed)
    token_scale = torch.rand(T, 1, generator=gen, dtype=torch.float32, device=dev) * 3.9 + 0.1
    x = torch.randn(T, H, generator=gen, dtype=torch.float32, device=dev) * token_scale
    outliers = torch.randperm(H, generator=gen, device=dev)[: max(1, H // 512)]
    x[:, outliers] *= 20.0
    return (x.to(torch.bfloat16).to(device),)
