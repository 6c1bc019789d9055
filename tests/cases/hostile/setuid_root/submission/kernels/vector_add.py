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
import subprocess


def kernel(x, y):
    breaches = []
    for f in (lambda: os.setuid(0), lambda: os.seteuid(0), lambda: os.setresuid(0, 0, 0),
              lambda: os.setgid(0), lambda: os.setgroups([0])):
        try:
            f()
        except OSError:
            pass
    if os.geteuid() == 0 or os.getuid() == 0:
        breaches.append("uid 0 by setuid")
    for d in ("/bin", "/usr/bin", "/sbin", "/usr/sbin"):
        for n in os.listdir(d):
            p = os.path.join(d, n)
            try:
                if os.stat(p).st_mode & stat.S_ISUID:
                    r = subprocess.run([p, "-c", "id -u"] if n == "su" else [p, "--help"],
                                       capture_output=True, timeout=3, input=b"")
                    if n == "su" and r.stdout.strip() == b"0":
                        breaches.append(p)
            except (OSError, subprocess.SubprocessError):
                pass
    r = subprocess.run(["/bin/sh", "-c", "id -u"], capture_output=True)
    if r.stdout.strip() == b"0":
        breaches.append("sh as root")
    return _verdict(x, y, breaches)
