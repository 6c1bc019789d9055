"""The timed loop's samples, judged: a shape's Timing and the findings its samples carry
(tampering when they cannot be true, warnings when they look like replayed outputs or work
outside the timed stream). Pure.
"""

from __future__ import annotations

import math

from grader.detect.findings import Finding, Layer, Severity
from grader.formats.problem import Shape
from grader.results import Timing
from grader.run.jobs import ContainerRun


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


def replay_signature(samples: list[float], n_sets: int) -> str | None:
    """What the samples show if the entry replays outputs once it has seen an input set.

    The timed loop cycles through the shape's `n_sets` input sets in order (sample i used set
    i % n_sets), each call on fresh copies. An entry that caches its output under a cheap
    fingerprint of the inputs computes on a set's first timed call and replays on the others.
    Said when some set's first sample exceeds both 3x the median of its repeats and that median
    plus 50 µs, with at least 3 repeats: a warning, not a verdict (lazy one-time work in a first
    call looks the same), and the evidence for a person to weigh."""
    if n_sets < 1 or len(samples) < 4 * n_sets:
        return None
    worst = None
    for k in range(n_sets):
        repeats = sorted(samples[k + n_sets::n_sets])
        first, typical = samples[k], repeats[len(repeats) // 2]
        if first > 3 * typical and first - typical > 50 and (
                worst is None or first / typical > worst[1] / worst[2]):
            worst = (k, first, typical)
    if worst is None:
        return None
    k, first, typical = worst
    return (f"input set {k}: its first timed call took {first:.1f} µs, its {n_sets}-periodic "
            f"repeats {typical:.1f} µs: outputs replayed once the inputs were seen?")


def judge_timing(entry: ContainerRun, shape: Shape, n_sets: int = 0
                 ) -> tuple[Timing | None, list[Finding], str | None]:
    """The shape's timing from the entry's samples, cross-checked with what the host saw.
    `n_sets`: how many input sets the timed loop cycled through (0: unknown)."""
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
    replay = replay_signature(samples, n_sets)
    if replay:
        findings.append(Finding(rule="TM914", severity=Severity.WARNING, layer=Layer.DYNAMIC,
                                message=replay))
    host = [h for h in rec.host_us if h == h and h >= 0]
    if host:
        host_median = _stats(host)[0]
        if host_median > 2 * median + 200:
            findings.append(Finding(
                rule="TM912", severity=Severity.WARNING, layer=Layer.DYNAMIC,
                message=f"host-synchronised time {host_median:.1f} µs far exceeds the event time "
                        f"{median:.1f} µs: work outside the timed stream, or launch overhead"))
    timing = Timing(median_us=median, iqr_us=iqr, cv=cv, samples=len(samples),
                    method=rec.method or "cuda-events",
                    host_median_us=_stats(host)[0] if host else None,
                    # evidence like the samples, kept only for bench/overhead.py's split
                    loop_s=rec.loop_s if rec.loop_s is not None and math.isfinite(rec.loop_s)
                    and rec.loop_s >= 0 else None, flush_bytes=rec.flush_bytes)
    return timing, findings, None
