"""vector_add by delegation: PyTorch does the work (graded as fallback)."""

from __future__ import annotations

import torch


def kernel(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y
