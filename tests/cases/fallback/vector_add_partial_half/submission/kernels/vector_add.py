import torch
import triton
import triton.language as tl


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def kernel(x, y):
    n = x.numel()
    half = n // 2
    out = torch.empty_like(x)
    _add_kernel[(triton.cdiv(half, 1024),)](x, y, out, half, BLOCK=1024)
    out[half:] = x[half:] + y[half:]
    return out
