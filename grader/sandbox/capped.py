"""Size-capped host directories for what leaves a container.

A host folder bound into a container has no size limit of its own; a tmpfs mounted on the host
does (seen 2026-11-29: a 20 MB write into an 8 MB tmpfs stopped at 8 MB). Mounting needs root;
without it the directory is plain and the cap is checked only after the run (doctor says so).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from grader.errors import InfraError
from grader.sandbox.runs import run_folder


def can_mount() -> bool:
    return os.geteuid() == 0 and shutil.which("mount") is not None


@contextmanager
def capped_dir(size_bytes: int, *, owner: int = 65534,
               prefix: str = "grader-out-") -> Iterator[Path]:
    """A fresh directory writable by `owner`, capped at `size_bytes` when we can mount; in
    the run's own folder (sandbox/runs.py), so that a grader that dies leaves nothing the next
    start cannot find."""
    path = run_folder(prefix)
    mounted = False
    try:
        if can_mount():
            opts = f"size={max(size_bytes, 4096)},mode=0700,uid={owner},gid={owner},nosuid,nodev"
            res = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)],
                                 capture_output=True, text=True, check=False)
            if res.returncode != 0:
                raise InfraError(f"cannot mount a tmpfs at {path}: {res.stderr.strip()}")
            mounted = True
        else:
            os.chmod(path, 0o777)
        yield path
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)
        shutil.rmtree(path, ignore_errors=True)


@contextmanager
def private_dir(size_bytes: int, *, prefix: str = "grader-in-") -> Iterator[Path]:
    """A fresh directory of the host's, readable by a container's user and writable by no
    one but root: a tmpfs of its own when we can mount. Bound into a container, its fill
    level (statvfs) is that of what the host put there and nothing else, and
    /proc/self/mountinfo names no host folder for it, only the tmpfs (issue 19). Without
    root it is a plain folder: the container sees the host path and filesystem (doctor
    reports the missing caps)."""
    path = run_folder(prefix)
    mounted = False
    try:
        os.chmod(path, 0o755)
        if can_mount():
            _mount(path, f"size={_pages(size_bytes)},mode=0755,uid=0,gid=0,nosuid,nodev")
            mounted = True
        yield path
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)
        shutil.rmtree(path, ignore_errors=True)


def resize(path: Path, size_bytes: int) -> None:
    """Set the size of the tmpfs mounted at `path` (a folder of private_dir), so that what a
    container reads of its size says no more than what is in it. Nothing without a mount."""
    if can_mount() and os.path.ismount(path):
        _mount(path, f"remount,size={_pages(size_bytes)}")


def _pages(size_bytes: int) -> int:
    return max(size_bytes + 4095 & ~4095, 4096)


def _mount(path: Path, opts: str) -> None:
    args = ["mount", "-o", opts, str(path)] if opts.startswith("remount") else \
        ["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)]
    res = subprocess.run(args, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise InfraError(f"cannot mount a tmpfs at {path}: {res.stderr.strip()}")
