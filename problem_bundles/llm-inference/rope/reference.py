"""Reference for `rope`: NeoX-style (rotate-half) rotary embedding of query and key, fp32 inside."""

from __future__ import annotations

import torch


def _rotate(v: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = v.shape[-1] // 2
    vf = v.to(torch.float32)
    a, b = vf[..., :half], vf[..., half:]
    out = torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)
    return out.to(torch.bfloat16)


def reference(
    query: torch.Tensor, key: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    angle = positions.to(torch.float32)[:, None] * inv_freq[None, :]  # [tokens, head_dim/2]
    cos, sin = torch.cos(angle)[:, None, :], torch.sin(angle)[:, None, :]
    return _rotate(query, cos, sin), _rotate(key, cos, sin)


def make_inputs(
    seed: int, device: str, *, tokens: int, heads: int, kv_heads: int, head_dim: int,
    theta: float, max_position: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """q and k as projection outputs (about N(0, 1), per-token scale), positions uniform in
    [0, max_position), and the model's rotary frequencies theta ** (-2i/head_dim) in fp32."""
    # Drawn where the case runs: gigabytes take milliseconds on a GPU, tens of seconds on
    # a CPU (the same seed gives the same inputs on the same kind of device).
    dev = device if device.startswith("cuda") else "cpu"
    gen = torch.Generator(device=dev).manual_seed(seed)
    scale = torch.rand(tokens, 1, 1, generator=gen, dtype=torch.float32, device=dev) * 1.5 + 0.5
    query = torch.randn(tokens, heads, head_dim, generator=gen, dtype=torch.float32, device=dev)
    key = torch.randn(tokens, kv_heads, head_dim, generator=gen, dtype=torch.float32, device=dev)
    query *= scale
    key *= scale
    positions = torch.randint(0, max_position, (tokens,), generator=gen, dtype=torch.int64,
                              device=dev)
    exponent = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim
    inv_freq = (1.0 / (float(theta) ** exponent)).to(torch.float32)
    return (query.to(torch.bfloat16).to(device), key.to(torch.bfloat16).to(device),
            positions.to(device), inv_freq.to(device))
