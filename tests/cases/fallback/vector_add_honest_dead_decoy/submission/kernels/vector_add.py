import torch
import triton
import triton.language as tl


@triton.jit
def _add_kernel_v1(x_ptr, y_ptr, out_ptr, n):
    i = tl.program_id(0)
    tl.store(out_ptr + i, tl.load(x_ptr + i) + tl.load(y_ptr + i))


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def kernel(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    _add_kernel[(triton.cdiv(n, 2048),)](x, y, out, n, BLOCK=2048)
    return out
