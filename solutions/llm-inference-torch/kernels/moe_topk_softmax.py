"""Pure PyTorch: softmax over experts, top-k, renormalised."""

import torch


def kernel(logits: torch.Tensor, topk: int) -> tuple[torch.Tensor, torch.Tensor]:
    probs = torch.softmax(logits.float(), dim=-1)
    weights, ids = torch.topk(probs, topk, dim=-1)
    return weights / weights.sum(dim=-1, keepdim=True), ids.to(torch.int32)
