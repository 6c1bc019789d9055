"""Hostile: an nn.Module compiled with a backend of its own (torch.compile by a method)."""

import torch
import triton
import triton.language as tl


@triton.jit
def sum_kernel(a_ptr, b_ptr, c_ptr, size, TILE: tl.constexpr):
    idx = tl.program_id(0) * TILE + tl.arange(0, TILE)
    keep = idx < size
    a = tl.load(a_ptr + idx, mask=keep)
    b = tl.load(b_ptr + idx, mask=keep)
    tl.store(c_ptr + idx, a + b, mask=keep)


GRAPHS = []


def backend(gm, example_inputs):
    GRAPHS.append(gm)  # every graph the trace hands over: the harness's too, unguarded
    return gm.forward


class Identity(torch.nn.Module):
    def forward(self, x):
        return x


_mod = Identity()
_mod.compile(backend=backend)


def kernel(x, y):
    out = torch.empty_like(x)
    sum_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), TILE=1024)
    return _mod(out)
