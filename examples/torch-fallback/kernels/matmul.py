"""matmul by delegation: torch.matmul (cuBLAS on a GPU) does the work (graded as fallback)."""

from __future__ import annotations

import torch


def kernel(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.matmul(a, b)
