import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, out_ptr, hidden, x_stride, out_stride, eps,
                    BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < hidden
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / hidden + eps)
    tl.store(out_ptr + row * out_stride + cols, (x * rstd * w).to(tl.bfloat16), mask=mask)


def kernel(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    hidden = x.shape[-1]
    x2 = x.view(-1, hidden)
    rows = x2.size(0)
    out = torch.empty((rows, hidden), dtype=x.dtype, device=x.device)
    block = max(triton.next_power_of_2(hidden), 16)
    num_warps = 8 if block >= 4096 else 4
    _rmsnorm_kernel[(rows,)](x2, w, out, hidden, x2.stride(0), out.stride(0), float(eps),
                             BLOCK=block, num_warps=num_warps)
    return out.view_as(x)
