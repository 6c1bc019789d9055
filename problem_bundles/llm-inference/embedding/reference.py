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
    # Drawn where the case runs: gigabytes take milliseconds on a GPU, tens of seconds on
    # a CPU (the same seed gives the same inputs on the same kind of device).
    dev = device if device.startswith("cuda") else "cpu"
    gen = torch.Generator(device=dev).manual_seed(seed)
    ids = torch.randint(0, V, (T,), generator=gen, dtype=torch.int64, device=dev)
    table = torch.randn(V, H, generator=gen, dtype=torch.bfloat16, device=dev) * 0.02
    return ids.to(device), table.to(device)
