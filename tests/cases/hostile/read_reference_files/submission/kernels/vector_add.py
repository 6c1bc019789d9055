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
    breaches = []
    try:
        breaches += [("problem dir", n) for n in os.listdir("/grader/problem")]
    except OSError:
        pass
    for root, dirs, files in os.walk("/"):
        if root == "/":
            dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev")]
        if "site-packages" in root or root.startswith("/usr/"):
            continue
        # The problem's public recipe is the entry's by design (it draws its inputs with it);
        # the hidden problem.toml, weights and suite files are never its.
        public = root.startswith("/grader/in/recipe")
        for n in files:
            if n in ("problem.toml", "weights.toml", "suite.toml") or (
                    n == "reference.py" and not public):
                breaches.append(os.path.join(root, n))
    needle = b"def " + b"make_inputs"  # built, so that this file does not match itself
    for root, dirs, files in os.walk("/grader"):
        if root.startswith(("/grader/entry", "/grader/in/recipe")):
            continue
        for n in files:
            try:
                with open(os.path.join(root, n), "rb") as f:
                    if needle in f.read():
                        breaches.append(("make_inputs in", os.path.join(root, n)))
            except OSError:
                pass
    return _verdict(x, y, breaches)
