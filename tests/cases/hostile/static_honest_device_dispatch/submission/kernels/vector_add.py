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

import importlib
import operator
from contextlib import contextmanager

import numpy as np

NP_DTYPES = {np.float32: tl.float32}


@contextmanager
def device_context(device):
    device = torch.device(device)
    backend = getattr(torch, device.type, None)
    if backend is not None and hasattr(backend, "device") and device.type != "cpu":
        with backend.device(device):
            yield
    else:
        yield


def compare_version(package, op, target):
    try:
        pkg = importlib.import_module(package)
    except ImportError:
        return False
    return op(tuple(int(p) for p in pkg.__version__.split(".")[:2]), target)


NEW_TRITON = compare_version("triton", operator.ge, (3, 0))


class _Add(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        with device_context(x.device):
            return _triton_add(x, y)

    @staticmethod
    def backward(ctx, grad):
        return grad.clone(), grad.sum() * 0 + grad


def kernel(x, y):
    return _Add.apply(x, y)
