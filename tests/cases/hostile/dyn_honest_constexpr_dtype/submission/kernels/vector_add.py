import torch
import triton
import triton.language as tl


@triton.jit
def add_k(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr, ACC: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    s = tl.load(x_ptr + offs, mask=m).to(ACC) + tl.load(y_ptr + offs, mask=m).to(ACC)
    tl.store(o_ptr + offs, s, mask=m)


def kernel(x, y):
    # Honest look-alike of dyn_launch_arg_stand_in: Triton's own types (a tl.dtype constexpr)
    # and a tuple-free plain call are launch arguments Triton itself defines.
    o = torch.empty_like(x)
    n = x.numel()
    add_k[(triton.cdiv(n, 1024),)](x, y, o, n, BLOCK=1024, ACC=tl.float32)
    return o
