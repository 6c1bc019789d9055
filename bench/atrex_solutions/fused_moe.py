"""Atrex-Bench fused_moe in Triton: a counting sort of the T*k routed slots by expert
into blocks of BLOCK_M rows of one expert (4 small launches, no atomics), then two grouped GEMMs.
Gate/up: bf16 tl.dot with fp32 accumulators (exact products, as the reference's fp32 copies),
silu(gate) * up in fp32, kept as a bf16 hi + lo pair (about 16 bits); down: two bf16 dots (hi,
lo) into fp32, times the routing weight, atomically added into the fp32 output (zeroed).
Off the GPU (Triton's CPU interpreter multiplies bf16 as raw bit patterns) tiles are widened."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

# -- align: sorted slot ids, each expert's segment padded to whole blocks ------------------------


@triton.jit
def _count_kernel(ids_ptr, counts_ptr, n, E, CHUNK: tl.constexpr, BLOCK_E: tl.constexpr):
    c = tl.program_id(0)
    idx = c * CHUNK + tl.arange(0, CHUNK)
    valid = idx < n
    ids = tl.load(ids_ptr + idx, mask=valid, other=0)
    valid = valid & (ids >= 0) & (ids < E)  # ids outside [0, E) select no expert (reference)
    hist = tl.histogram(tl.where(valid, ids, 0), BLOCK_E, mask=valid)
    e = tl.arange(0, BLOCK_E)
    tl.store(counts_ptr + c * E + e, hist, mask=e < E)


@triton.jit
def _offsets_kernel(counts_ptr, start_ptr, total_count_ptr, post_padded_ptr,
                    num_chunks, E, block_size, ROWS: tl.constexpr, BLOCK_E: tl.constexpr):
    """Per (chunk, expert): ids of that expert in earlier chunks minus ids of smaller experts in
    the chunk; per expert: its count and where its padded segment starts."""
    e = tl.arange(0, BLOCK_E)
    rows = tl.arange(0, ROWS)
    emask = e < E
    carry = tl.zeros((BLOCK_E,), dtype=tl.int32)
    for r0 in range(0, num_chunks, ROWS):
        r = r0 + rows
        mask = (r[:, None] < num_chunks) & emask[None, :]
        ptrs = counts_ptr + r[:, None] * E + e[None, :]
        cnt = tl.load(ptrs, mask=mask, other=0)
        earlier_chunks = tl.cumsum(cnt, axis=0) - cnt + carry[None, :]
        smaller_experts = tl.cumsum(cnt, axis=1) - cnt
        tl.store(ptrs, earlier_chunks - smaller_experts, mask=mask)
        carry += tl.sum(cnt, axis=0)
    padded = (carry + block_size - 1) // block_size * block_size
    ends = tl.cumsum(padded, axis=0)
    tl.store(start_ptr + e, ends - padded, mask=emask)
    tl.store(total_count_ptr + e, carry, mask=emask)
    tl.store(post_padded_ptr, tl.sum(padded, axis=0))


@triton.jit
def _scatter_kernel(ids_ptr, offsets_ptr, start_ptr, sorted_ptr, n, E,
                    CHUNK: tl.constexpr, BLOCK_E: tl.constexpr):
    c = tl.program_id(0)
    local = tl.arange(0, CHUNK)
    idx = c * CHUNK + local
    valid = idx < n
    ids = tl.load(ids_ptr + idx, mask=valid, other=BLOCK_E)
    ids = tl.where((ids >= 0) & (ids < E), ids, BLOCK_E)  # invalid ids sort last, unused
    keys = tl.sort(ids * CHUNK + local)
    e = keys // CHUNK
    live = e < E
    base = (tl.load(start_ptr + e, mask=live, other=0)
            + tl.load(offsets_ptr + c * E + e, mask=live, other=0))
    tl.store(sorted_ptr + base + local, c * CHUNK + keys % CHUNK, mask=live)


@triton.jit
def _pad_kernel(start_ptr, total_count_ptr, post_padded_ptr, sorted_ptr, expert_ids_ptr,
                E, block_size, max_len, n_blocks, sentinel,
                BLOCK_PAD: tl.constexpr, BLOCK_BLOCKS: tl.constexpr, BLOCK_TAIL: tl.constexpr):
    pid = tl.program_id(0)
    if pid < E:
        start = tl.load(start_ptr + pid)
        count = tl.load(total_count_ptr + pid)
        padded = (count + block_size - 1) // block_size * block_size
        p = tl.arange(0, BLOCK_PAD)
        tl.store(sorted_ptr + start + count + p, sentinel, mask=count + p < padded)
        first_block = start // block_size
        nb = padded // block_size
        b = tl.arange(0, BLOCK_BLOCKS)
        for b0 in range(0, nb, BLOCK_BLOCKS):
            tl.store(expert_ids_ptr + first_block + b0 + b, pid, mask=b0 + b < nb)
    else:
        total = tl.load(post_padded_ptr)
        j = (pid - E) * BLOCK_TAIL + tl.arange(0, BLOCK_TAIL)
        pos = total + j
        tl.store(sorted_ptr + pos, sentinel, mask=pos < max_len)
        blk = total // block_size + j
        tl.store(expert_ids_ptr + blk, -1, mask=blk < n_blocks)


def _align(topk_ids: torch.Tensor, E: int, block_size: int
           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    n = topk_ids.numel()
    dev = topk_ids.device
    max_len = n + E * (block_size - 1)
    n_blocks = triton.cdiv(max_len, block_size)
    sorted_ids = torch.empty((max_len,), dtype=torch.int32, device=dev)
    expert_ids = torch.empty((n_blocks,), dtype=torch.int32, device=dev)
    post_padded = torch.empty((1,), dtype=torch.int32, device=dev)
    chunk = 512 if topk_ids.is_cuda else 4
    num_chunks = max(1, triton.cdiv(n, chunk))
    block_e = triton.next_power_of_2(E)
    offsets = torch.empty((num_chunks, E), dtype=torch.int32, device=dev)
    start = torch.empty((E,), dtype=torch.int32, device=dev)
    total_count = torch.empty((E,), dtype=torch.int32, device=dev)
    _count_kernel[(num_chunks,)](topk_ids, offsets, n, E, CHUNK=chunk, BLOCK_E=block_e,
                                 num_warps=4)
    rows = max(1, min(triton.next_power_of_2(num_chunks), 4096 // block_e))
    _offsets_kernel[(1,)](offsets, start, total_count, post_padded, num_chunks, E, block_size,
                          ROWS=rows, BLOCK_E=block_e, num_warps=8 if block_e >= 128 else 4)
    _scatter_kernel[(num_chunks,)](topk_ids, offsets, start, sorted_ids, n, E,
                                   CHUNK=chunk, BLOCK_E=block_e, num_warps=4)
    block_tail = 1024 if topk_ids.is_cuda else 16
    tail_programs = max(1, triton.cdiv(E * (block_size - 1) + 1, block_tail))
    _pad_kernel[(E + tail_programs,)](start, total_count, post_padded, sorted_ids, expert_ids,
                                      E, block_size, max_len, n_blocks, n,
                                      BLOCK_PAD=triton.next_power_of_2(block_size),
                                      BLOCK_BLOCKS=256 if topk_ids.is_cuda else 4,
                                      BLOCK_TAIL=block_tail, num_warps=4)
    return sorted_ids, expert_ids, post_padded


# -- the two grouped GEMMs ---------------------------------------------------------------------


@triton.jit
def _block_coords(num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of this program, GROUP_M row blocks at a time (weights reused in L2)."""
    pid = tl.program_id(0)
    in_group = GROUP_M * num_pid_n
    first_m = (pid // in_group) * GROUP_M
    group_m = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % group_m
    pid_n = (pid % in_group) // group_m
    return pid_m, pid_n


@triton.jit
def _gate_up_silu_kernel(x_ptr, w1_ptr, hi_ptr, lo_ptr, sorted_ptr, expert_ids_ptr,
                         post_padded_ptr, n, inter, H, num_pid_m,
                         stride_xt, stride_we, stride_wn, stride_act,
                         TOPK: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, WIDEN: tl.constexpr):
    pid_m, pid_n = _block_coords(num_pid_m, tl.cdiv(inter, BLOCK_N), GROUP_M)
    if pid_m * BLOCK_M >= tl.load(post_padded_ptr):
        return
    slot = tl.load(sorted_ptr + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
    valid = slot < n  # padding rows hold the sentinel n
    tok = (slot // TOPK).to(tl.int64)
    e = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    n_ok = rn < inter
    a_ptrs = x_ptr + tok[:, None] * stride_xt + rk[None, :]
    # [BLOCK_K, BLOCK_N] tiles of w1[e, rn, :].T (gate) and w1[e, inter + rn, :].T (up).
    g_ptrs = w1_ptr + e * stride_we + rn[None, :].to(tl.int64) * stride_wn + rk[:, None]
    u_ptrs = g_ptrs + inter * stride_wn
    acc_g = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc_u = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, H, BLOCK_K):
        k_ok = k0 + rk < H
        a = tl.load(a_ptrs, mask=valid[:, None] & k_ok[None, :], other=0.0)
        g = tl.load(g_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        u = tl.load(u_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        if WIDEN:
            a = a.to(tl.float32)
            g = g.to(tl.float32)
            u = u.to(tl.float32)
        acc_g = tl.dot(a, g, acc_g)
        acc_u = tl.dot(a, u, acc_u)
        a_ptrs += BLOCK_K
        g_ptrs += BLOCK_K
        u_ptrs += BLOCK_K
    act = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u  # silu(gate) * up, fp32
    hi = act.to(tl.bfloat16)
    lo = (act - hi.to(tl.float32)).to(tl.bfloat16)
    offs = slot[:, None].to(tl.int64) * stride_act + rn[None, :]
    mask = valid[:, None] & n_ok[None, :]
    tl.store(hi_ptr + offs, hi, mask=mask)
    tl.store(lo_ptr + offs, lo, mask=mask)


@triton.jit
def _down_kernel(hi_ptr, lo_ptr, w2_ptr, out_ptr, topk_w_ptr, sorted_ptr, expert_ids_ptr,
                 post_padded_ptr, n, H, inter, num_pid_m,
                 stride_act, stride_we, stride_wn, stride_out,
                 TOPK: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, WIDEN: tl.constexpr):
    pid_m, pid_n = _block_coords(num_pid_m, tl.cdiv(H, BLOCK_N), GROUP_M)
    if pid_m * BLOCK_M >= tl.load(post_padded_ptr):
        return
    slot = tl.load(sorted_ptr + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
    valid = slot < n
    slot64 = slot.to(tl.int64)
    e = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    n_ok = rn < H
    a_offs = slot64[:, None] * stride_act + rk[None, :]
    # [BLOCK_K, BLOCK_N] tile of w2[e].T: element (k, h) is w2[e, h, k].
    b_ptrs = w2_ptr + e * stride_we + rn[None, :].to(tl.int64) * stride_wn + rk[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, inter, BLOCK_K):
        k_ok = k0 + rk < inter
        a_mask = valid[:, None] & k_ok[None, :]
        a_hi = tl.load(hi_ptr + a_offs, mask=a_mask, other=0.0)
        a_lo = tl.load(lo_ptr + a_offs, mask=a_mask, other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        if WIDEN:
            a_hi = a_hi.to(tl.float32)
            a_lo = a_lo.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a_hi, b, acc)
        acc = tl.dot(a_lo, b, acc)
        a_offs += BLOCK_K
        b_ptrs += BLOCK_K
    weight = tl.load(topk_w_ptr + slot, mask=valid, other=0.0)
    tok = slot64 // TOPK
    out_ptrs = out_ptr + tok[:, None] * stride_out + rn[None, :]
    tl.atomic_add(out_ptrs, acc * weight[:, None], mask=valid[:, None] & n_ok[None, :],
                  sem="relaxed")


def _config(n: int, E: int, on_gpu: bool) -> dict[str, int]:
    """Fixed tiles by the mean number of slots per expert; no autotuning. BLOCK_N is the
    gate/up GEMM's width per half; the down GEMM's tiles are twice as wide."""
    if not on_gpu:  # small tiles keep Triton's CPU interpreter fast
        return {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 2, "num_warps": 4,
                "num_stages": 1}
    per_expert = n / min(E, n)
    if per_expert <= 16:  # decode: a block or two of rows per expert; stream the weights
        return {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 128, "GROUP_M": 1, "num_warps": 4,
                "num_stages": 4}
    if per_expert <= 64:
        return {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 4,
                "num_stages": 4}
    return {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8,
            "num_stages": 3}


class Model(torch.nn.Module):
    def __init__(self, num_experts: int, intermediate_size: int, top_k: int) -> None:
        super().__init__()
        self.num_experts = num_experts
        self.intermediate_size = intermediate_size
        self.top_k = top_k

    def forward(self, hidden_states: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor,
                topk_weights: torch.Tensor, topk_ids: torch.Tensor) -> torch.Tensor:
        x = hidden_states.contiguous()
        w1 = w1.contiguous()
        w2 = w2.contiguous()
        topk_weights = topk_weights.contiguous()
        topk_ids = topk_ids.contiguous()
        T, H = x.shape
        E = self.num_experts
        inter = self.intermediate_size
        k = topk_ids.shape[1]
        n = T * k
        dev = x.device
        out = torch.zeros((T, H), dtype=torch.float32, device=dev)
        if n == 0:
            return out
        cfg = _config(n, E, x.is_cuda)
        bm, bn, bk, group_m = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"], cfg["GROUP_M"]
        launch = {"num_warps": cfg["num_warps"], "num_stages": cfg["num_stages"]}
        sorted_ids, expert_ids, post_padded = _align(topk_ids, E, bm)
        num_pid_m = expert_ids.numel()  # the largest possible number of blocks of rows
        act_hi = torch.empty((n, inter), dtype=torch.bfloat16, device=dev)
        act_lo = torch.empty((n, inter), dtype=torch.bfloat16, device=dev)
        _gate_up_silu_kernel[(num_pid_m * triton.cdiv(inter, bn),)](
            x, w1, act_hi, act_lo, sorted_ids, expert_ids, post_padded, n, inter, H, num_pid_m,
            x.stride(0), w1.stride(0), w1.stride(1), act_hi.stride(0),
            TOPK=k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group_m, WIDEN=not x.is_cuda,
            **launch)
        _down_kernel[(num_pid_m * triton.cdiv(H, 2 * bn),)](
            act_hi, act_lo, w2, out, topk_weights, sorted_ids, expert_ids, post_padded, n, H,
            inter, num_pid_m, act_hi.stride(0), w2.stride(0), w2.stride(1), out.stride(0),
            TOPK=k, BLOCK_M=bm, BLOCK_N=2 * bn, BLOCK_K=bk, GROUP_M=group_m,
            WIDEN=not x.is_cuda, **launch)
        return out
