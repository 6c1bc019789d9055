import torch


def kernel(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y
