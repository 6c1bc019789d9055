"""Reference for `embedding`: out[t] = table[ids[t]], an exact row gather."""

from __future__ import annotations

import torch


def reference(ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    return table[ids]


def make_inputs(
    seed: int, device: str, *, T: int, V: int, H: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids uniform over [0, V) (with replacement: an id may repeat, but nearly all rows
    are distinct, so the T-row bytes expression holds) and a table ~ N(0, 0.02**2), the usual
    embedding initialisation scale."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    ids = torch.randint(0, V, (T,), generator=gen, dtype=torch.int64)
    table = torch.randn(V, H, generator=gen, dtype=torch.bfloat16) * 0.02
    return ids.to(device), table.to(device)
