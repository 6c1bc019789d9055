"""Speed and peak memory of the host-side data paths that grow with a problem's size, this
checkout's code against another revision's: the tensor files that carry inputs and outputs
between containers (grader/harness/tensors.py) and the comparison of an entry's outputs with
the reference's (grader/judge/outputs.py).

    python bench/host_io.py [--size-mib 1024] [--device cpu|cuda] [--rev 3bb048c] [--dir /dev/shm]
        [--files-from OLD_TENSORS_PY] [--compare-from OLD_OUTPUTS_PY] [--processes N ...]

Each measurement runs in a fresh process, so that its peak resident memory is its own:
- files: SIZE MiB of float32 on DEVICE saved to DIR, then loaded back to DEVICE;
- compare: two bfloat16 outputs of SIZE MiB each (one within the suite's tolerance of the other)
  compared on the host, as the judge does.
Printed: seconds (wall and CPU for the comparison, which spreads over threads) and the peak
resident memory beyond the tensors themselves (since the files are written through a mapping
of their own, their tmpfs pages count there while written: resident, not allocated beyond the
file). `--rev` adds a row per path for the code as it was at that git revision (3bb048c:
before the chunked files and comparison of 2026-12-01); `--files-from` and `--compare-from`
add a row for another copy of grader/harness/tensors.py or grader/judge/outputs.py, where
there is no git (a GPU host); `--processes N ...` a compare row per N for this checkout's
comparison spread over N processes (the outputs in shared memory, as the judge loads them).
Results: docs/benchmarks.md ("Inputs drawn on the GPU being graded").
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SOURCES = {"files": "grader/harness/tensors.py", "compare": "grader/judge/outputs.py"}


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _load_source(path: str) -> dict[str, Any]:
    import importlib
    import importlib.util

    for src in SOURCES.values():  # this checkout's own module: its comparing processes
        if Path(path) == REPO / src:  # import it by name
            return vars(importlib.import_module(src[:-3].replace("/", ".")))

    spec = importlib.util.spec_from_file_location("bench_subject", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_subject"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return vars(module)


def _files(code: dict[str, Any], size_mib: int, device: str, folder: str) -> dict[str, float]:
    import torch

    x = torch.randn(size_mib << 18, device=device)  # 4-byte values
    base = _peak_mib()
    path = Path(folder) / "bench.in"
    t0 = time.perf_counter()
    code["save"](path, [x])
    t_save = time.perf_counter() - t0
    extra_save = _peak_mib() - base
    del x
    t0 = time.perf_counter()
    (y,) = code["load"](path, device=device)
    if device != "cpu":
        torch.cuda.synchronize()
    t_load = time.perf_counter() - t0
    path.unlink()
    assert y.numel() == size_mib << 18
    return {"save_s": t_save, "load_s": t_load, "save_extra_mib": extra_save,
            "load_extra_mib": _peak_mib() - base}


def _compare(code: dict[str, Any], size_mib: int, processes: int) -> dict[str, float]:
    import torch

    from grader.paths import PROBLEM_BUNDLES
    from grader.suite.load import load_suite

    problem = load_suite(PROBLEM_BUNDLES / "llm-inference").problems["softmax"].problem
    n = size_mib << 19  # 2-byte values
    e = torch.empty(n, dtype=torch.bfloat16)
    a = torch.empty_like(e)
    if processes and "PROCESSES" in code:  # as the judge loads them (tensors.load)
        code["PROCESSES"] = code["POOL"] = processes  # the module's globals (vars of it)
        e.share_memory_()
        a.share_memory_()
        code["_PROCESSES"].pool()  # started before the clock, as it is after a grading's first
        code["compare"]([e[:1 << 23]], [a[:1 << 23]], problem)  # large output
    step = 1 << 20
    for at in range(0, n, step):  # filled piecewise: no whole-size temporaries before the base
        x = torch.randn(min(step, n - at))
        e[at : at + x.numel()] = x
        a[at : at + x.numel()] = x * (1 + 0.001 * torch.randn(x.numel()))
    base = _peak_mib()
    t0, w0 = time.process_time(), time.perf_counter()
    outcome = code["compare"]([e], [a], problem)
    return {"cpu_s": time.process_time() - t0, "wall_s": time.perf_counter() - w0,
            "extra_mib": _peak_mib() - base, "ok": float(outcome.ok)}


def _measure(what: str, source: Path, size_mib: int, device: str, folder: str,
             processes: int = 0) -> dict[str, float]:
    res = subprocess.run([sys.executable, __file__, "--child", what, str(source), str(size_mib),
                          device, folder, str(processes)], capture_output=True, text=True,
                         check=True, cwd=REPO, env={"PYTHONPATH": os.pathsep.join(
                             [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]),
                             "PATH": "/usr/bin:/bin"})
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        what, source, size, device, folder, processes = sys.argv[2:8]
        code = _load_source(source)
        out = (_files(code, int(size), device, folder) if what == "files"
               else _compare(code, int(size), int(processes)))
        print(json.dumps(out))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--device", default="cpu", help="where the files' tensor lives")
    ap.add_argument("--rev", default=None, help="also the code at this git revision")
    ap.add_argument("--files-from", type=Path, default=None,
                    help="also the files row for this copy of grader/harness/tensors.py")
    ap.add_argument("--compare-from", type=Path, default=None,
                    help="also the compare row for this copy of grader/judge/outputs.py")
    ap.add_argument("--dir", default="/dev/shm", help="where the file goes (a tmpfs, as in a "
                    "grading)")
    ap.add_argument("--processes", type=int, nargs="*", default=[],
                    help="also this checkout's comparison spread over N processes (each N; "
                    "CPU s is the judge's own then, not its processes')")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        versions: list[tuple[str, dict[str, Path]]] = [
            ("this checkout", {w: REPO / s for w, s in SOURCES.items()})]
        if args.rev:
            old = {}
            for what, src in SOURCES.items():
                old[what] = Path(tmp) / f"{what}_{args.rev}.py"
                old[what].write_text(subprocess.run(
                    ["git", "-C", str(REPO), "show", f"{args.rev}:{src}"],
                    capture_output=True, text=True, check=True).stdout)
            versions.append((args.rev, old))
        if args.files_from:
            versions.append((args.files_from.name, {"files": args.files_from.resolve()}))
        if args.compare_from:
            versions.append((args.compare_from.name, {"compare": args.compare_from.resolve()}))
        print(f"files: {args.size_mib} MiB of float32 on {args.device}, in {args.dir}")
        print("| code | save s | load s | peak memory beyond the tensor, after save / load MiB |")
        print("| --- | --- | --- | --- |")
        for name, paths in versions:
            if "files" not in paths:
                continue
            r = _measure("files", paths["files"], args.size_mib, args.device, args.dir)
            print(f"| {name} | {r['save_s']:.2f} | {r['load_s']:.2f} | "
                  f"{r['save_extra_mib']:.0f} / {r['load_extra_mib']:.0f} |")
        print(f"\ncompare: two bfloat16 outputs of {args.size_mib} MiB each, on the host")
        print("| code | wall s | CPU s | peak memory beyond the outputs MiB | passed |")
        print("| --- | --- | --- | --- | --- |")
        for name, paths in versions:
            if "compare" not in paths:
                continue
            for procs in ([0, *args.processes] if name == "this checkout" else [0]):
                r = _measure("compare", paths["compare"], args.size_mib, args.device, args.dir,
                             procs)
                label = f"{name}, {procs} processes" if procs else name
                print(f"| {label} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | "
                      f"{r['extra_mib']:.0f} | {bool(r['ok'])} |")


if __name__ == "__main__":
    main()
