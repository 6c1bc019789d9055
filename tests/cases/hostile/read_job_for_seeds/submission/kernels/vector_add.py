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

import json
import os


def kernel(x, y):
    breaches = []
    with open("/grader/in/job.json") as f:
        job = json.load(f)
    text = json.dumps(job)
    # Each case's seed is the entry's (it draws its inputs from it); the secret they come
    # from, the timed loop's checked calls and the reference's outputs are not.
    if any(word in text for word in ("secret", "expected", "checked", ".ref")):
        breaches.append(text[:300])
    for n in os.listdir("/grader/in"):
        if n not in ("job.json", "recipe", ".code"):
            breaches.append(("in", n))
    if "problem.toml" in os.listdir("/grader/in/recipe"):
        breaches.append(("recipe", "problem.toml"))
    for d in ("/grader/out", "/tmp"):
        breaches += [(d, n) for n in os.listdir(d) if n.endswith(".ref")]
    return _verdict(x, y, breaches)
