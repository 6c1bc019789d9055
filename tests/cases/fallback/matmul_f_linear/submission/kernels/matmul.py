import torch.nn.functional as F


def kernel(a, b):
    return F.linear(a, b.t())
