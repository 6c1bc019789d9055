import torch
import triton
import triton.language as tl


@triton.jit
def add_k(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def kernel(x, y):
    # Honest look-alike of the switching entries: the same work in two launches (two halves),
    # the same way on every call.
    o = torch.empty_like(x)
    n = x.numel()
    h = n // 2
    add_k[(triton.cdiv(h, 1024),)](x, y, o, h, BLOCK=1024)
    add_k[(triton.cdiv(n - h, 1024),)](x[h:], y[h:], o[h:], n - h, BLOCK=1024)
    return o
