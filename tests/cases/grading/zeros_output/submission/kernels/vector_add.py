import torch


def kernel(x, y):
    return torch.zeros_like(x)
