"""How fast an output file's digest is made: the harness makes one for every output it sends
with its result, and the host checks every file against it (grader/harness/digest.py).

    python bench/digest_speed.py [--size-mib 2048] [--dir /dev/shm] [--threads 1 2 4 8]

Writes SIZE MiB of random bytes to a file in DIR (a tmpfs, as the entry's output folder is),
then prints GB/s for one sha256 of the whole file read in 1 MiB blocks (the digest before
2026-12-06) and for digest.file_digest with each number of threads, each the best of three,
and the seconds either takes for 11.5 GB (Atrex-Bench's block_scaled_mm: one batch's outputs,
digested once by the harness and once by the host).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from grader.harness.digest import file_digest  # noqa: E402

BATCH_GB = 11.5


def whole_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def best_of_three(fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mib", type=int, default=2048)
    ap.add_argument("--dir", type=Path, default=Path("/dev/shm"))
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4, 8])
    args = ap.parse_args(argv)
    size = args.size_mib << 20
    print(f"{os.cpu_count()} cores; a file of {size / 1e9:.2f} GB in {args.dir}")
    with tempfile.NamedTemporaryFile(dir=args.dir, suffix=".out") as f:
        block = os.urandom(1 << 20)
        for _ in range(args.size_mib):
            f.write(block)
        f.flush()
        path = Path(f.name)
        rows = [("sha256, whole file", best_of_three(lambda: whole_sha256(path)))]
        rows += [(f"file_digest, {n} thread(s)",
                  best_of_three(lambda n=n: file_digest(path, threads=n)))  # type: ignore[misc]
                 for n in args.threads]
    print(f"{'digest':<26} | {'GB/s':>6} | {'s for ' + str(BATCH_GB) + ' GB':>11}")
    for name, s in rows:
        rate = size / s / 1e9
        print(f"{name:<26} | {rate:6.2f} | {BATCH_GB / rate:11.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
