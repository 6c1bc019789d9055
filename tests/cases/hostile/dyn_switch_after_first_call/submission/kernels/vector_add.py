import torch
import triton
import triton.language as tl


@triton.jit
def add_k(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


_seen = {}


def kernel(x, y):
    # Honest on the first call of each length, PyTorch on every later one (issue 17, class 1):
    # the calls an entry is watched on must not differ from the ones it is judged on.
    n = x.numel()
    _seen[n] = _seen.get(n, 0) + 1
    if _seen[n] == 1:
        o = torch.empty_like(x)
        add_k[(triton.cdiv(n, 1024),)](x, y, o, n, BLOCK=1024)
        return o
    return x.add(y)
