"""top_k_top_p_filter in Triton, without sorting. One program per row:

1. A pass over the row finds its max m; a second builds a histogram of m - x in 64 bins of a
   quarter (tl.histogram: one bin index per logit) and sums the whole mass Z = sum(exp(x - m)).
   The highest bin edge with at least top_k logits above it (or, for top-p alone, surely at
   least top_p * Z of the mass above it) is a safe lower bound L for the final threshold.
2. A third pass copies the logits >= L into a scratch row (usually a few hundred to a few
   thousand values).
3. Two threshold searches run on the scratch row only, over the 32-bit keys of the logits (fp32
   bit patterns mapped to unsigned integers in the order of the floats), exactly, one 4-bit
   digit per pass from the top, testing the 15 candidates t + (j << shift) at once:
   - top-k: the k-th largest key, the largest t with count(key >= t) >= k;
   - top-p: the largest t with mass(key >= max(t, t_k)) >= p * Z_k, where Z_k is the mass of
     the top-k tokens; that t is the key of the token that closes the nucleus.
4. A last pass writes the logits at or above the larger threshold and FILL elsewhere.

Rows whose k-th largest logit (or nucleus) reaches more than ~15.75 below the max fall back to
searching the whole row: slower, still exact.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

FILL = torch.finfo(torch.float32).min


@triton.jit
def _ordered_key(x):
    """fp32 -> uint32, monotone: flip every bit of a negative float, the sign bit of the rest."""
    bits = x.to(tl.uint32, bitcast=True)
    return tl.where((bits >> 31) != 0, ~bits, bits | 0x80000000)


@triton.jit
def _top_k_top_p_kernel(logits_ptr, top_k_ptr, top_p_ptr, out_ptr, buf_ptr, V, stride, fill,
                        BLOCK: tl.constexpr, BLOCK_S: tl.constexpr, NB: tl.constexpr,
                        SCALE: tl.constexpr, DIGIT: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = logits_ptr + row * stride
    out_row = out_ptr + row * stride
    buf_row = buf_ptr + row * V
    offs = tl.arange(0, BLOCK)
    k = tl.load(top_k_ptr + row)
    p = tl.load(top_p_ptr + row)
    use_k = k < V
    use_p = p < 1.0

    thr = tl.full([], 0, tl.uint32)  # key 0 is below every logit's key: keep all
    if use_k | use_p:
        # -- 1. max, then a histogram of m - x in bins of 1/SCALE, and the whole mass -------------
        m_acc = tl.full([BLOCK], float("-inf"), tl.float32)
        for start in range(0, V, BLOCK):
            x = tl.load(x_row + start + offs, mask=start + offs < V, other=float("-inf"))
            m_acc = tl.maximum(m_acc, x)
        m = tl.max(m_acc, axis=0)
        hist = tl.zeros([NB], tl.int32)
        z_acc = tl.zeros([BLOCK], tl.float32)
        for start in range(0, V, BLOCK):
            x = tl.load(x_row + start + offs, mask=start + offs < V, other=float("-inf"))
            z_acc += tl.exp(x - m)  # 0 on the padding
            # The last bin collects everything further below, and the padding (m - x = inf).
            hist += tl.histogram(tl.minimum((m - x) * SCALE, NB - 1).to(tl.int32), NB)
        z_all = tl.sum(z_acc, axis=0)
        b = tl.arange(0, NB)
        if use_k:
            # The buffer must hold every top-k logit (to get Z_k exactly): L from the counts.
            ok = tl.cumsum(hist, axis=0) >= k
        else:
            # Two lower bounds of the mass above each bin edge: its logits are at most 1/SCALE
            # below the top of their bin, and those under the edge at most at the top of
            # theirs (Z minus that; tight when top_p is near 1). With slack against rounding:
            # L only needs to be low enough.
            h = hist.to(tl.float32)
            top_mass = h * tl.exp(-b.to(tl.float32) / SCALE)
            from_above = tl.cumsum(h * tl.exp(-(b + 1).to(tl.float32) / SCALE), axis=0)
            from_below = z_all - (tl.sum(top_mass, axis=0) - tl.cumsum(top_mass, axis=0))
            ok = tl.maximum(from_above, from_below) >= p * z_all * 1.001
        first = tl.min(tl.where(ok & (b < NB - 1), b, NB), axis=0)
        # Bins are decided on fp32 m - x: the edge moves down by a margin far above its
        # rounding. No usable bin: lower = -inf, the whole row is searched.
        edge = m - (first + 1).to(tl.float32) / SCALE - (0.0625 + tl.abs(m) * 1e-6)
        lower = tl.where(first < NB, edge, float("-inf"))

        # -- 2. the logits >= lower, packed into the scratch row --------------------------------
        n = 0
        for start in range(0, V, BLOCK):
            mask = start + offs < V
            x = tl.load(x_row + start + offs, mask=mask, other=float("-inf"))
            sel = mask & (x >= lower)
            pos = n + tl.cumsum(sel.to(tl.int32), axis=0) - 1
            tl.store(buf_row + pos, x, mask=sel)
            n += tl.sum(sel.to(tl.int32), axis=0)

        # -- 3. exact thresholds, searched on the scratch row -----------------------------------
        NC: tl.constexpr = 1 << DIGIT
        j = tl.arange(0, NC).to(tl.uint32)
        offs_s = tl.arange(0, BLOCK_S)
        t_k = tl.full([], 0, tl.uint32)
        if use_k:
            for shift in tl.static_range(32 - DIGIT, -1, -DIGIT):
                cand = t_k + (j << shift)
                c = tl.zeros([NC, BLOCK_S], tl.int32)
                for start in range(0, n, BLOCK_S):
                    mask = start + offs_s < n
                    key = tl.where(mask, _ordered_key(tl.load(buf_row + start + offs_s,
                                                               mask=mask, other=0.0)), 0)
                    c += (key[None, :] >= cand[:, None]).to(tl.int32)
                passed = (tl.sum(c, axis=1) >= k) & (j > 0)
                t_k = t_k + (tl.sum(passed.to(tl.int32), axis=0).to(tl.uint32) << shift)
        thr = t_k
        if use_p:
            z = z_all  # k = V: the scratch row may hold only the head, Z is the whole mass
            if use_k:
                zk_acc = tl.zeros([BLOCK_S], tl.float32)
                for start in range(0, n, BLOCK_S):
                    mask = start + offs_s < n
                    x = tl.load(buf_row + start + offs_s, mask=mask, other=float("-inf"))
                    zk_acc += tl.where(_ordered_key(x) >= t_k, tl.exp(x - m), 0.0)
                z = tl.sum(zk_acc, axis=0)
            target = p * z
            # Masses of nested sets summed in the same order do not increase with j, even in
            # fp32: the candidates that pass are j = 1..digit.
            t_p = tl.full([], 0, tl.uint32)
            for shift in tl.static_range(32 - DIGIT, -1, -DIGIT):
                cand = t_p + (j << shift)
                s = tl.zeros([NC, BLOCK_S], tl.float32)
                for start in range(0, n, BLOCK_S):
                    mask = start + offs_s < n
                    x = tl.load(buf_row + start + offs_s, mask=mask, other=float("-inf"))
                    key = _ordered_key(x)
                    e = tl.where(mask & (key >= t_k), tl.exp(x - m), 0.0)
                    s += tl.where(key[None, :] >= cand[:, None], e[None, :], 0.0)
                passed = (tl.sum(s, axis=1) >= target) & (j > 0)
                t_p = t_p + (tl.sum(passed.to(tl.int32), axis=0).to(tl.uint32) << shift)
            thr = tl.maximum(t_k, t_p)

    # -- 4. the filtered row ------------------------------------------------------------------
    for start in range(0, V, BLOCK):
        mask = start + offs < V
        x = tl.load(x_row + start + offs, mask=mask, other=0.0)
        tl.store(out_row + start + offs, tl.where(_ordered_key(x) >= thr, x, fill), mask=mask)


def kernel(logits: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    B, V = logits.shape
    out = torch.empty_like(logits)
    scratch = torch.empty_like(logits)  # per row: the logits above the coarse bound
    # Measured on an H200: a row's passes are latency-bound, so wide blocks win, except for
    # the largest batches (256 rows of 152K), where 2048 x 8 warps beat 4096 x 16 by 17%.
    wide = B < 192
    block = min(4096 if wide else 2048, triton.next_power_of_2(V))
    _top_k_top_p_kernel[(B,)](logits, top_k, top_p, out, scratch, V, logits.stride(0), FILL,
                              BLOCK=block, BLOCK_S=256, NB=64, SCALE=4, DIGIT=4,
                              num_warps=16 if wide else 8)
    return out
