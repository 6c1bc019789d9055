"""The trusted comparison of an entry's outputs with the reference's, on the host."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from grader.formats.problem import Problem
from grader.report.model import Comparison

_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
          torch.float8_e4m3fn: "float8_e4m3fn", torch.float8_e5m2: "float8_e5m2",
          torch.float64: "float64"}


@dataclass(frozen=True, kw_only=True)
class Outcome:
    ok: bool
    detail: str
    comparison: Comparison


def _fail(detail: str, atol: float = 0.0, rtol: float = 0.0, total: int = 0) -> Outcome:
    return Outcome(ok=False, detail=detail,
                   comparison=Comparison(atol=atol, rtol=rtol, total=total, mismatched=total))


def compare(expected: list[Any], actual: list[Any], problem: Problem) -> Outcome:
    """Every output must match in count, dtype and shape, then numerically within tolerance.

    NaN or Inf in an output never passes, and neither does an all-zero output where the
    reference is not all zero (an unwritten buffer must not pass a loose tolerance).
    """
    if len(expected) != len(actual):
        return _fail(f"kernel() returned {len(actual)} outputs, the reference {len(expected)}")
    worst_abs = worst_rel = 0.0
    mismatched = total = 0
    atol = rtol = 0.0
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
            bad = int((a != e).sum())
            mismatched += bad
            if bad:
                return _fail(f"output {i}: {bad} of {e.numel()} elements differ (exact dtype)",
                             tol.atol, tol.rtol, total)
            continue
        e64, a64 = e.to(torch.float64), a.to(torch.float64)
        if not bool(torch.isfinite(a64).all()):
            n = int((~torch.isfinite(a64)).sum())
            return _fail(f"output {i}: {n} NaN or Inf values", tol.atol, tol.rtol, total)
        if e.numel() and bool((a64 == 0).all()) and not bool((e64 == 0).all()):
            return _fail(f"output {i}: all zeros where the reference is not", tol.atol, tol.rtol,
                         total)
        diff = (a64 - e64).abs()
        bound = tol.atol + tol.rtol * e64.abs()
        bad = int((diff > bound).sum())
        mismatched += bad
        if e.numel():
            worst_abs = max(worst_abs, float(diff.max()))
            worst_rel = max(worst_rel, float((diff / e64.abs().clamp_min(1e-12)).max()))
    comp = Comparison(max_abs_err=worst_abs, max_rel_err=worst_rel, mismatched=mismatched,
                      total=total, atol=atol, rtol=rtol)
    if mismatched:
        return Outcome(ok=False, comparison=comp,
                       detail=f"{mismatched} of {total} elements outside atol={atol:g}, "
                              f"rtol={rtol:g} (max abs err {worst_abs:.3g})")
    return Outcome(ok=True, detail="within tolerance", comparison=comp)
