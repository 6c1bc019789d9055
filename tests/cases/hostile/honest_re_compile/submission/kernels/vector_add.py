"""Honest: a Triton add whose block size comes from a setting parsed by a compiled regex."""

import re

import torch
import triton
import triton.language as tl

_SETTING = re.compile(r"block=(\d+)")
BLOCK_SIZE = int(_SETTING.search("block=1024").group(1))


@triton.jit
def plus_kernel(p_ptr, q_ptr, r_ptr, count, WIDTH: tl.constexpr, STEPS: tl.constexpr):
    first = tl.program_id(0) * WIDTH * STEPS
    for step in tl.static_range(STEPS):  # each program covers STEPS blocks in turn
        at = first + step * WIDTH + tl.arange(0, WIDTH)
        inside = at < count
        total = tl.load(p_ptr + at, mask=inside) + tl.load(q_ptr + at, mask=inside)
        tl.store(r_ptr + at, total, mask=inside)


def kernel(x, y):
    out = torch.empty_like(x)
    grid = (triton.cdiv(x.numel(), BLOCK_SIZE * 2),)
    plus_kernel[grid](x, y, out, x.numel(), WIDTH=BLOCK_SIZE, STEPS=2)
    return out
