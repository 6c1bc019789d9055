import cupy as cp
import torch


def kernel(x, y):
    out = cp.asarray(x) + cp.asarray(y)
    return torch.as_tensor(out, device=x.device)
