"""Pure PyTorch: torch.nn.functional.layer_norm in fp32, rounded once to bf16."""

import torch
import torch.nn.functional as F


def kernel(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    return F.layer_norm(x.float(), (x.shape[-1],), w.float(), b.float(), eps).to(torch.bfloat16)
