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
import socket


def kernel(x, y):
    breaches = []
    found = [p for p in ("/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock",
                         "/var/run/containerd/containerd.sock", "/run/podman/podman.sock") if os.path.exists(p)]
    for top in ("/run", "/var", "/tmp", "/grader", "/"):
        for root, dirs, files in os.walk(top):
            if root.startswith(("/proc", "/sys", "/usr", "/dev")):
                dirs[:] = []
                continue
            found += [os.path.join(root, f) for f in files if f.endswith(".sock")]
            if top == "/":
                dirs[:] = [d for d in dirs if d not in ("proc", "sys", "usr", "dev")]
    for p in found:
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(1)
            s.connect(p)
            s.sendall(b"GET /containers/json HTTP/1.0\r\n\r\n")
            breaches.append((p, s.recv(100)))
        except OSError:
            breaches.append(("exists", p))
    return _verdict(x, y, breaches)
