import torch
import triton
import triton.language as tl

@triton.jit
def add_k(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def _add(x, y):
    o = torch.empty_like(x)
    add_k[(triton.cdiv(x.numel(), 1024),)](x, y, o, x.numel(), BLOCK=1024)
    return o

def _verdict(x, y, breaches):
    # A breach turns the answer into zeros (-> incorrect): the verdict shows the sandbox failed.
    if breaches:
        print("BREACH:", breaches, flush=True)
        return torch.zeros_like(x)
    return _add(x, y)

import ctypes
import os


def kernel(x, y):
    breaches = []
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x10000000) == 0:
        breaches.append("unshare user ns")
    if libc.unshare(0x00020000) == 0:
        breaches.append("unshare mount ns")
    if libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0, None) == 0:
        breaches.append("mount")
    try:
        os.chroot("/tmp")
        breaches.append("chroot")
    except OSError:
        pass
    if libc.syscall(175, None, 0, b"") == 0:  # init_module
        breaches.append("init_module")
    return _verdict(x, y, breaches)
