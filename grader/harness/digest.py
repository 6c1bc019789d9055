"""The digest of an output file: what the harness sends with its result for each `<case>.out`
and the host checks the file against (model/channel.py), so that a file rewritten after the
harness's last act is refused.

sha256 over the file's size and the sha256 of each CHUNK of it, the chunks hashed by THREADS
threads side by side (hashlib and os.pread let go of the interpreter while they work). A
sha256 of the whole file is one core's pass, about 1-2 GB/s: Atrex-Bench's block_scaled_mm
writes 11.5 GB of outputs a batch, hashed by the harness and again by the host, seconds each
on the batch's path. Finding another file with the same digest is finding a sha256 collision.

Standard library only: it runs next to entry code (the harness) and on the host.
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor

CHUNK = 64 << 20  # bytes of the file under one chunk's sha256
THREADS = 4
READ = 1 << 20  # bytes read at a time: a thread holds no more


def file_digest(path: str | os.PathLike[str], threads: int = THREADS) -> str:
    """The hex digest of the file at `path` (not followed where it is a symbolic link: OSError,
    as for a file that cannot be read)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        starts = range(0, size, CHUNK)
        if threads <= 1 or len(starts) <= 1:
            parts = [_chunk(fd, at, size) for at in starts]
        else:
            with ThreadPoolExecutor(min(threads, len(starts)),
                                    thread_name_prefix="digest") as pool:
                parts = list(pool.map(lambda at: _chunk(fd, at, size), starts))
    finally:
        os.close(fd)
    top = hashlib.sha256(f"chunked-sha256 {CHUNK} {size}\n".encode())
    for part in parts:
        top.update(part)
    return top.hexdigest()


def _chunk(fd: int, start: int, size: int) -> bytes:
    h = hashlib.sha256()
    end = min(size, start + CHUNK)
    at = start
    while at < end:
        block = os.pread(fd, min(READ, end - at), at)
        if not block:  # the file shrank while it was read: what was read is its digest
            break
        h.update(block)
        at += len(block)
    return h.digest()
