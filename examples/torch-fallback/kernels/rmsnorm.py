"""rmsnorm by delegation: torch.nn.functional.rms_norm does the work (graded as fallback)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def kernel(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    out = F.rms_norm(x.float(), (x.shape[-1],), w.float(), eps)
    return out.to(torch.bfloat16)
