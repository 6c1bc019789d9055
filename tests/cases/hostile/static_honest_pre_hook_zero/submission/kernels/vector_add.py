import torch
import triton
import triton.language as tl


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


def _triton_add(x, y):
    out = torch.empty_like(x)
    _add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out


@triton.jit
def _zero(p, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(p + offs, tl.zeros([BLOCK], dtype=p.dtype.element_ty), mask=offs < n)


def _zero_out(nargs):
    out = nargs["out_ptr"]
    _zero[(triton.cdiv(out.numel(), 1024),)](out, out.numel(), BLOCK=1024)


@triton.autotune(configs=[triton.Config({"BLOCK": 1024}, pre_hook=_zero_out)], key=["n"])
@triton.jit
def _accumulate(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    s = tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask)
    tl.atomic_add(out_ptr + offs, s, mask=mask)


def kernel(x, y):
    out = torch.empty_like(x)
    _accumulate[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel())
    return out
