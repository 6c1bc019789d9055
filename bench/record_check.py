"""The entry's recorder on a real GPU: what each call's record holds, and what recording costs.

    python bench/record_check.py scenarios [--json FILE]   # one process, recorder installed
    python bench/record_check.py spin [--json FILE]        # an entry that launches spins itself
    python bench/record_check.py cost [--no-record] [--json FILE]

`scenarios` calls a few entries through the harness's own path (timing.Clock with a
record.Recorder installed first, as harness/entry.py does) and prints, per call, the device
kernels the record gave it, its event-timed device µs and the µs its kernels covered:
- honest: a Triton add, 32 MiB and 4K elements;
- switch: a Triton GEMM for its first four calls, torch.matmul (cuBLAS) after: an entry that
  behaves while it believes it is watched (issue 17, class 1);
- host: a Triton copy of one element, the sum computed on the host behind a synchronising copy
  (class 3: time no kernel explains);
- side_stream: the Triton add launched on a stream of its own.
`cost` times the same kernels with and without the recorder (run it twice, once with
`--no-record`, in fresh processes: the recorder cannot be taken out of a process once in).
tests/gpu/test_record_gpu.py runs the first two; docs/benchmarks.md has the figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
import triton
import triton.language as tl

from grader.harness.record import Recorder
from grader.harness.timing import Clock, time_kernel

FLUSH = 256 << 20


@triton.jit
def add_k(x_ptr, y_ptr, o_ptr, n, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@triton.jit
def mm_k(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr,  # type: ignore[no-untyped-def]
         BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
        y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(x, y)
    tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16))


def triton_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    o = torch.empty_like(x)
    add_k[(triton.cdiv(x.numel(), 1024),)](x, y, o, x.numel(), BLOCK=1024)
    return o


def triton_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty(m, n, dtype=a.dtype, device=a.device)
    mm_k[(m // 128, n // 128)](a, b, c, m, n, k, BM=128, BN=128, BK=64)
    return c


class Switch:
    """Its own Triton GEMM for the first `honest` calls, cuBLAS after."""

    def __init__(self, honest: int) -> None:
        self.calls = 0
        self.honest = honest

    def __call__(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return triton_mm(a, b) if self.calls <= self.honest else torch.matmul(a, b)


def host_sum(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    o = torch.empty_like(x)
    add_k[(1,)](x, y, o, 1, BLOCK=1024)  # one element on the device, for show
    z = x.cpu() + y.cpu()  # the real work, on the host, behind a synchronising copy
    return o.copy_(z, non_blocking=False)


def side_stream(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        o = triton_add(x, y)
    return o


def _calls(rec: Recorder, labels: list[str], device_us: list[float]) -> list[dict[str, Any]]:
    assert rec.device_calls is not None
    return [{"label": lb, "device_us": round(us, 3),
             "covered_us": round(rec.device_calls.covered(lb, us), 3),
             "kernels": rec.device_calls.kernels(lb)} for lb, us in zip(labels, device_us,
                                                                         strict=True)]


def scenarios() -> dict[str, Any]:
    rec = Recorder("cuda")
    rec.install()
    clock = Clock(rec, FLUSH)
    x32 = torch.randn(8 << 20, device="cuda")
    x4k = torch.randn(4096, device="cuda")
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    plan = {"honest_32MiB": (triton_add, (x32, x32.clone())),
            "honest_4K": (triton_add, (x4k, x4k.clone())),
            "switch": (Switch(honest=4), (a, b)),
            "host": (host_sum, (x32, x32.clone())),
            "side_stream": (side_stream, (x32, x32.clone()))}
    runs: dict[str, tuple[list[str], list[float]]] = {}
    for name, (fn, values) in plan.items():
        clock.call(fn, values, f"warm:{name}")  # compile outside the judged calls
        raw, _last, labels = time_kernel(clock, [fn], [values], name, rse_target=0.0,
                                         min_samples=12, max_samples=12)
        runs[name] = (labels, raw["device_us"])
    rec.finish()
    assert rec.device_calls is not None
    return {"consistent": rec.device_calls.consistent, "problem": rec.device_calls.problem,
            "runs": {name: _calls(rec, *run) for name, run in runs.items()}}


def spin() -> dict[str, Any]:
    rec = Recorder("cuda")
    rec.install()
    clock = Clock(rec, FLUSH)
    x = torch.randn(4096, device="cuda")

    def sneaky(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        torch.cuda._sleep(100)  # a bracket of its own, to shift the record's windows
        return triton_add(x, y)

    for i in range(4):
        clock.call(sneaky, (x, x.clone()), f"call{i}")
    rec.finish()
    assert rec.device_calls is not None
    return {"consistent": rec.device_calls.consistent, "problem": rec.device_calls.problem}


def cost(record: bool) -> dict[str, Any]:
    rec = Recorder("cuda")
    if record:
        rec.install()
    clock = Clock(rec, FLUSH)
    rows = {}
    x_small = torch.randn(4096, device="cuda")
    x_mid = torch.randn(8 << 20, device="cuda")
    x_big = torch.randn(1 << 28, device="cuda", dtype=torch.bfloat16)  # 512 MiB a tensor
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    for name, fn, values in (("add_4K", triton_add, (x_small, x_small.clone())),
                             ("add_32MiB", triton_add, (x_mid, x_mid.clone())),
                             ("add_1GiB", triton_add, (x_big, x_big.clone())),
                             ("gemm_4096_cublas", torch.matmul, (a, b)),
                             ("gemm_4096_triton", triton_mm, (a, b))):
        clock.call(fn, values, f"warm:{name}")
        raw, _last, _labels = time_kernel(clock, [fn], [values], name, rse_target=0.0,
                                          min_samples=50, max_samples=50)
        rows[name] = round(statistics.median(raw["device_us"]), 2)
    if record:
        rec.finish()
    return {"record": record, "median_us": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["scenarios", "spin", "cost"])
    ap.add_argument("--no-record", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    out = (scenarios() if args.what == "scenarios" else spin() if args.what == "spin"
           else cost(not args.no_record))
    text = json.dumps(out, indent=1)
    if args.json:
        args.json.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
