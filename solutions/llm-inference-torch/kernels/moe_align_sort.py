"""Pure PyTorch: stable sort of the flat expert ids, per-expert counts padded to the block size,
scatter into the sentinel-filled outputs."""

import torch


def kernel(topk_ids: torch.Tensor, num_experts: int, block_size: int
           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    flat = topk_ids.flatten().long()
    n = flat.numel()
    max_len = n + num_experts * (block_size - 1)
    counts = torch.bincount(flat, minlength=num_experts)
    padded = (counts + block_size - 1) // block_size * block_size
    ends = padded.cumsum(0)
    order = flat.argsort(stable=True)
    expert = flat[order]
    rank = torch.arange(n, device=flat.device) - (counts.cumsum(0) - counts)[expert]
    sorted_ids = torch.full((max_len,), n, dtype=torch.int32, device=flat.device)
    sorted_ids[(ends - padded)[expert] + rank] = order.int()
    starts = torch.arange(0, -(-max_len // block_size) * block_size, block_size,
                          device=flat.device)
    expert_ids = torch.where(starts < ends[-1], torch.searchsorted(ends, starts, right=True), -1)
    return sorted_ids, expert_ids.int(), ends[-1:].int()
