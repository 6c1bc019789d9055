"""Pure PyTorch: gather each sequence's keys and values from its cache blocks, then
scaled_dot_product_attention (GQA) for its one query token."""

import torch
import torch.nn.functional as F


def kernel(q: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor,
           block_tables: torch.Tensor, seq_lens: torch.Tensor, scale: float) -> torch.Tensor:
    _, block_size, kv_heads, head_dim = key_cache.shape
    out = torch.empty_like(q)
    for b, length in enumerate(seq_lens.tolist()):
        blocks = block_tables[b, : -(-length // block_size)].long()
        k = key_cache[blocks].reshape(-1, kv_heads, head_dim)[:length]
        v = value_cache[blocks].reshape(-1, kv_heads, head_dim)[:length]
        o = F.scaled_dot_product_attention(q[b][None, :, None, :], k.transpose(0, 1)[None],
                                           v.transpose(0, 1)[None], scale=scale,
                                           enable_gqa=True)
        out[b] = o[0, :, 0]
    return out
