"""Pure PyTorch: scaled_dot_product_attention (causal, GQA) per packed sequence; on a GPU it
dispatches to PyTorch's flash or memory-efficient attention."""

import itertools

import torch
import torch.nn.functional as F


def kernel(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor,
           max_seqlen: int, scale: float) -> torch.Tensor:
    out = torch.empty_like(q)
    bounds = cu_seqlens.tolist()
    for start, end in itertools.pairwise(bounds):
        # [T, H, D] -> [1, H, T, D]
        qs, ks, vs = (t[start:end].transpose(0, 1).unsqueeze(0) for t in (q, k, v))
        o = F.scaled_dot_product_attention(qs, ks, vs, is_causal=True, scale=scale,
                                           enable_gqa=True)
        out[start:end] = o[0].transpose(0, 1)
    return out
