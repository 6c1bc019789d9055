"""Atrex-Bench fp8_blockscale_fused_moe in Triton: the routed slots are counting-sorted by
expert into blocks of BLOCK_M rows (no atomics, no host reads), then two grouped GEMMs over the
float8_e4m3fnuz bytes, and a last pass rounds the fp32 sum to float8_e4m3fnuz.

Each fnuz byte becomes an fp16 of exactly its value / 128 by moving its bits (fp16 has the
same subnormal step relative to its bias), so fp16 tl.dot products are exact and sums fp32;
per 128-wide k-block the partial is scaled by its activation and weight block scales (times
2**14 or 2**7). silu(gate) * up is kept in fp16 (11 bits, well inside the fp8 output's
tolerance); the down GEMM's rows, times their routing weights, are added atomically into an
fp32 buffer. The NaN byte 0x80 of the inputs would read as -0 (the quantised inputs never
hold it). Under the CPU interpreter the dot operands are widened to fp32."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

# -- align: slot ids sorted by expert, each expert's segment padded to whole blocks --------------


@triton.jit
def _count_kernel(ids_ptr, counts_ptr, n, E, CHUNK: tl.constexpr, BLOCK_E: tl.constexpr):
    c = tl.program_id(0)
    idx = c * CHUNK + tl.arange(0, CHUNK)
    ids = tl.load(ids_ptr + idx, mask=idx < n, other=-1)
    ok = (ids >= 0) & (ids < E)
    hist = tl.histogram(tl.where(ok, ids, 0), BLOCK_E, mask=ok)
    tl.store(counts_ptr + c * BLOCK_E + tl.arange(0, BLOCK_E), hist)


@triton.jit
def _align_kernel(ids_ptr, counts_ptr, sorted_ptr, expert_ids_ptr, post_pad_ptr,
                  n, E, block_size, num_chunks, n_pad_progs,
                  FUSED: tl.constexpr, CHUNK: tl.constexpr, BLOCK_E: tl.constexpr,
                  ROWS: tl.constexpr, EB: tl.constexpr, BLOCK_PAD: tl.constexpr,
                  BB: tl.constexpr):
    """Programs [0, num_chunks) sort and scatter a chunk each, the next n_pad_progs write the
    sentinel n into EB experts' padding, the rest the expert ids of BB blocks each."""
    pid = tl.program_id(0)
    e = tl.arange(0, BLOCK_E)
    total = tl.zeros((BLOCK_E,), dtype=tl.int32)
    before = tl.zeros((BLOCK_E,), dtype=tl.int32)
    if FUSED:
        local = tl.arange(0, CHUNK)
        for j in range(num_chunks):
            idx = j * CHUNK + local
            ids = tl.load(ids_ptr + idx, mask=idx < n, other=-1)
            ok = (ids >= 0) & (ids < E)
            h = tl.histogram(tl.where(ok, ids, 0), BLOCK_E, mask=ok)
            total += h
            before += tl.where(j < pid, h, 0)
    else:
        rows = tl.arange(0, ROWS)
        for r0 in range(0, num_chunks, ROWS):
            r = r0 + rows
            cnt = tl.load(counts_ptr + r[:, None] * BLOCK_E + e[None, :],
                          mask=r[:, None] < num_chunks, other=0)
            total += tl.sum(cnt, axis=0)
            before += tl.sum(tl.where(r[:, None] < pid, cnt, 0), axis=0)
    padded = (total + block_size - 1) // block_size * block_size
    ends = tl.cumsum(padded, axis=0)
    start = ends - padded
    post = tl.sum(padded, axis=0)
    if pid < num_chunks:
        if pid == 0:
            tl.store(post_pad_ptr, post)
        local = tl.arange(0, CHUNK)
        idx = pid * CHUNK + local
        ids = tl.load(ids_ptr + idx, mask=idx < n, other=-1)
        ok = (ids >= 0) & (ids < E)
        own = tl.histogram(tl.where(ok, ids, 0), BLOCK_E, mask=ok)
        base = start + before - (tl.cumsum(own, axis=0) - own)
        keys = tl.sort(tl.where(ok, ids, BLOCK_E) * CHUNK + local)
        x = keys // CHUNK
        live = x < E
        dest = tl.gather(base, tl.where(live, x, 0), 0) + local
        tl.store(sorted_ptr + dest, pid * CHUNK + keys % CHUNK, mask=live)
    elif pid < num_chunks + n_pad_progs:
        g = (pid - num_chunks) * EB + tl.arange(0, EB)
        pick = g[:, None] == e[None, :]
        g_start = tl.sum(tl.where(pick, start[None, :], 0), axis=1)
        g_total = tl.sum(tl.where(pick, total[None, :], 0), axis=1)
        g_pad = tl.sum(tl.where(pick, padded[None, :], 0), axis=1) - g_total
        q = tl.arange(0, BLOCK_PAD)
        tl.store(sorted_ptr + (g_start + g_total)[:, None] + q[None, :], n,
                 mask=q[None, :] < g_pad[:, None])
    else:
        b = (pid - num_chunks - n_pad_progs) * BB + tl.arange(0, BB)
        first = b * block_size
        owner = tl.sum((ends[None, :] <= first[:, None]).to(tl.int32), axis=1)
        tl.store(expert_ids_ptr + b, owner, mask=first < post)


# -- the two grouped GEMMs -------------------------------------------------------------------


@triton.jit
def _fnuz_as_f16(q):
    """fp16 holding exactly (float8_e4m3fnuz byte q) / 128: sign, then exponent and mantissa
    moved up 7 bits (the fnuz bias is 8, fp16's 15; subnormals line up too)."""
    u = q.to(tl.int32)
    return (((u & 0x80) << 8) | ((u & 0x7F) << 7)).to(tl.int16).to(tl.float16, bitcast=True)


@triton.jit
def _block_coords(num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    in_group = GROUP_M * num_pid_n
    first_m = (pid // in_group) * GROUP_M
    group_m = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % group_m
    pid_n = (pid % in_group) // group_m
    return pid_m, pid_n


@triton.jit
def _gate_up_kernel(x_ptr, w1_ptr, as_ptr, w1s_ptr, act_ptr, sorted_ptr, expert_ids_ptr,
                    post_pad_ptr, n, inter, D, num_pid_m, blk_n, blk_k, nkb, n1b,
                    TOPK: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, WIDEN: tl.constexpr):
    pid_m, pid_n = _block_coords(num_pid_m, tl.cdiv(inter, BLOCK_N), GROUP_M)
    if pid_m * BLOCK_M >= tl.load(post_pad_ptr):
        return
    slot = tl.load(sorted_ptr + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
    valid = slot < n  # padding rows hold the sentinel n
    tok = (slot // TOPK).to(tl.int64)
    e = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = rn < inter
    rn_c = tl.where(n_ok, rn, 0).to(tl.int64)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = x_ptr + tok[:, None] * D + rk[None, :]
    # [BLOCK_K, BLOCK_N] tiles of w1[e, rn, :].T (gate) and w1[e, inter + rn, :].T (up)
    g_ptrs = w1_ptr + e * (2 * inter) * D + rn_c[None, :] * D + rk[:, None]
    u_ptrs = g_ptrs + inter * D
    sa_ptrs = as_ptr + tok * nkb
    sg_ptrs = w1s_ptr + e * n1b * nkb + (rn_c // blk_n) * nkb
    su_ptrs = w1s_ptr + e * n1b * nkb + ((rn_c + inter) // blk_n) * nkb
    acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_u = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, D, BLOCK_K):
        a = _fnuz_as_f16(tl.load(a_ptrs, mask=valid[:, None], other=0))
        g = _fnuz_as_f16(tl.load(g_ptrs))
        u = _fnuz_as_f16(tl.load(u_ptrs))
        kb = k0 // blk_k
        sa = tl.load(sa_ptrs + kb, mask=valid, other=0.0) * 16384.0  # two factors of 2**-7
        sg = tl.load(sg_ptrs + kb)
        su = tl.load(su_ptrs + kb)
        if WIDEN:
            a = a.to(tl.float32)
            g = g.to(tl.float32)
            u = u.to(tl.float32)
        acc_g += tl.dot(a, g) * (sa[:, None] * sg[None, :])
        acc_u += tl.dot(a, u) * (sa[:, None] * su[None, :])
        a_ptrs += BLOCK_K
        g_ptrs += BLOCK_K
        u_ptrs += BLOCK_K
    act = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u  # silu(gate) * up
    offs = slot[:, None].to(tl.int64) * inter + rn[None, :]
    tl.store(act_ptr + offs, act.to(tl.float16), mask=valid[:, None] & n_ok[None, :])


@triton.jit
def _down_kernel(act_ptr, w2_ptr, w2s_ptr, out_ptr, topk_w_ptr, sorted_ptr, expert_ids_ptr,
                 post_pad_ptr, n, D, inter, num_pid_m, blk_n, blk_k, nib, ndb,
                 TOPK: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, WIDEN: tl.constexpr):
    pid_m, pid_n = _block_coords(num_pid_m, tl.cdiv(D, BLOCK_N), GROUP_M)
    if pid_m * BLOCK_M >= tl.load(post_pad_ptr):
        return
    slot = tl.load(sorted_ptr + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
    valid = slot < n
    slot64 = slot.to(tl.int64)
    e = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = rn < D
    rn_c = tl.where(n_ok, rn, 0).to(tl.int64)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = act_ptr + slot64[:, None] * inter + rk[None, :]
    # [BLOCK_K, BLOCK_N] tile of w2[e].T: element (k, d) is w2[e, d, k]
    b_ptrs = w2_ptr + e * D * inter + rn_c[None, :] * inter + rk[:, None]
    s_ptrs = w2s_ptr + e * ndb * nib + (rn_c // blk_k) * nib
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, inter, BLOCK_K):
        a = tl.load(a_ptrs, mask=valid[:, None], other=0.0)
        b = _fnuz_as_f16(tl.load(b_ptrs))
        s = tl.load(s_ptrs + k0 // blk_n) * 128.0  # the weight's factor of 2**-7
        if WIDEN:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc += tl.dot(a, b) * s[None, :]
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K
    weight = tl.load(topk_w_ptr + slot, mask=valid, other=0.0)
    tok = slot64 // TOPK
    tl.atomic_add(out_ptr + tok[:, None] * D + rn[None, :], acc * weight[:, None],
                  mask=valid[:, None] & n_ok[None, :], sem="relaxed")


# -- fp32 -> float8_e4m3fnuz -----------------------------------------------------------------


@triton.jit
def _to_fnuz_kernel(src_ptr, dst_ptr, total, BLOCK: tl.constexpr):
    """torch's rounding to float8_e4m3fnuz: to nearest even; a magnitude that rounds past 240,
    Inf and NaN become NaN (0x80); zero has no sign."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    q = tl.load(src_ptr + offs, mask=mask, other=0.0)
    a = tl.abs(q)
    bits = a.to(tl.int32, bitcast=True)
    exp = tl.maximum(((bits >> 23) & 0xFF) - 127, -7)  # below 2**-7: subnormal, step 2**-10
    step = ((tl.minimum(exp, 7) - 3 + 127) << 23).to(tl.float32, bitcast=True)
    y = a / step  # exact: a power-of-two divisor
    r = ((y + 12582912.0) - 12582912.0) * step  # 1.5 * 2**23: y rounded to an integer, RNE
    rbits = r.to(tl.int32, bitcast=True)
    rexp = ((rbits >> 23) & 0xFF) - 127
    normal = ((rexp + 8) << 3) | ((rbits >> 20) & 0x7)  # rounding may carry into the exponent
    sub = (r * 1024.0).to(tl.int32)
    code = tl.where(rexp >= -7, normal, sub)
    code = tl.where((q < 0) & (code != 0), code | 0x80, code)
    code = tl.where((r > 240.0) | (a != a), 0x80, code)  # also Inf (r is Inf) and NaN
    tl.store(dst_ptr + offs, code.to(tl.uint8), mask=mask)


def _config(n: int, E: int, on_gpu: bool) -> dict[str, int]:
    """Fixed tiles by the mean number of slots per expert, chosen so that neither GEMM spills
    registers on sm_90 (ptxas -v): gate/up carries two accumulators and the decoded tiles."""
    if not on_gpu:  # small tiles keep Triton's CPU interpreter quick
        return {"BLOCK_M": 16, "GROUP_M": 2, "GU_N": 32, "GU_K": 32, "GU_WARPS": 4,
                "DN_N": 32, "DN_K": 32, "DN_WARPS": 4, "STAGES": 1}
    if n / min(E, n) <= 16:  # decode: a block of rows per expert; stream the weights
        return {"BLOCK_M": 16, "GROUP_M": 1, "GU_N": 64, "GU_K": 64, "GU_WARPS": 8,
                "DN_N": 64, "DN_K": 128, "DN_WARPS": 8, "STAGES": 4}
    return {"BLOCK_M": 64, "GROUP_M": 8, "GU_N": 64, "GU_K": 64, "GU_WARPS": 8,
            "DN_N": 128, "DN_K": 64, "DN_WARPS": 8, "STAGES": 3}


class Model(torch.nn.Module):
    def __init__(self, num_experts: int, intermediate_size: int, top_k: int,
                 scale_block_n: int = 128, scale_block_k: int = 128) -> None:
        super().__init__()
        self.num_experts = num_experts
        self.intermediate_size = intermediate_size
        self.top_k = top_k
        self.scale_block_n = scale_block_n
        self.scale_block_k = scale_block_k

    def forward(self, hidden_states: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor,
                topk_weights: torch.Tensor, topk_ids: torch.Tensor, a_scale: torch.Tensor,
                fc1_scale: torch.Tensor, fc2_scale: torch.Tensor) -> torch.Tensor:
        B, D = hidden_states.shape
        k = topk_ids.shape[1]
        E, _, inter = w2.shape
        blk_n, blk_k = self.scale_block_n, self.scale_block_k
        dev = hidden_states.device
        on_gpu = hidden_states.is_cuda
        n = B * k
        out = torch.empty((B, D), dtype=hidden_states.dtype, device=dev)
        if n == 0:
            return out
        cfg = _config(n, E, on_gpu)
        bm, group_m = cfg["BLOCK_M"], cfg["GROUP_M"]
        step = min(blk_n & -blk_n, blk_k & -blk_k)  # a k-step stays inside one scale block
        gu_k, dn_k = min(cfg["GU_K"], step), min(cfg["DN_K"], step)
        if D % blk_k or inter % blk_n or step < 16:
            raise ValueError("hidden and intermediate sizes must be multiples of the scale "
                             "blocks, and the scale blocks of 16")
        x = hidden_states.contiguous().view(torch.uint8)
        w1b = w1.contiguous().view(torch.uint8)
        w2b = w2.contiguous().view(torch.uint8)
        ids = topk_ids.contiguous().view(-1)
        topk_w = topk_weights.contiguous()
        a_scale = a_scale.contiguous()
        fc1_scale = fc1_scale.contiguous()
        fc2_scale = fc2_scale.contiguous()

        # align (the sorted slots, in blocks of bm rows of one expert)
        max_len = n + min(n, E) * (bm - 1)
        num_pid_m = triton.cdiv(max_len, bm)
        sorted_ids = torch.empty((max_len,), dtype=torch.int32, device=dev)
        expert_ids = torch.empty((num_pid_m,), dtype=torch.int32, device=dev)
        post_pad = torch.empty((1,), dtype=torch.int32, device=dev)
        block_e = triton.next_power_of_2(E)
        chunk = (1024 if n >= 32768 else 512) if on_gpu else 16
        chunk = max(16, min(chunk, triton.next_power_of_2(n)))
        num_chunks = triton.cdiv(n, chunk)
        fused = num_chunks <= 4
        counts = torch.empty((1 if fused else num_chunks, block_e), dtype=torch.int32,
                             device=dev)
        if not fused:
            _count_kernel[(num_chunks,)](ids, counts, n, E, CHUNK=chunk, BLOCK_E=block_e,
                                         num_warps=4)
        eb = min(16, block_e)
        n_pad_progs = triton.cdiv(E, eb)
        bb = 64 if on_gpu else 16
        rows = max(1, min(triton.next_power_of_2(num_chunks), 4096 // block_e))
        _align_kernel[(num_chunks + n_pad_progs + triton.cdiv(num_pid_m, bb),)](
            ids, counts, sorted_ids, expert_ids, post_pad, n, E, bm, num_chunks, n_pad_progs,
            FUSED=fused, CHUNK=chunk, BLOCK_E=block_e, ROWS=rows, EB=eb,
            BLOCK_PAD=triton.next_power_of_2(bm), BB=bb, num_warps=4)

        act = torch.empty((n, inter), dtype=torch.float16, device=dev)
        gu_n, dn_n = cfg["GU_N"], cfg["DN_N"]
        _gate_up_kernel[(num_pid_m * triton.cdiv(inter, gu_n),)](
            x, w1b, a_scale, fc1_scale, act, sorted_ids, expert_ids, post_pad, n, inter, D,
            num_pid_m, blk_n, blk_k, D // blk_k, (2 * inter) // blk_n,
            TOPK=k, BLOCK_M=bm, BLOCK_N=gu_n, BLOCK_K=gu_k, GROUP_M=group_m, WIDEN=not on_gpu,
            num_warps=cfg["GU_WARPS"], num_stages=cfg["STAGES"])
        acc = torch.zeros((B, D), dtype=torch.float32, device=dev)
        _down_kernel[(num_pid_m * triton.cdiv(D, dn_n),)](
            act, w2b, fc2_scale, acc, topk_w, sorted_ids, expert_ids, post_pad, n, D, inter,
            num_pid_m, blk_n, blk_k, inter // blk_n, D // blk_k,
            TOPK=k, BLOCK_M=bm, BLOCK_N=dn_n, BLOCK_K=dn_k, GROUP_M=group_m, WIDEN=not on_gpu,
            num_warps=cfg["DN_WARPS"], num_stages=cfg["STAGES"])
        block = 1024
        _to_fnuz_kernel[(triton.cdiv(B * D, block),)](acc, out.view(torch.uint8), B * D,
                                                      BLOCK=block, num_warps=4)
        return out
