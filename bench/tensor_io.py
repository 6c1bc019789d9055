"""Speed and peak memory of the tensor files that carry inputs and outputs between containers
(grader/harness/tensors.py), this checkout's codec against another revision's.

    python bench/tensor_io.py [--size-mib 1024] [--device cpu|cuda] [--rev 3bb048c] [--dir /dev/shm]

Each measurement runs in a fresh process (so that one's peak resident memory is its own): a
tensor of SIZE MiB of float32 on DEVICE is saved to DIR, then loaded back to DEVICE; printed are
the seconds and the peak resident memory above the tensor itself. `--rev` adds a row for
tensors.py as it was at that git revision (the 2026-12-01 change to chunked moves: 3bb048c).
Results: docs/benchmarks.md ("Inputs drawn on the GPU being graded").
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CODEC = REPO / "grader" / "harness" / "tensors.py"


def _child(codec: str, size_mib: int, device: str, folder: str) -> None:
    """One save and one load with the codec at path `codec`; prints a JSON line."""
    import torch

    namespace: dict[str, object] = {"__name__": "codec"}
    exec(compile(Path(codec).read_text(), codec, "exec"), namespace)
    save, load = namespace["save"], namespace["load"]
    x = torch.randn(size_mib << 18, device=device)  # 4-byte values
    if device != "cpu":
        torch.cuda.synchronize()
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    path = Path(folder) / "bench.in"
    t0 = time.perf_counter()
    save(path, [x])  # type: ignore[operator]
    t_save = time.perf_counter() - t0
    after_save = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    del x
    t0 = time.perf_counter()
    (y,) = load(path, device=device)  # type: ignore[operator]
    if device != "cpu":
        torch.cuda.synchronize()
    t_load = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    path.unlink()
    assert y.numel() == size_mib << 18
    print(json.dumps({"save_s": t_save, "load_s": t_load,
                      "save_extra_mib": (after_save - base) / 1024,
                      "load_extra_mib": (peak - base) / 1024}))


def _measure(codec: Path, size_mib: int, device: str, folder: str) -> dict[str, float]:
    res = subprocess.run([sys.executable, __file__, "--child", str(codec), str(size_mib), device,
                          folder], capture_output=True, text=True, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5])
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--rev", default=None, help="also the codec at this git revision")
    ap.add_argument("--dir", default="/dev/shm", help="where the file goes (a tmpfs, as in a "
                    "grading)")
    args = ap.parse_args()
    codecs = [("this checkout", CODEC)]
    with tempfile.TemporaryDirectory() as tmp:
        if args.rev:
            old = Path(tmp) / "tensors_old.py"
            old.write_text(subprocess.run(
                ["git", "-C", str(REPO), "show", f"{args.rev}:grader/harness/tensors.py"],
                capture_output=True, text=True, check=True).stdout)
            codecs.append((args.rev, old))
        print(f"{args.size_mib} MiB of float32 on {args.device}, file in {args.dir}")
        print("| codec | save s | load s | peak memory above the tensor, after save / load MiB |")
        print("| --- | --- | --- | --- |")
        for name, path in codecs:
            r = _measure(path, args.size_mib, args.device, args.dir)
            print(f"| {name} | {r['save_s']:.2f} | {r['load_s']:.2f} | "
                  f"{r['save_extra_mib']:.0f} / {r['load_extra_mib']:.0f} |")


if __name__ == "__main__":
    main()
