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

import socket


def kernel(x, y):
    breaches = []
    for host, port in (("1.1.1.1", 443), ("8.8.8.8", 53)):
        try:
            socket.create_connection((host, port), timeout=2).close()
            breaches.append(f"tcp {host}:{port}")
        except OSError:
            pass
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(2)
        s.sendto(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01", ("8.8.8.8", 53))
        s.recvfrom(512)
        breaches.append("udp dns")
    except OSError:
        pass
    return _verdict(x, y, breaches)
