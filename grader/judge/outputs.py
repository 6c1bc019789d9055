"""The trusted comparison of an entry's outputs with the reference's, on the host."""

from __future__ import annotations

import math
import multiprocessing
import os
import threading
from concurrent.futures import ProcessPoolExecutor
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


# Elements compared at a time: float64 temporaries of 256 KiB, within a core's cache, and no
# more than torch's grain size (32768), so that each op runs on its caller's thread alone.
# Chunks of 4M elements (32 MiB temporaries, every op spread over all cores) went to memory and
# back for each of the pass's dozen ops: 107 M elements a second on the H100's 16-core host
# (2026-12-05: 20.7 GiB of block_scaled_mm's float32 outputs judged in 52.3 s).
CHUNK = 1 << 15
# Processes comparing one large output's spans of chunks side by side: half the host's cores,
# 8 at most (the judge runs beside the next batch's timed loops); the workers of one grading
# (one a GPU, each judging on a thread of its own) share a pool of half the cores, so that
# on an eight-GPU host eight outputs are compared at once. Threads did not spread it: at
# this chunk size the interpreter's share of each op held them in turn (on an H100's 16-core
# host, 2026-12-05, eight threads judged block_scaled_mm's 15.3 G elements at 62 M a second;
# on the two-core CI host two threads were slower than one).
POOL = max(1, (os.cpu_count() or 1) // 2)  # the comparing processes at most, all outputs together
PROCESSES = min(8, POOL)
# Elements of one output from which its comparison is spread over PROCESSES processes; below
# it, handing the spans over costs more than it saves.
SPREAD_FROM = 1 << 22
RESTARTS = 3  # comparing processes that fail (_Processes) before the judge stops starting them
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
    CHUNK elements at a time; an output of SPREAD_FROM elements or more in PROCESSES spans of
    whole chunks, side by side (_spread), their statistics merged into those of the whole
    output (non-finite values are judged apart: _non_finite). At production shapes an output
    holds billions of elements: whole-output temporaries cost gigabytes, and the CPU's slow
    kernels (isfinite, counting a mask) are taken only where a cheap reduction says there is
    something to count."""
    flat_e, flat_a = e.reshape(-1), a.reshape(-1)
    n, shape = flat_e.numel(), tuple(e.shape)
    if (least := shared_from()) is not None and n >= least:  # the loader's rule, the same
        chunks = -(-n // CHUNK)
        per = -(-chunks // min(PROCESSES, chunks)) * CHUNK
        spans = [(at, min(n, at + per)) for at in range(0, n, per)]
        if len(spans) > 1 and (parts := _spread(flat_e, flat_a, spans, atol, rtol, output,
                                                shape)) is not None:
            return _merged(parts)
    return _span_stats(flat_e, flat_a, 0, n, atol, rtol, output, shape, CHUNK)


def _merged(parts: list[_Stats]) -> _Stats:
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


def shared_from() -> int | None:
    """Elements from which an output the judge loads is read into shared memory: those its
    comparison spreads over processes (None where it stays on the judge's thread)."""
    return SPREAD_FROM if PROCESSES > 1 else None


class _Processes:
    """The judge's comparing processes: started (spawned, so that nothing of the grader's own
    threads and locks is copied into them) at the first output large enough to need them, and
    kept for the process's life. The outputs reach them as shared memory (torch's own
    handing-over of a tensor's storage: a file descriptor, no copy; outputs the judge loaded
    into shared memory in the first place, evidence.OutDir.load_tensors, are not even moved),
    and only their statistics come back."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None
        self.failed = 0

    def pool(self) -> ProcessPoolExecutor | None:
        """The processes, or None once RESTARTS of them have failed (a host whose processes
        cannot start or keep dying: the comparisons stay on the judge's thread)."""
        with self._lock:
            if self._pool is None and self.failed < RESTARTS:
                self._pool = ProcessPoolExecutor(  # its processes start as they are needed
                    POOL,
                    mp_context=multiprocessing.get_context("spawn"), initializer=_one_thread)
            return self._pool

    def drop(self, pool: ProcessPoolExecutor) -> None:
        """After `pool` failed: the next comparison starts a new one."""
        with self._lock:
            if self._pool is pool:
                self._pool = None
                self.failed += 1
        pool.shutdown(wait=False, cancel_futures=True)


_PROCESSES = _Processes()


def _one_thread() -> None:
    torch.set_num_threads(1)  # each process is one of PROCESSES: torch's own threads add none


def _spread(flat_e: torch.Tensor, flat_a: torch.Tensor, spans: list[tuple[int, int]],
            atol: float, rtol: float, output: int, shape: tuple[int, ...]
            ) -> list[_Stats] | None:
    """Each span's statistics from a comparing process; None where the host cannot give
    them (no shared memory left, a process that died): the caller compares on its own thread,
    and the next comparison starts new processes."""
    if (pool := _PROCESSES.pool()) is None:
        return None
    try:
        for t in (flat_e, flat_a):
            if not t.is_shared():
                t.share_memory_()  # its storage moved, in place
    except RuntimeError:  # no room in shared memory
        return None
    try:
        futures = [pool.submit(_span_stats, flat_e, flat_a, start, stop, atol, rtol, output,
                               shape, CHUNK) for start, stop in spans]
        return [f.result() for f in futures]
    except Exception:  # a process's: it died, or could not map a storage; the pass on the
        _PROCESSES.drop(pool)  # judge's thread raises what the comparison's own code raises
        return None


def _span_stats(flat_e: torch.Tensor, flat_a: torch.Tensor, start: int, stop: int,
                atol: float, rtol: float, output: int, shape: tuple[int, ...],
                chunk: int) -> _Stats:
    """One pass over elements [start, stop) of both flat outputs, `chunk` at a time, reusing
    the same buffers: a dozen ops a chunk (the cost of the pass), a few more in a chunk that
    holds non-finite values or mismatches."""
    st = _Stats()
    size = min(chunk, stop - start)
    e64, a64, diff, mag, bound = (torch.empty(size, dtype=torch.float64) for _ in range(5))
    mask = torch.empty(size, dtype=torch.bool)
    for at in range(start, stop, chunk):
        k = min(chunk, stop - at)
        ce, ca, d, m, b = e64[:k], a64[:k], diff[:k], mag[:k], bound[:k]
        ca.copy_(flat_a[at : at + k])
        ce.copy_(flat_e[at : at + k])
        # The largest difference is finite unless some value is NaN or Inf (or float64
        # values so large that their difference overflows: then _non_finite finds nothing,
        # only costs time).
        worst_abs = float(torch.sub(ca, ce, out=d).abs_().max())
        if not math.isfinite(worst_abs):
            _non_finite(st, ce, ca)
            if not st.nonfinite:  # only the reference's own, matched: zeroed on both sides
                worst_abs = float(torch.sub(ca, ce, out=d).abs_().max())
        if st.nonfinite:
            continue  # the output fails on that alone; only the count is still wanted
        st.actual_nonzero = st.actual_nonzero or bool(ca.any())
        st.expected_nonzero = st.expected_nonzero or bool(ce.any())
        torch.abs(ce, out=m)
        torch.mul(m, rtol, out=b).add_(atol)
        if bool(torch.gt(d, b, out=mask[:k]).any()):
            st.mismatched += int(torch.count_nonzero(mask[:k]))
            # d - b > 0 exactly where d > b (a difference of finite floats is 0 only when
            # they are equal)
            st.worst = _keep_worst(st.worst, _chunk_worst(torch.sub(d, b, out=ca), at, flat_e,
                                                          flat_a, output, shape))
        st.worst_abs = max(st.worst_abs, worst_abs)
        st.worst_rel = max(st.worst_rel, float(d.div_(m.clamp_min_(1e-12)).max()))
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
