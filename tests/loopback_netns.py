"""A network namespace that holds only a loopback interface, for the tests that start Ray
nodes: Ray turns `--node-ip-address 127.0.0.1` into the machine's own address and its GCS
listens on every interface, so the only way to keep a cluster on loopback is to give it no
other interface. Entered with `nsenter --net` (not `ip netns exec`, which remounts /sys), so
that the grader's mounts stay visible to the Docker engine; the engine is reached through its
Unix socket, which no network namespace hides.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager


def missing() -> str | None:
    """Why a loopback-only namespace cannot be made here, or None."""
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("nsenter"):
        return "needs root, `ip` and `nsenter` for a loopback-only network namespace"
    return None


@contextmanager
def loopback_namespace() -> Iterator[tuple[str, ...]]:
    """A fresh namespace with `lo` up; yields the command prefix that runs a command in it.
    The namespace is deleted on exit."""
    ns = f"grader-ray-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        prefix = ("nsenter", f"--net=/var/run/netns/{ns}")
        subprocess.run([*prefix, "ip", "link", "set", "lo", "up"], check=True)
        yield prefix
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)


def only_loopback(addresses: set[str]) -> bool:
    """Every listening address is a loopback one (and there is at least one)."""
    loop = {"127.0.0.1", "::ffff:127.0.0.1", "::1"}
    return bool(addresses) and addresses <= loop
