import torch
import triton
import triton.language as tl

@triton.jit
def add_k(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def _add(x, y):
    o = torch.empty_like(x)
    add_k[(triton.cdiv(x.numel(), 1024),)](x, y, o, x.numel(), BLOCK=1024)
    return o

@triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=w % 8 + 1, num_stages=s)
                          for w in range(40) for s in range(100)], key=["n"])
@triton.jit
def tuned_add(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def kernel(x, y):
    o = torch.empty_like(x)
    tuned_add[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, o, x.numel())
    return o
