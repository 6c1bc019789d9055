"""matmul by calling PyTorch."""
import torch


def kernel(a, b):
    return torch.matmul(a, b)
