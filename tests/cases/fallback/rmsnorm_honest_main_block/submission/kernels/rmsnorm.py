import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, out_ptr, hidden, x_row_stride, out_row_stride, eps,
                    BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < hidden
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    mean_sq = tl.sum(x * x, axis=0) / hidden
    rstd = 1.0 / tl.sqrt(mean_sq + eps)
    tl.store(out_ptr + row * out_row_stride + cols, (x * rstd * w).to(tl.bfloat16), mask=mask)


def _triton_rmsnorm(x, w, eps):
    hidden = x.shape[-1]
    out = torch.empty_like(x)
    _rmsnorm_kernel[(x.shape[0],)](x, w, out, hidden, x.stride(0), out.stride(0), eps,
                                   BLOCK=triton.next_power_of_2(hidden))
    return out


def kernel(x, w, eps):
    return _triton_rmsnorm(x, w, eps)


if __name__ == "__main__":
    import torch.nn.functional as F

    xs = torch.randn(4, 256).to(torch.bfloat16)
    ws = torch.ones(256, dtype=torch.bfloat16)
    expected = F.rms_norm(xs.float(), (256,), ws.float(), 1e-5)
    print((kernel(xs, ws, 1e-5).float() - expected).abs().max())
