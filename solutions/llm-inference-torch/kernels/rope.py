"""Pure PyTorch: neox-style rotation of query and key with cos/sin of positions * inv_freq."""

import torch


def _rotate(v: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    a, b = v.float().chunk(2, dim=-1)
    return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1).to(torch.bfloat16)


def kernel(query: torch.Tensor, key: torch.Tensor, positions: torch.Tensor,
           inv_freq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    angle = torch.outer(positions.float(), inv_freq)[:, None, :]
    cos, sin = angle.cos(), angle.sin()
    return _rotate(query, cos, sin), _rotate(key, cos, sin)
