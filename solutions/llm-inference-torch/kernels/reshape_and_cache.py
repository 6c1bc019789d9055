"""Pure PyTorch: copy the caches, then index_copy_ the new keys and values into their slots
(padding tokens, slot -1, skipped)."""

import torch


def kernel(key: torch.Tensor, value: torch.Tensor, key_cache: torch.Tensor,
           value_cache: torch.Tensor, slot_mapping: torch.Tensor
           ) -> tuple[torch.Tensor, torch.Tensor]:
    keep = slot_mapping >= 0
    slots = slot_mapping[keep].long()
    out = []
    for new, cache in ((key, key_cache), (value, value_cache)):
        flat = cache.clone().view(-1, *cache.shape[2:])
        flat.index_copy_(0, slots, new[keep])
        out.append(flat.view(cache.shape))
    return out[0], out[1]
