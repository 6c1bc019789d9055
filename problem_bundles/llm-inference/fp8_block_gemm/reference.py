"""Reference for `fp8_block_gemm`: DeepSeek-V3-style block-scaled fp8 GEMM, c = (a*sa) @ (b*sb).T
with fp32 accumulation and one rounding to bf16."""

from __future__ import annotations

import math

import torch

BLOCK = 128  # the quantisation group along K (a and b) and along N (b)
FP8_MAX = 448.0  # the largest finite float8_e4m3fn value


def reference(a: torch.Tensor, a_scale: torch.Tensor, b: torch.Tensor,
              b_scale: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    N = b.shape[0]
    G = K // BLOCK
    # Dequantise both operands to fp32 (fp8 values are exact in fp32), then one fp32 product.
    a_deq = (a.to(torch.float32).reshape(M, G, BLOCK) * a_scale.reshape(M, G, 1)).reshape(M, K)
    # b_scale has one row per 128 rows of b; the last block may be partial (N % 128 != 0).
    b_rows = b_scale.repeat_interleave(BLOCK, dim=0)[:N]  # [N, G]
    b_deq = (b.to(torch.float32).reshape(N, G, BLOCK) * b_rows.reshape(N, G, 1)).reshape(N, K)
    return torch.matmul(a_deq, b_deq.t()).to(torch.bfloat16)


def make_inputs(
    seed: int, device: str, *, M: int, N: int, K: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Activations ~ N(0, 1) times a per-token scale in [0.5, 2], with a few outlier channels
    (x20) shared by all tokens; weights ~ N(0, 1/K) times a per-128x128-block gain, log-uniform
    in [0.25, 2] (so the block scales differ along both N and K). Both are then quantised as
    the description says (scale = amax / 448 per group or block), so the outputs are O(1)."""
    if K % BLOCK:
        raise ValueError(f"K must be a multiple of {BLOCK}, got {K}")
    # Drawn where the case runs: gigabytes take milliseconds on a GPU, tens of seconds on
    # a CPU (the same seed gives the same inputs on the same kind of device).
    dev = device if device.startswith("cuda") else "cpu"
    gen = torch.Generator(device=dev).manual_seed(seed)
    G, NB = K // BLOCK, math.ceil(N / BLOCK)

    token_scale = torch.rand(M, 1, generator=gen, dtype=torch.float32, device=dev) * 1.5 + 0.5
    x = torch.randn(M, K, generator=gen, dtype=torch.float32, device=dev) * token_scale
    outliers = torch.randperm(K, generator=gen, device=dev)[: max(1, K // 512)]
    x[:, outliers] *= 20.0
    xg = x.reshape(M, G, BLOCK)
    a_scale = torch.clamp(torch.amax(torch.abs(xg), dim=-1) / FP8_MAX, min=1e-12)  # [M, G]
    a = torch.clamp(xg / a_scale[..., None], -FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)

    gain = torch.exp(torch.empty(NB, G, dtype=torch.float32, device=dev).uniform_(
        math.log(0.25), math.log(2.0), generator=gen))
    # In place where it can be: the largest weights are about 1 GiB in fp32.
    # Rows past N stay 0 (a partial block).
    w = torch.zeros(NB * BLOCK, K, dtype=torch.float32, device=dev)
    w[:N] = torch.randn(N, K, generator=gen, dtype=torch.float32, device=dev)
    wb = w.view(NB, BLOCK, G, BLOCK)
    wb.mul_(gain[:, None, :, None] / math.sqrt(K))
    b_scale = torch.clamp(torch.amax(torch.abs(wb), dim=(1, 3)) / FP8_MAX, min=1e-12)  # [NB, G]
    wb.div_(b_scale[:, None, :, None]).clamp_(-FP8_MAX, FP8_MAX)
    b = w[:N].to(torch.float8_e4m3fn)
    return (a.reshape(M, K).to(device), a_scale.to(device), b.to(device), b_scale.to(device))
