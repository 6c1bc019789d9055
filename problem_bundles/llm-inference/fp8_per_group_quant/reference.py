"""Reference for `fp8_per_group_quant`: per-token-group (128) dynamic float8_e4m3fn
quantisation, as DeepSeek-V3 / vLLM's per_token_group_quant_fp8."""

from __future__ import annotations

import torch

GROUP = 128  # columns per quantisation group
FP8_MAX = 448.0  # the largest finite float8_e4m3fn value


def reference(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    T, H = x.shape
    xg = x.to(torch.float32).reshape(T, H // GROUP, GROUP)
    amax = torch.amax(torch.abs(xg), dim=-1, keepdim=True)
    scale = torch.clamp(amax / FP8_MAX, min=1e-12)
    q = torch.clamp(xg / scale, -FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q.reshape(T, H), scale.reshape(T, H // GROUP)


def make_inputs(seed: int, device: str, *, T: int, H: int) -> tuple[torch.Tensor]:
    """Activations ~ N(0, 1) times a per-token scale in [0.1, 4], with a few outlier channels
    (x20) shared by all tokens, as in fp8_per_token_quant: the groups holding an outlier get a
    scale ~20x their neighbours'."""
    if H % GROUP:
        raise ValueError(f"H must be a multiple of {GROUP}, got {H}")
    # Drawn where the case runs: gigabytes take milliseconds on a GPU, tens of seconds on
    # a CPU (the same seed gives the same inputs on the same kind of device).
    dev = device if device.startswith("cuda") else "cpu"
    gen = torch.Generator(device=dev).manual_seed(seed)
    token_scale = torch.rand(T, 1, generator=gen, dtype=torch.float32, device=dev) * 3.9 + 0.1
    x = torch.randn(T, H, generator=gen, dtype=torch.float32, device=dev) * token_scale
    outliers = torch.randperm(H, generator=gen, device=dev)[: max(1, H // 512)]
    x[:, outliers] *= 20.0
    return (x.to(torch.bfloat16).to(device),)
