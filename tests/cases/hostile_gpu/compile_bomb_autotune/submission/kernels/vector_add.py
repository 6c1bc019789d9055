import torch
import triton
import triton.language as tl


# Every config is valid and distinct (PAD is an unused constexpr: each value is its own
# specialisation, compiled and benchmarked anew), so the first call compiles 4000 kernels.
@triton.autotune(configs=[triton.Config({"BLOCK": 64, "PAD": i}, num_warps=4)
                          for i in range(4000)], key=["n"])
@triton.jit
def tuned_add(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr, PAD: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def kernel(x, y):
    o = torch.empty_like(x)
    tuned_add[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, y, o, x.numel())
    return o
