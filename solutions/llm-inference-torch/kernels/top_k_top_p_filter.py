"""Pure PyTorch, vLLM-style: sort each row, mask beyond top_k, softmax over the kept logits,
keep while the mass strictly above a token is below top_p; filtered logits become the lowest
finite float32."""

import torch


def kernel(logits: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    vals, order = logits.float().sort(dim=-1, descending=True)
    rank = torch.arange(logits.shape[-1], device=logits.device)
    in_k = rank < top_k.long().unsqueeze(-1)
    probs = torch.softmax(vals.double().masked_fill(~in_k, float("-inf")), dim=-1)
    above = probs.cumsum(dim=-1) - probs
    p = torch.where(top_p >= 1.0, torch.inf, top_p.double()).unsqueeze(-1)
    keep = torch.zeros_like(in_k).scatter_(-1, order, in_k & (above < p))
    return logits.float().masked_fill(~keep, torch.finfo(torch.float32).min)
