"""A network namespace that holds only a loopback interface, for the tests that start Ray
nodes: Ray turns `--node-ip-address 127.0.0.1` into the machine's own address and its GCS
listens on every interface, so the only way to keep a cluster on loopback is to give it no
other interface.

Made with the system calls themselves (unshare and setns through ctypes, `lo` brought up with
an ioctl), not `ip netns`/`nsenter`, which the GPU host lacks: a holder process creates the
namespace and waits; a command runs in it behind a prefix that joins the holder's namespace
and then execs the command. Only the network namespace changes: the grader's mounts stay
visible to the Docker engine, which is reached through its Unix socket (no network namespace
hides a path).
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

_SYSCALLS = """
import ctypes, os
CLONE_NEWNET = 0x40000000
libc = ctypes.CDLL(None, use_errno=True)
def check(rc):
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
"""

# Runs as the holder: a new network namespace, its `lo` up, then "ready" and a wait for stdin
# to close.
_HOLDER = _SYSCALLS + """
import fcntl, socket, struct, sys
check(libc.unshare(CLONE_NEWNET))
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
    got = fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack("16sH22x", b"lo", 0))
    flags = struct.unpack("16sH22x", got)[1]
    fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))
print("ready", flush=True)
sys.stdin.read()
"""

# The prefix: join the holder's network namespace (argv[1]: its pid), then exec argv[2:].
_ENTER = _SYSCALLS + """
import sys
fd = os.open(f"/proc/{sys.argv[1]}/ns/net", os.O_RDONLY)
check(libc.setns(fd, CLONE_NEWNET))
os.close(fd)
os.execvp(sys.argv[2], sys.argv[2:])
"""


def missing() -> str | None:
    """Why a loopback-only namespace cannot be made here, or None."""
    if sys.platform != "linux" or os.geteuid() != 0:
        return "needs root on Linux for a loopback-only network namespace"
    return None


@contextmanager
def loopback_namespace() -> Iterator[tuple[str, ...]]:
    """A fresh namespace with `lo` up; yields the command prefix that runs a command in it.
    The namespace goes when its holder and every process in it have exited."""
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError("no loopback-only namespace: "
                               + (holder.stderr.read() if holder.stderr else "")[-2000:])
        yield (sys.executable, "-c", _ENTER, str(holder.pid))
    finally:
        holder.communicate(timeout=30)  # closes its stdin: it exits


def listening(pid: int) -> set[str]:
    """The local addresses of every TCP socket listening in the network namespace of process
    `pid`, read from its /proc/PID/net/tcp{,6} (psutil reads the caller's namespace only)."""
    found = set()
    for name, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        try:
            lines = open(f"/proc/{pid}/net/{name}").read().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 4 or fields[3] != "0A":  # 0A: LISTEN
                continue
            hexaddr = fields[1].split(":")[0]
            # The kernel prints each 32-bit word of the address in host (little-endian) order.
            words = [int(hexaddr[i:i + 8], 16) for i in range(0, len(hexaddr), 8)]
            packed = struct.pack(f"<{len(words)}I", *words)
            found.add(socket.inet_ntop(family, packed))
    return found


def stop_nodes(nodes: list[subprocess.Popen[bytes]]) -> None:
    """Stop Ray nodes started with `ray start --block` (each in a session of its own), last
    first: SIGTERM, on which such a process stops its node's processes, then SIGKILL to its
    whole group after a minute."""
    for node in reversed(nodes):
        node.terminate()
    for node in nodes:
        try:
            node.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(node.pid, signal.SIGKILL)
            node.wait()


def only_loopback(addresses: set[str]) -> bool:
    """Every listening address is a loopback one (and there is at least one)."""
    loop = {"127.0.0.1", "::ffff:127.0.0.1", "::1"}
    return bool(addresses) and addresses <= loop
