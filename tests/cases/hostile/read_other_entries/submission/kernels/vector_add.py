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


def kernel(x, y):
    breaches = [("entry", n) for n in os.listdir("/grader/entry") if n != "kernel.py"]
    for top in ("/grader", "/tmp", "/var", "/srv", "/opt", "/mnt", "/home", "/run"):
        for root, dirs, files in os.walk(top):
            for n in dirs + files:
                if "site-packages" in root or root.startswith("/usr/"):
                    continue
                if n in ("submission.toml", "kernels") or n.startswith(("grader-run-", "grader-out-", "grader-in-")):
                    breaches.append(os.path.join(root, n))
    return _verdict(x, y, breaches)
