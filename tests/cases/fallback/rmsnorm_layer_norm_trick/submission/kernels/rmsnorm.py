import torch
import torch.nn.functional as F


def kernel(x, w, eps):
    xf = x.float()
    both = torch.cat([xf, -xf], dim=-1)
    normed = F.layer_norm(both, (both.shape[-1],), eps=eps)[..., : x.shape[-1]]
    return (normed * w.float()).to(x.dtype)
