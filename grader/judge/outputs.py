"""The trusted comparison of an entry's outputs with the reference's, on the host."""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import torch

from grader.formats.problem import Problem
from grader.model.results import Comparison

_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
          torch.float8_e4m3fn: "float8_e4m3fn", torch.float8_e5m2: "float8_e5m2",
          # ROCm's fp8: the same exponent and mantissa bits, so the same tolerance
          torch.float8_e4m3fnuz: "float8_e4m3fn", torch.float8_e5m2fnuz: "float8_e5m2",
          torch.float64: "float64"}


@dataclass(frozen=True, kw_only=True)
class Outcome:
    ok: bool
    detail: str
    comparison: Comparison


def _fail(detail: str, atol: float = 0.0, rtol: float = 0.0, total: int = 0) -> Outcome:
    return Outcome(ok=False, detail=detail,
                   comparison=Comparison(atol=atol, rtol=rtol, total=total, mismatched=total))


# Elements compared at a time by one thread: float64 temporaries of 256 KiB, within a core's
# cache, and fewer than torch's grain size (32768), so that each op runs on the calling thread
# alone. Chunks of 4M elements (32 MiB temporaries, every op spread over all cores) went to
# memory and back for each of the pass's dozen ops: 107 M elements a second on the H100's
# 16-core host (2026-12-05: 20.7 GiB of block_scaled_mm's float32 outputs judged in 52.3 s).
CHUNK = 1 << 15
# Threads comparing one output's spans of chunks side by side (each op lets go of the
# interpreter while it runs): half the host's cores, 8 at most; the judge runs beside the
# next batch's timed loops.
THREADS = max(1, min(8, (os.cpu_count() or 1) // 2))
WORST = 3  # elements a mismatch names, furthest outside the tolerance first (issue 34)


@dataclass(frozen=True)
class Element:
    """One element outside the tolerance: where it is, what the entry gave, what the
    reference did, and how far past the allowed difference (atol + rtol * |expected|)."""

    output: int
    index: tuple[int, ...]
    got: float
    expected: float
    excess: float

    def text(self) -> str:
        return (f"output {self.output}[{', '.join(map(str, self.index))}]: got {self.got:.6g}, "
                f"expected {self.expected:.6g}")


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The index of element `flat` of a row-major tensor of `shape`."""
    index = []
    for dim in reversed(shape):
        flat, at = divmod(flat, dim) if dim else (flat, 0)
        index.append(at)
    return tuple(reversed(index))


def _keep_worst(worst: list[Element], more: list[Element]) -> list[Element]:
    # ties by position, so that the spans' order of finishing names no other element
    return sorted([*worst, *more], key=lambda el: (-el.excess, el.output, el.index))[:WORST]


def worst_text(worst: list[Element], label: str = "worst") -> str:
    """"; worst: output 0[3, 1]: got 1.5, expected 1", the way torch.testing.assert_close
    names the greatest difference's index (nothing when there is none)."""
    return f"; {label}: {'; '.join(el.text() for el in worst)}" if worst else ""


@dataclass
class _Stats:
    """What one floating-point output's comparison found, accumulated chunk by chunk."""

    nonfinite: int = 0
    actual_nonzero: bool = False
    expected_nonzero: bool = False
    mismatched: int = 0
    worst_abs: float = 0.0
    worst_rel: float = 0.0
    worst: list[Element] = field(default_factory=list)


def _non_finite(st: _Stats, ce: torch.Tensor, ca: torch.Tensor) -> None:
    """A chunk holding NaN or Inf on either side. The entry's non-finite values fail, but
    where the reference holds the same one: a reference's intended `-inf` (a masked logit,
    issue 20) is matched by the same `-inf`, NaN by NaN. Where the reference holds an infinity
    and the entry a finite value, they differ; where it holds NaN, any entry value is let be
    (a reference's own NaN says nothing to compare with). Every non-finite position is then
    zeroed on both sides, out of the numerical statistics."""
    fa, fe = torch.isfinite(ca), torch.isfinite(ce)
    agree = (ca == ce) | (torch.isnan(ca) & torch.isnan(ce))
    st.nonfinite += int(torch.count_nonzero(~fa & ~agree))
    st.mismatched += int(torch.count_nonzero(fa & torch.isinf(ce)))
    keep = fa & fe
    ca.masked_fill_(~keep, 0.0)
    ce.masked_fill_(~keep, 0.0)


def _chunk_worst(excess: torch.Tensor, at: int, flat_e: torch.Tensor, flat_a: torch.Tensor,
                 output: int, shape: tuple[int, ...]) -> list[Element]:
    """The chunk's elements furthest outside the tolerance (`excess` > 0 there), with their
    values read back from the outputs themselves, in float64."""
    vals, idx = torch.topk(excess, min(WORST, excess.numel()))
    return [Element(output=output, index=_unravel(at + int(i), shape),
                    got=float(flat_a[at + int(i)].double()),
                    expected=float(flat_e[at + int(i)].double()), excess=float(v))
            for v, i in zip(vals, idx, strict=True) if float(v) > 0]


def _float_stats(e: torch.Tensor, a: torch.Tensor, atol: float, rtol: float,
                 output: int = 0) -> _Stats:
    """Both outputs compared in float64 (exact for every floating dtype an output may have),
    CHUNK elements at a time: THREADS threads each take a span of whole chunks, and their
    statistics are merged into those of the whole output at once (non-finite values are
    judged apart: _non_finite). At production shapes an output holds hundreds of millions of
    elements: whole-output temporaries cost gigabytes, and the CPU's slow kernels (isfinite,
    counting a mask) are taken only where a cheap reduction says there is something to
    count."""
    flat_e, flat_a = e.reshape(-1), a.reshape(-1)
    n = flat_e.numel()
    chunks = -(-n // CHUNK)
    threads = max(1, min(THREADS, chunks))
    per = -(-chunks // threads) * CHUNK
    spans = [(at, min(n, at + per)) for at in range(0, n, per)]
    if len(spans) == 1:
        return _span_stats(flat_e, flat_a, 0, n, atol, rtol, output, tuple(e.shape))
    with ThreadPoolExecutor(max_workers=len(spans), thread_name_prefix="judge-span") as pool:
        parts = list(pool.map(lambda span: _span_stats(flat_e, flat_a, span[0], span[1], atol,
                                                       rtol, output, tuple(e.shape)), spans))
    st = _Stats()
    for part in parts:
        st.nonfinite += part.nonfinite
        st.actual_nonzero = st.actual_nonzero or part.actual_nonzero
        st.expected_nonzero = st.expected_nonzero or part.expected_nonzero
        st.mismatched += part.mismatched
        st.worst_abs = max(st.worst_abs, part.worst_abs)
        st.worst_rel = max(st.worst_rel, part.worst_rel)
        st.worst = _keep_worst(st.worst, part.worst)
    return st


def _span_stats(flat_e: torch.Tensor, flat_a: torch.Tensor, start: int, stop: int,
                atol: float, rtol: float, output: int, shape: tuple[int, ...]) -> _Stats:
    """One pass over elements [start, stop) of both flat outputs, chunk by chunk, reusing
    the same buffers."""
    st = _Stats()
    size = min(CHUNK, stop - start)
    e64, a64, diff, bound = (torch.empty(size, dtype=torch.float64) for _ in range(4))
    mask = torch.empty(size, dtype=torch.bool)
    for at in range(start, stop, CHUNK):
        k = min(CHUNK, stop - at)
        ce, ca, d, b = e64[:k], a64[:k], diff[:k], bound[:k]
        ca.copy_(flat_a[at : at + k])
        ce.copy_(flat_e[at : at + k])
        # A sum in float64 is finite unless some value is NaN or Inf (or float64 values so
        # large that they overflow it: then _non_finite finds nothing, only costs time).
        if not (math.isfinite(float(ca.sum())) and math.isfinite(float(ce.sum()))):
            _non_finite(st, ce, ca)
        if st.nonfinite:
            continue  # the output fails on that alone; only the count is still wanted
        st.actual_nonzero = st.actual_nonzero or bool(ca.any())
        st.expected_nonzero = st.expected_nonzero or bool(ce.any())
        torch.sub(ca, ce, out=d).abs_()
        torch.abs(ce, out=b).mul_(rtol).add_(atol)
        # d - b > 0 exactly where d > b (a difference of floats is 0 only when they are
        # equal; non-finite values were zeroed above).
        if float(torch.sub(d, b, out=ca).nan_to_num_(nan=0.0).max()) > 0:
            st.mismatched += int(torch.count_nonzero(torch.gt(d, b, out=mask[:k])))
            st.worst = _keep_worst(st.worst, _chunk_worst(ca, at, flat_e, flat_a, output,
                                                          shape))
        st.worst_abs = max(st.worst_abs, float(d.max()))
        st.worst_rel = max(st.worst_rel,
                           float(d.div_(torch.abs(ce, out=b).clamp_min_(1e-12)).max()))
    return st


def compare(expected: list[Any], actual: list[Any], problem: Problem) -> Outcome:
    """Every output must match in count, dtype and shape, then numerically within tolerance.

    NaN or Inf in an output never passes where the reference does not hold the same value,
    and neither does an all-zero output where the reference is not all zero (an unwritten
    buffer must not pass a loose tolerance).
    """
    if len(expected) != len(actual):
        return _fail(f"kernel() returned {len(actual)} outputs, the reference {len(expected)}")
    worst_abs = worst_rel = 0.0
    mismatched = total = 0
    atol = rtol = 0.0
    worst: list[Element] = []
    for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
        if not isinstance(a, torch.Tensor) or not isinstance(e, torch.Tensor):
            return _fail(f"output {i}: not a tensor")
        if a.dtype != e.dtype:
            return _fail(f"output {i}: dtype {a.dtype}, expected {e.dtype}")
        if tuple(a.shape) != tuple(e.shape):
            return _fail(f"output {i}: shape {tuple(a.shape)}, expected {tuple(e.shape)}")
        tol = problem.tolerance_for(_NAMES.get(e.dtype, str(e.dtype)))
        atol, rtol = max(atol, tol.atol), max(rtol, tol.rtol)
        total += e.numel()
        if not (e.is_floating_point() or e.is_complex()):
            differ = (a != e).reshape(-1)
            bad = int(differ.sum())
            mismatched += bad
            if bad:
                first = [Element(output=i, index=_unravel(int(j), tuple(e.shape)),
                                 got=float(a.reshape(-1)[j].double()),
                                 expected=float(e.reshape(-1)[j].double()), excess=0.0)
                         for j in torch.nonzero(differ).reshape(-1)[:WORST]]
                return _fail(f"output {i}: {bad} of {e.numel()} elements differ (exact dtype)"
                             + worst_text(first, "first"),
                             tol.atol, tol.rtol, total)
            continue
        if not e.numel():
            continue
        st = _float_stats(e, a, tol.atol, tol.rtol, output=i)
        if st.nonfinite:
            return _fail(f"output {i}: {st.nonfinite} NaN or Inf values", tol.atol, tol.rtol,
                         total)
        if not st.actual_nonzero and st.expected_nonzero:
            return _fail(f"output {i}: all zeros where the reference is not", tol.atol, tol.rtol,
                         total)
        mismatched += st.mismatched
        worst_abs = max(worst_abs, st.worst_abs)
        worst_rel = max(worst_rel, st.worst_rel)
        worst = _keep_worst(worst, st.worst)
    comp = Comparison(max_abs_err=worst_abs, max_rel_err=worst_rel, mismatched=mismatched,
                      total=total, atol=atol, rtol=rtol)
    if mismatched:
        return Outcome(ok=False, comparison=comp,
                       detail=f"{mismatched} of {total} elements outside atol={atol:g}, "
                              f"rtol={rtol:g} (max abs err {worst_abs:.3g})"
                              f"{worst_text(worst)}")
    return Outcome(ok=True, detail="within tolerance", comparison=comp)
