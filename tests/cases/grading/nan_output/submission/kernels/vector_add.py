import torch


def kernel(x, y):
    return torch.full_like(x, float("nan"))
