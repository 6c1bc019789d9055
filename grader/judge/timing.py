"""The timed loop's samples, judged: a shape's Timing and the findings its samples carry
(tampering when they cannot be true, warnings when they show work outside the timed stream).
Every timed call ran on inputs of its own (model/timed.py), so no sample replays an earlier
call's output. Pure.
"""

from __future__ import annotations

import math

from grader.formats.problem import Shape
from grader.model.findings import Finding, Layer, Severity
from grader.model.results import Timing
from grader.model.runs import Evidence

TRIM = 0.1  # the trimmed mean's cut at each end


def _stats(samples: list[float]) -> tuple[float, float, float]:
    """Median, inter-quartile range and coefficient of variation of `samples`."""
    xs = sorted(samples)
    n = len(xs)

    def q(p: float) -> float:
        pos = p * (n - 1)
        lo = int(pos)
        hi = min(lo + 1, n - 1)
        return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)

    mean = sum(xs) / n
    sd = (sum((x - mean) ** 2 for x in xs) / (n - 1)) ** 0.5 if n > 1 else 0.0
    return q(0.5), q(0.75) - q(0.25), sd / mean if mean > 0 else 0.0


def trimmed_mean(samples: list[float], cut: float = TRIM) -> float:
    """The mean of `samples` without the `cut` share at each end (at least one sample kept)."""
    xs = sorted(samples)
    k = min(int(len(xs) * cut), (len(xs) - 1) // 2)
    kept = xs[k:len(xs) - k]
    return sum(kept) / len(kept)


def judge_timing(entry: Evidence, shape: Shape
                 ) -> tuple[Timing | None, list[Finding], str | None]:
    """The shape's timing from the entry's samples, cross-checked with what the host saw."""
    assert entry.out.result is not None
    rec = entry.out.result.timings.get(shape.id)
    if rec is None:
        return None, [], None
    if not rec.ok:
        return None, [], rec.error or "the timed loop failed"
    samples = [s for s in rec.device_us if s == s and s >= 0]  # drop NaN and negatives
    if not samples or len(samples) != len(rec.device_us):
        return None, [Finding(rule="TM910", severity=Severity.TAMPERING, layer=Layer.DYNAMIC,
                              message="timing samples missing, negative or NaN")], None
    median, iqr, cv = _stats(samples)
    findings: list[Finding] = []
    # The container's wall clock, measured by the host, bounds the time the samples can sum to.
    if sum(samples) / 1e6 > entry.exit.wall_s:
        findings.append(Finding(rule="TM911", severity=Severity.TAMPERING, layer=Layer.DYNAMIC,
                                message=f"timed samples sum to {sum(samples) / 1e6:.3f} s, more "
                                        f"than the container ran ({entry.exit.wall_s:.3f} s)"))
    host = [h for h in rec.host_us if h == h and h >= 0]
    if host:
        host_median = _stats(host)[0]
        if host_median > 2 * median + 200:
            findings.append(Finding(
                rule="TM912", severity=Severity.WARNING, layer=Layer.DYNAMIC,
                message=f"host-synchronised time {host_median:.1f} µs far exceeds the event time "
                        f"{median:.1f} µs: work outside the timed stream, or launch overhead"))
    timing = Timing(median_us=median, iqr_us=iqr, cv=cv, samples=len(samples),
                    mean_us=sum(samples) / len(samples), trimmed_mean_us=trimmed_mean(samples),
                    method=rec.method or "cuda-events",
                    host_median_us=_stats(host)[0] if host else None,
                    # evidence like the samples, kept only for bench/overhead.py's split
                    loop_s=rec.loop_s if rec.loop_s is not None and math.isfinite(rec.loop_s)
                    and rec.loop_s >= 0 else None, flush_bytes=rec.flush_bytes)
    return timing, findings, None
