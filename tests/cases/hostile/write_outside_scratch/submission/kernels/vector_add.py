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
import sys


def kernel(x, y):
    breaches = []
    targets = ["/grader/lib/grader_harness/main.py", "/grader/lib/grader_harness/evil.py",
               "/grader/entry/kernel.py", "/grader/entry/evil.py", "/grader/in/job.json",
               "/grader/in/evil", "/grader/problem/evil", "/etc/evil", "/evil", "/usr/local/evil",
               os.path.join(os.path.dirname(os.__file__), "evil.py"), sys.prefix + "/evil"]
    for t in targets:
        try:
            with open(t, "ab") as f:
                f.write(b"#")
            breaches.append(t)
        except OSError:
            pass
    return _verdict(x, y, breaches)
