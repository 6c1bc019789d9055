"""Reference for `fused_moe`: the expert MLPs of a MoE layer, given the routing."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def reference(
    x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, topk_weights: torch.Tensor,
    topk_ids: torch.Tensor,
) -> torch.Tensor:
    """Expert by expert over the tokens routed to it, in fp32; the activation is rounded to
    bf16 (as vLLM's intermediate cache is) and the output once at the end.

    Which tokens an expert gets is data, so this loops over experts with data-dependent sizes
    and cannot run on the meta device: derive it on the CPU."""
    T, H = x.shape
    E, two_i, _ = w1.shape
    inter = two_i // 2
    k = topk_ids.shape[1]
    xf = x.to(torch.float32)
    flat_ids = topk_ids.reshape(-1).to(torch.int64)
    flat_w = topk_weights.reshape(-1).to(torch.float32)
    # Slots (flat indices t*k + j) grouped by expert; a sort, so no per-expert comparisons.
    order = torch.sort(flat_ids, stable=True).indices
    counts = torch.bincount(flat_ids, minlength=E).tolist()
    out = torch.zeros(T, H, dtype=torch.float32, device=x.device)
    for e, slots in enumerate(torch.split(order, counts)):
        if not counts[e]:
            continue
        tok = slots // k
        h = xf[tok] @ w1[e].to(torch.float32).t()  # [n_e, 2I]: gate, then up
        a = (F.silu(h[:, :inter]) * h[:, inter:]).to(torch.bfloat16).to(torch.float32)
        y = a @ w2[e].to(torch.float32).t()  # [n_e, H]
        out.index_add_(0, tok, y * flat_w[slots, None])
    return out.to(torch.bfloat16)


def _routing(gen: torch.Generator, T: int, E: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Skewed top-k routing (ids [T, k] int64, distinct in a row) and its router scores.

    Scores: a per-expert popularity bias ~ N(0, 0.3**2), raised by 0.7 for E/16 hot experts
    (3-5x the mean load), plus per-token noise ~ N(0, 1). The number of distinct experts used
    is exactly min(E, T*k), as the bytes expression counts: when T*k >= E every expert gets at
    least one token (an expert left empty takes over one slot of the most loaded expert); when
    T*k < E the T*k slots go to distinct experts, drawn by popularity."""
    bias = torch.randn(E, generator=gen, dtype=torch.float32) * 0.3
    hot = torch.randperm(E, generator=gen)[: max(1, E // 16)]
    bias[hot] += 0.7
    scores = bias + torch.randn(T, E, generator=gen, dtype=torch.float32)
    if T * k < E:
        chosen = torch.multinomial(torch.softmax(bias, 0), T * k, replacement=False,
                                   generator=gen)
        return chosen.reshape(T, k), scores
    ids = torch.topk(scores, k, dim=-1).indices
    counts = torch.bincount(ids.reshape(-1), minlength=E)
    for e in torch.nonzero(counts == 0).flatten().tolist():
        hottest = int(torch.argmax(counts))  # has >= 2 tokens while an expert is empty
        rows, cols = torch.nonzero(ids == hottest, as_tuple=True)
        pick = int(torch.randint(0, rows.numel(), (1,), generator=gen))
        ids[rows[pick], cols[pick]] = e  # no row holds e yet: rows stay distinct
        counts[hottest] -= 1
        counts[e] += 1
    return ids, scores


def make_inputs(
    seed: int, device: str, *, T: int, E: int, k: int, H: int, inter: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Hidden states ~ N(0, 1) with a per-token scale in [0.5, 2]; w1 ~ N(0, 1/H) and
    w2 ~ N(0, 1/inter), so gate, up and the expert outputs are O(1); routing weights are the
    softmax of the router scores over each token's k experts (they sum to 1)."""
    if not 1 <= k <= E:
        raise ValueError(f"need 1 <= k <= E, got k={k}, E={E}")
    gen = torch.Generator(device="cpu").manual_seed(seed)
    ids, scores = _routing(gen, T, E, k)
    topk_weights = torch.softmax(torch.gather(scores, 1, ids), dim=-1)
    # The bulk is drawn where the case runs (gigabytes take milliseconds on a GPU, tens of
    # seconds on a CPU), from a stream of its own; the routing above is drawn on the CPU, the
    # same on every device.
    dev = device if device.startswith("cuda") else "cpu"
    bulk = torch.Generator(device=dev).manual_seed(seed + (1 << 32))
    f32 = {"generator": bulk, "dtype": torch.float32, "device": dev}
    scale = torch.rand(T, 1, **f32) * 1.5 + 0.5
    x = (torch.randn(T, H, **f32) * scale).to(torch.bfloat16)
    # The weights are drawn in bfloat16 directly, in place: no fp32 copy, two kernels. They
    # are drawn anew for every timed call: drawn expert by expert through fp32, fused_moe's
    # timed calls cost 42 ms each beyond the kernel on an H100 (2026-12-05).
    w1 = torch.empty(E, 2 * inter, H, dtype=torch.bfloat16, device=dev)
    w2 = torch.empty(E, H, inter, dtype=torch.bfloat16, device=dev)
    w1.normal_(0.0, H**-0.5, generator=bulk)
    w2.normal_(0.0, inter**-0.5, generator=bulk)
    return (x.to(device), w1.to(device), w2.to(device), topk_weights.to(device),
            ids.to(torch.int32).to(device))
