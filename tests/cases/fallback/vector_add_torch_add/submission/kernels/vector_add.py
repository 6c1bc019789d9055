import torch


def kernel(x, y):
    return torch.add(x, y)
