"""fused_moe in Triton, in the shape of vLLM's fused_moe: align, two grouped GEMMs, a sum.

1. align (4 small kernels, as in moe_align_sort.py): the T*k routed slots sorted by expert,
   each expert's segment padded to whole blocks of BLOCK_M rows, so that every block of
   sorted_token_ids belongs to one expert (expert_ids) and num_tokens_post_padded bounds them.
2. gate/up GEMM with the activation fused: one program per (block of BLOCK_M slots of one
   expert, block of BLOCK_N intermediate columns) gathers its tokens' rows of x and multiplies
   them by the gate and the up rows of w1[e] with tl.dot (two fp32 accumulators); the
   epilogue computes silu(gate) * up in fp32 and stores it as bf16, by slot.
3. down GEMM: the same grouping over w2[e]; the epilogue multiplies each row by its routing
   weight and stores the fp32 result, by slot (fp32: the k-way sum must not see bf16 terms).
4. sum: out[t] = the sum of its k slots' rows, in fp32, rounded once to bf16.

Blocks past num_tokens_post_padded (the grid covers the largest possible count) return at
once. The grid is ordered in groups of GROUP_M blocks of rows, as in vLLM, so that blocks that
share weight columns run close together in time and find them in L2.

Under Triton's CPU interpreter (TRITON_INTERPRET=1) `tl.dot` on bf16 operands multiplies their
raw bit patterns, so off the GPU the tiles are widened to fp32 first (exact for bf16 values);
and its fp32 -> bf16 conversion truncates (rounds toward zero) where a GPU rounds to nearest
even, which biases every activation the same way and moved an output by two bf16 steps: off
the GPU the activation is rounded to nearest even by hand first.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

# -- 1. align: sorted_token_ids, expert_ids, num_tokens_post_padded (see moe_align_sort.py) --


@triton.jit
def _count_kernel(ids_ptr, counts_ptr, n, E, CHUNK: tl.constexpr, BLOCK_E: tl.constexpr):
    c = tl.program_id(0)
    idx = c * CHUNK + tl.arange(0, CHUNK)
    valid = idx < n
    ids = tl.load(ids_ptr + idx, mask=valid, other=0)
    hist = tl.histogram(ids, BLOCK_E, mask=valid)
    e = tl.arange(0, BLOCK_E)
    tl.store(counts_ptr + c * E + e, hist, mask=e < E)


@triton.jit
def _offsets_kernel(counts_ptr, start_ptr, total_count_ptr, post_padded_ptr,
                    num_chunks, E, block_size, ROWS: tl.constexpr, BLOCK_E: tl.constexpr):
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


# -- 2-4. the grouped GEMMs and the sum over k ------------------------------------------------


@triton.jit
def _block_coords(num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of this program, GROUP_M row blocks at a time (vLLM's ordering)."""
    pid = tl.program_id(0)
    in_group = GROUP_M * num_pid_n
    first_m = (pid // in_group) * GROUP_M
    group_m = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % group_m
    pid_n = (pid % in_group) // group_m
    return pid_m, pid_n


@triton.jit
def _gate_up_silu_kernel(x_ptr, w1_ptr, act_ptr, sorted_ptr, expert_ids_ptr, post_padded_ptr,
                         n, inter, H, num_pid_m,
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
    act = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u
    if WIDEN:
        act = _round_to_bf16(act)
    out_ptrs = act_ptr + slot[:, None].to(tl.int64) * stride_act + rn[None, :]
    tl.store(out_ptrs, act.to(tl.bfloat16), mask=valid[:, None] & n_ok[None, :])


@triton.jit
def _round_to_bf16(x):
    """x (fp32) rounded to the nearest bf16 value, ties to even, still as fp32: its conversion
    to bf16 is then exact, even where that conversion truncates (the CPU interpreter)."""
    bits = x.to(tl.uint32, bitcast=True)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _down_kernel(act_ptr, w2_ptr, y_ptr, topk_w_ptr, sorted_ptr, expert_ids_ptr,
                 post_padded_ptr, n, H, inter, num_pid_m,
                 stride_act, stride_we, stride_wn, stride_y,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 GROUP_M: tl.constexpr, WIDEN: tl.constexpr):
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
    a_ptrs = act_ptr + slot64[:, None] * stride_act + rk[None, :]
    # [BLOCK_K, BLOCK_N] tile of w2[e].T: element (k, h) is w2[e, h, k].
    b_ptrs = w2_ptr + e * stride_we + rn[None, :].to(tl.int64) * stride_wn + rk[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, inter, BLOCK_K):
        k_ok = k0 + rk < inter
        a = tl.load(a_ptrs, mask=valid[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        if WIDEN:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K
    weight = tl.load(topk_w_ptr + slot, mask=valid, other=0.0)
    acc = acc * weight[:, None]
    out_ptrs = y_ptr + slot64[:, None] * stride_y + rn[None, :]
    tl.store(out_ptrs, acc, mask=valid[:, None] & n_ok[None, :])


@triton.jit
def _sum_topk_kernel(y_ptr, out_ptr, H, stride_y, stride_out,
                     TOPK: tl.constexpr, BLOCK: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < H
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for j in tl.static_range(TOPK):
        acc += tl.load(y_ptr + (t * TOPK + j) * stride_y + cols, mask=mask, other=0.0)
    tl.store(out_ptr + t * stride_out + cols, acc.to(tl.bfloat16), mask=mask)


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
    # Prefill. On the H200 (2026-11-29) this beat 64x64 tiles with 4 warps by 10-20% and
    # 128x128 by 2-4% on all three prefill shapes.
    return {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8,
            "num_stages": 3}


def kernel(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, topk_weights: torch.Tensor,
           topk_ids: torch.Tensor) -> torch.Tensor:
    T, H = x.shape
    E, two_i, _ = w1.shape
    inter = two_i // 2
    k = topk_ids.shape[1]
    n = T * k
    # Rows of x, w1 and w2 must be contiguous (they are, as make_inputs builds them).
    assert x.stride(1) == 1 and w1.stride(2) == 1 and w2.stride(2) == 1
    assert topk_ids.is_contiguous() and topk_weights.is_contiguous()
    cfg = _config(n, E, x.is_cuda)
    bm, bn, bk, group_m = cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"], cfg["GROUP_M"]
    launch = {"num_warps": cfg["num_warps"], "num_stages": cfg["num_stages"]}
    sorted_ids, expert_ids, post_padded = _align(topk_ids, E, bm)
    num_pid_m = expert_ids.numel()  # the largest possible number of blocks of rows
    act = torch.empty((n, inter), dtype=torch.bfloat16, device=x.device)
    _gate_up_silu_kernel[(num_pid_m * triton.cdiv(inter, bn),)](
        x, w1, act, sorted_ids, expert_ids, post_padded, n, inter, H, num_pid_m,
        x.stride(0), w1.stride(0), w1.stride(1), act.stride(0),
        TOPK=k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group_m, WIDEN=not x.is_cuda,
        **launch)
    y = torch.empty((n, H), dtype=torch.float32, device=x.device)
    _down_kernel[(num_pid_m * triton.cdiv(H, 2 * bn),)](
        act, w2, y, topk_weights, sorted_ids, expert_ids, post_padded, n, H, inter, num_pid_m,
        act.stride(0), w2.stride(0), w2.stride(1), y.stride(0),
        BLOCK_M=bm, BLOCK_N=2 * bn, BLOCK_K=bk, GROUP_M=group_m, WIDEN=not x.is_cuda,
        **launch)
    out = torch.empty((T, H), dtype=torch.bfloat16, device=x.device)
    block = min(1024, triton.next_power_of_2(H))
    _sum_topk_kernel[(T, triton.cdiv(H, block))](y, out, H, y.stride(0), out.stride(0),
                                                 TOPK=k, BLOCK=block, num_warps=4)
    return out
