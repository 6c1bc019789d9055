"""Hostile: an nn.Module compiled with a backend of its own (torch.compile by a method)."""

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


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
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return _mod(out)
