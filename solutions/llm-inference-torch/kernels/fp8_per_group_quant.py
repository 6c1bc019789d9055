"""Pure PyTorch: amax per 128-column group, scale, clamp, cast to float8_e4m3fn."""

import torch


def kernel(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    t, h = x.shape
    xg = x.float().view(t, h // 128, 128)
    scale = (xg.abs().amax(dim=-1, keepdim=True) / 448.0).clamp(min=1e-12)
    q = (xg / scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return q.view(t, h), scale.view(t, h // 128)
