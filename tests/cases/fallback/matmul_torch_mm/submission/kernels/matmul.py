import torch


def kernel(a, b):
    out = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    torch.mm(a, b, out=out)
    return out
