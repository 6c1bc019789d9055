import torch
import torch.nn.functional as F


def kernel(x, y):
    pair = torch.stack([x, y]).unsqueeze(0)  # [1, 2, n]
    ones = torch.ones(1, 2, 1, dtype=x.dtype, device=x.device)
    return F.conv1d(pair, ones).reshape(-1)
