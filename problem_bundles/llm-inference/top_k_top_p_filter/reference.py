"""Reference for `top_k_top_p_filter`: the sampler's top-k and top-p (nucleus) filter over the
vocabulary, with per-request parameters; vLLM's semantics (apply_top_k_top_p), written with a
sort for clarity, with the masses in float64."""

from __future__ import annotations

import torch

# Stands for vLLM's -inf: the grader rejects non-finite outputs, and softmax gives this value
# probability exactly 0 as well (exp(FILL - max) underflows to 0).
FILL = torch.finfo(torch.float32).min
_TOP_K_CHOICES = (1, 5, 10, 20, 40, 50, 100, 200, 500, 1000)
_MIN_BOUNDARY_PROB = 1e-4  # see make_inputs: top_p never falls within 2.5e-5 of a boundary


def reference(logits: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    x = logits.to(torch.float32)
    vocab = x.shape[-1]
    # Descending order; the logits of a row are distinct (make_inputs), so it is unique.
    vals, order = torch.sort(x, dim=-1, descending=True)
    rank = torch.arange(vocab, device=x.device)
    in_k = rank < top_k.to(torch.int64).unsqueeze(-1)  # top_k = vocab: every token
    # Softmax over the top-k tokens only (vLLM masks the rest before its softmax).
    v64 = vals.to(torch.float64)
    e = torch.where(in_k, torch.exp(v64 - v64[:, :1]), 0.0)
    probs = e / e.sum(dim=-1, keepdim=True)
    # The mass of the tokens strictly above each one; it stays in the nucleus while that mass is
    # below top_p (so the top token always stays), and top_p >= 1 disables the filter.
    above = torch.cumsum(probs, dim=-1) - probs
    p = torch.where(top_p >= 1.0, torch.inf, top_p.to(torch.float64)).unsqueeze(-1)
    keep_sorted = in_k & (above < p)
    keep = torch.empty_like(keep_sorted).scatter_(-1, order, keep_sorted)
    return torch.where(keep, x, FILL)


def make_inputs(
    seed: int, device: str, *, B: int, V: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per row: a tail of V logits ~ N(0, sigma**2), sigma in [1, 2.5], and a head of 16
    candidate tokens (one in each sixteenth of the vocabulary) whose top sits -3..+4 above the
    tail's logsumexp (the top token gets 5% to 98% of the mass), spaced by Exp(0.7) gaps, each
    replacing the tail's logit at its place; shifted so the row's max is in [8, 15.75],
    clamped to [-16, 15.75], rounded to a grid of 2**-2 plus a distinct per-column offset of
    v * 2**-20 (V <= 2**18): no two logits of a row tie, every value is exact in fp32.

    Per-request parameters cycle through four kinds of request (from a random start): top-k and
    top-p, top-k only (top_p = 1.0), top-p only (top_k = V), neither. top_k is drawn from
    common values (1 ... 1000, at most V). top_p is not a round number: a target drawn from
    [0.3, 0.98] fixes which token closes the nucleus, then top_p is placed between the cumulative
    masses before and after that token (25%-75% of its probability in), and that token is moved
    up until its probability is at least 1e-4. So top_p is at least 2.5e-5 away from every
    cumulative-mass boundary, far beyond fp32 rounding of the masses: the kept set is unique.
    """
    if not 16 <= V <= 2**18:
        raise ValueError(f"need 16 <= V <= 2**18 (a head token in each sixteenth of the "
                         f"vocabulary, the per-column offsets), got V={V}")
    # Drawn where the case runs: the largest shapes' draw (a sort of B*V logits in float64)
    # took seconds on a CPU, and every timed call draws afresh.
    dev = device if device.startswith("cuda") else "cpu"
    gen = torch.Generator(device=dev).manual_seed(seed)
    f32 = torch.float32
    on = {"generator": gen, "device": dev}
    sigma = torch.rand(B, 1, dtype=f32, **on) * 1.5 + 1.0
    x = torch.randn(B, V, dtype=f32, **on) * sigma
    lse = torch.logsumexp(x, dim=-1, keepdim=True)
    top = lse + torch.rand(B, 1, dtype=f32, **on) * 7.0 - 3.0
    gaps = -0.7 * torch.log(torch.rand(B, 16, dtype=f32, **on))
    head = top - torch.cumsum(gaps, dim=-1) + gaps[:, :1]  # head[:, 0] = top
    # One head token in each sixteenth of the vocabulary: the ids of a row are distinct, so
    # the scatter writes each logit once (two writes to one place race on a GPU).
    stripe = V // 16
    head_ids = (torch.arange(16, device=dev) * stripe
                + torch.randint(0, stripe, (B, 16), **on))
    x.scatter_(1, head_ids, head)
    row_max = torch.rand(B, 1, dtype=f32, **on) * 7.75 + 8.0
    x = (x - x.amax(dim=-1, keepdim=True) + row_max).clamp(-16.0, 15.75)
    logits = (torch.round(x * 4.0) / 4.0
              + torch.arange(V, dtype=f32, device=dev) * 2.0**-20)

    kind = (torch.randint(0, 4, (1,), **on) + torch.arange(B, device=dev)) % 4
    k_pick = torch.tensor(_TOP_K_CHOICES, device=dev)[
        torch.randint(0, len(_TOP_K_CHOICES), (B,), **on)]
    top_k = torch.where((kind == 0) | (kind == 1), k_pick.clamp(max=V), V).to(torch.int32)
    target = torch.rand(B, dtype=torch.float64, **on) * 0.68 + 0.3
    frac = torch.rand(B, dtype=torch.float64, **on) * 0.5 + 0.25
    top_p = torch.ones(B, dtype=f32, device=dev)
    rows = torch.nonzero((kind == 0) | (kind == 2)).flatten()
    if rows.numel():  # all rows with a top-p at once: one sort, no per-row loop
        # Sorted in fp32 (the logits are exact there), the masses in float64; past a row's
        # top_k the probabilities are 0 and its cumulative mass stays flat.
        vals = torch.sort(logits[rows], dim=-1, descending=True).values.to(torch.float64)
        k = top_k[rows].to(torch.int64)
        in_k = torch.arange(V, device=dev) < k.unsqueeze(-1)
        probs = torch.softmax(vals.masked_fill(~in_k, -torch.inf), dim=-1)
        cum = torch.cumsum(probs, dim=-1)
        # The token that closes the nucleus: the first whose cumulative mass reaches the
        # target, within the top_k and among the tokens of probability >= _MIN_BOUNDARY_PROB
        # (the top token has it: its mass is at least 5%).
        last = torch.searchsorted(cum, target[rows].unsqueeze(-1)).squeeze(-1)
        last = torch.minimum(last, k - 1)
        last = torch.minimum(last, ((probs >= _MIN_BOUNDARY_PROB).sum(-1) - 1).clamp(min=0))
        before = torch.where(last > 0, cum.gather(-1, (last - 1).clamp(min=0).unsqueeze(-1))
                             .squeeze(-1), 0.0)
        top_p[rows] = (before + frac[rows] * probs.gather(-1, last.unsqueeze(-1)).squeeze(-1)
                       ).to(f32)
    return logits.to(device), top_k.to(device), top_p.to(device)
