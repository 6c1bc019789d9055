"""Turn what came back from the containers into verdicts. Pure: no Docker, no files written.

The entry's own reports (its result.json, its trace) are evidence, weighed here; the outputs
are compared with the reference's by the host (compare.py).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Protocol

from grader.detect.dynamic import CallEvidence, verdict_for
from grader.detect.findings import Finding, Layer, Severity
from grader.formats.problem import Problem, Shape
from grader.judge.interpreter import interpreter_limit, unverified_detail
from grader.judge.outputs import compare
from grader.results import Comparison, KernelTime, ShapeResult, Timing, Trace
from grader.run.evidence import OutDir, ResultFile, TraceRecord
from grader.run.jobs import Case, ContainerRun
from grader.verdicts import Verdict, worst

EXCERPT = 2000
_TIMED = (Verdict.PASSED, Verdict.FALLBACK)  # verdicts whose timings mean something
# Messages of limits being hit (ENOSPC, EAGAIN, ENOMEM, EMFILE, the pids cap) in an entry's
# error or in what its dying process printed: a resource_limit, not a plain runtime_error.
_LIMIT_SIGNS = ("No space left on device", "Errno 28", "Resource temporarily unavailable",
                "Errno 11", "can't start new thread", "can't allocate memory", "MemoryError",
                "Cannot allocate memory", "Errno 12", "Too many open files", "Errno 24")


def hit_limit(text: str | None) -> bool:
    return bool(text) and any(sign in text for sign in _LIMIT_SIGNS)  # type: ignore[operator]


class TraceJudge(Protocol):
    """How dynamic evidence becomes findings (grader/detect/detector.py has the real one)."""

    def judge(self, trace: Trace, own_kernels: set[str]) -> tuple[list[Finding], Trace]:
        """Findings for `trace`, and the trace with kernel kinds and DSL share filled in."""
        ...

    def judge_calls(self, evidence: CallEvidence) -> tuple[list[Finding], float | None]:
        """Findings from the record of every call of a shape, and the timed calls' covered
        share of device time (detect.dynamic.judge_calls)."""
        ...


def tail(text: str | None, n: int = EXCERPT) -> str | None:
    if not text:
        return None
    return text if len(text) <= n else "…" + text[-n:]


def _shape_result(shape: Shape, verdict: Verdict, detail: str, **kw: object) -> ShapeResult:
    return ShapeResult(id=shape.id, phase=shape.phase, smoke=shape.smoke, params=shape.params,
                       verdict=verdict, detail=detail, **kw)  # type: ignore[arg-type]


def reference_failure(ref: ContainerRun, cases: list[Case]
                      ) -> tuple[Verdict, str, str | None] | None:
    """Why a reference run cannot be used (verdict, detail, excerpt), or None.

    reference_error when the suite's own code raised (an exception in make_inputs or the
    reference, or the harness dying on the reference's import): the organiser's fault (issue
    23). infra_error when the run was stopped from outside its code: the wall-clock limit, the
    memory limit, a full disk or another limit of the host."""
    result = ref.out.result
    failed = [c.id for c in cases
              if not (result and result.cases.get(c.id) and result.cases[c.id].ok)]
    if not (ref.exit.timed_out or result is None or failed):
        return None
    errs = [r.error for r in (result.cases.values() if result else []) if r.error]
    text = errs[0] if errs else ref.exit.logs
    detail = "the reference run failed" + (f" on {failed}" if failed else "")
    stopped = ref.exit.timed_out or ref.exit.oom_killed or hit_limit(text)
    if stopped or "Traceback (most recent call last)" not in (text or ""):
        why = ("timed out" if ref.exit.timed_out else "killed by the memory limit"
               if ref.exit.oom_killed else "a limit of the host" if hit_limit(text) else
               f"exit {ref.exit.exit_code}")
        return Verdict.INFRA_ERROR, f"{detail} ({why})", tail(text)
    return (Verdict.REFERENCE_ERROR, f"{detail}: the suite's reference.py raised; the suite is "
            "at fault, not the entry", tail(text))


def whole_problem(shapes: list[Shape], verdict: Verdict, detail: str,
                  excerpt: str | None = None) -> list[ShapeResult]:
    return [_shape_result(s, verdict, detail, error_excerpt=excerpt) for s in shapes]


def _container_failure(run: ContainerRun) -> tuple[Verdict, str] | None:
    """A verdict for the whole entry run when the container itself failed."""
    ex = run.exit
    if ex.timed_out:
        return Verdict.TIMEOUT, f"killed after {ex.wall_s:.0f} s (wall-clock limit)"
    if ex.oom_killed:
        return Verdict.RESOURCE_LIMIT, "killed by the memory limit"
    ready = run.out.ready
    if ready is None:
        if hit_limit(ex.logs):
            return Verdict.RESOURCE_LIMIT, "a resource limit stopped the process while importing"
        return Verdict.RUNTIME_ERROR, f"the process died while importing (exit {ex.exit_code})"
    if not ready.ok:
        return Verdict.COMPILE_ERROR, "importing the kernel file failed"
    if run.out.result is None:
        if hit_limit(ex.logs):
            return Verdict.RESOURCE_LIMIT, "a resource limit stopped the process before it finished"
        return Verdict.RUNTIME_ERROR, f"the process died before finishing (exit {ex.exit_code})"
    return None


def _anomaly_findings(out: OutDir) -> list[Finding]:
    findings = []
    for a in out.anomalies:  # one per kind, with its count (evidence.read_out_dir)
        findings.append(Finding(rule="TM900" if a.tampering else "TM901",
                                severity=Severity.TAMPERING if a.tampering else Severity.WARNING,
                                layer=Layer.DYNAMIC, message=f"output directory: {a.text}"))
    return findings


def _merge_traces(traces: list[Trace]) -> Trace:
    ops: Counter[str] = Counter()
    launches: Counter[str] = Counter()
    kernels: dict[str, tuple[str, float, int]] = {}
    for t in traces:
        ops.update(t.torch_ops)
        launches.update(t.triton_launches)
        for k in t.device_kernels:
            kind, us, calls = kernels.get(k.name, (k.kind, 0.0, 0))
            kernels[k.name] = (kind, us + k.device_us, calls + k.calls)
    return Trace(torch_ops=dict(ops), triton_launches=dict(launches),
                 device_kernels=[KernelTime(name=n, kind=kd, device_us=us, calls=c)
                                 for n, (kd, us, c) in kernels.items()])


def _as_trace(rec: TraceRecord) -> Trace:
    return Trace(torch_ops=rec.torch_ops, triton_launches=rec.triton_launches,
                 device_kernels=[KernelTime(name=k.name, kind="unknown", device_us=k.device_us,
                                            calls=k.calls) for k in rec.device_kernels])


def _dynamic(result: ResultFile, shape: str, records: list[TraceRecord], elements: int,
             own_kernels: set[str], tracer: TraceJudge, *, timed: bool
             ) -> tuple[list[Finding], Trace | None, float | None]:
    """The shape's dynamic findings from the record of all its calls: the correctness calls
    and, on a GPU, the timed calls themselves (issue 17: what is scored is what is watched).
    Returns the findings, the report's trace and the timed calls' covered share."""
    rec = result.timings.get(shape)
    timed_trace = rec.trace if timed and rec is not None and rec.ok else None
    every = [*records, *([timed_trace] if timed_trace is not None else [])]
    findings: list[Finding] = []
    trace = None
    if every:
        findings, trace = tracer.judge(_merge_traces([_as_trace(r) for r in every]), own_kernels)
    if timed_trace is not None and trace is not None and timed_trace.device_kernels:
        timed_findings, timed_view = tracer.judge(_as_trace(timed_trace), own_kernels)
        trace = trace.model_copy(update={"timed_dsl_share": timed_view.dsl_share})
        if not any(f.rule == "DY003" for f in findings):
            findings += [f.model_copy(update={"message": "in the timed calls: " + f.message})
                         for f in timed_findings if f.rule == "DY003"]
    outside = result.outside or TraceRecord()
    evidence = CallEvidence(
        per_call_ops=[r.torch_ops for r in records],
        timed_ops=timed_trace.torch_ops if timed_trace is not None else {},
        timed_calls=len(rec.device_us) if timed_trace is not None and rec is not None else 0,
        launch_arg_types=dict(sum((Counter(r.launch_arg_types) for r in every), Counter())),
        array_exports=dict(sum((Counter(r.array_exports) for r in [*every, outside]),
                               Counter())),
        outside_ops=outside.torch_ops, output_elements=elements,
        device_us=list(rec.device_us) if timed and rec is not None and rec.ok else [],
        covered_us=list(rec.covered_us) if rec is not None and rec.covered_us else None,
        busy_us=list(rec.busy_us) if rec is not None and rec.busy_us else None,
        record_problem=(result.device_record.problem or "inconsistent"
                        if result.device_record is not None
                        and not result.device_record.consistent else None))
    more, covered = tracer.judge_calls(evidence)
    return findings + more, trace, covered


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


def judge_problem(*, problem: Problem, shapes: list[Shape], cases: list[Case],
                  reference: ContainerRun, entry: ContainerRun, static: list[Finding],
                  own_kernels: set[str], tracer: TraceJudge, max_output_bytes: int,
                  interpreter: bool = False, source: str = "") -> list[ShapeResult]:
    """Each shape's result. `interpreter`: the entry ran on Triton's CPU interpreter, whose
    limits make a case `unverified` rather than a runtime error (judge/interpreter.py);
    `source`: the entry's kernel file."""
    problem_findings = _anomaly_findings(entry.out)
    forged = [f for f in problem_findings if f.severity == Severity.TAMPERING]
    failure = _container_failure(entry)
    logs = tail(entry.exit.logs)
    if forged and not entry.exit.timed_out:
        results = whole_problem(shapes, Verdict.TAMPERING, forged[0].message[:1000], logs)
        return [r.model_copy(update={"findings": forged}) for r in results]
    if failure is not None:
        verdict, detail = failure
        ready_error = entry.out.ready.error if entry.out.ready else None
        return whole_problem(shapes, verdict, detail, tail(ready_error) if ready_error else logs)
    assert entry.out.result is not None
    results = []
    for shape in shapes:
        shape_cases = [c for c in cases if c.shape.id == shape.id and not c.timing]
        timed_cases = [c for c in cases if c.shape.id == shape.id and c.timing]
        verdicts: list[Verdict] = []
        details: list[str] = []
        comparisons: list[Comparison] = []
        records: list[TraceRecord] = []  # the correctness calls'
        elements = 0
        excerpt: str | None = None
        for case in shape_cases:
            rec = entry.out.result.cases.get(case.id)
            expected = reference.out.load_tensors(case.id, "ref", max_output_bytes * 8)
            if isinstance(expected, str):
                verdicts.append(Verdict.INFRA_ERROR)
                details.append(f"reference: {expected}")
                continue
            if rec is None:
                verdicts.append(Verdict.TAMPERING)
                details.append(f"case {case.id}: missing from the entry's result file")
                continue
            # Every call's record counts, a failed or wrong one's too: a violation is one
            # whatever the outputs were (the verdict rules below decide what it weighs).
            elements = elements or sum(int(getattr(t, "numel", lambda: 0)()) for t in expected)
            if rec.trace is not None:
                records.append(rec.trace)
            if not rec.ok:
                err = rec.error or ""
                why = interpreter_limit(err, source) if interpreter else None
                if why is not None:
                    verdicts.append(Verdict.UNVERIFIED)
                    details.append(unverified_detail(case.id, why))
                    excerpt = excerpt or tail(err)
                    continue
                limited = hit_limit(err)
                verdicts.append(Verdict.RESOURCE_LIMIT if limited else Verdict.RUNTIME_ERROR)
                details.append(f"case {case.id}: " + ("a resource limit was hit" if limited
                                                      else "kernel() raised"))
                excerpt = excerpt or tail(err)
                continue
            actual = entry.out.load_tensors(case.id, "out", max_output_bytes)
            if isinstance(actual, str):
                verdicts.append(Verdict.RUNTIME_ERROR)
                details.append(actual)
                continue
            outcome = compare(expected, actual, problem)
            comparisons.append(outcome.comparison)
            if not outcome.ok:
                verdicts.append(Verdict.INCORRECT)
                details.append(f"seed {case.seed % 10000:04d}…: {outcome.detail}")
                continue
            verdicts.append(Verdict.PASSED)
        timing, timing_findings, timing_error = judge_timing(entry, shape, len(timed_cases))
        if timing_error is not None:
            verdicts.append(Verdict.RUNTIME_ERROR)
            details.append("the timed loop failed")
            excerpt = excerpt or tail(timing_error)
        for case in timed_cases:
            expected = reference.out.load_tensors(case.id, "ref", max_output_bytes * 8)
            actual = entry.out.load_tensors(case.id, "out", max_output_bytes)
            if timing is None or isinstance(expected, str):
                continue
            if isinstance(actual, str) or not compare(expected, actual, problem).ok:
                verdicts.append(Verdict.INCORRECT)
                details.append(f"the output of a timed call ({case.id}) is wrong or missing")
        findings: list[Finding] = [*problem_findings, *timing_findings]
        dyn, trace, covered = _dynamic(entry.out.result, shape.id, records, elements,
                                       own_kernels, tracer, timed=timing is not None)
        findings += dyn
        if timing is not None and covered is not None:
            timing = timing.model_copy(update={"covered_share": min(max(covered, 0.0), 1.0)})
        verdict = worst(verdicts)
        # Findings decide once the entry ran to the end: a policy violation or tampering
        # whatever its outputs were, a fallback only when they were correct.
        by_findings = verdict_for(static + findings)
        if by_findings is not None and (verdict == Verdict.PASSED or by_findings in (
                Verdict.POLICY_VIOLATION, Verdict.TAMPERING)):
            verdict = worst([verdict, by_findings])
            decisive = [f.message for f in static + findings
                        if f.severity not in (Severity.INFO, Severity.WARNING)]
            details.append("; ".join(decisive)[:600])
        elif verdict == Verdict.PASSED:
            details.append(f"correct on {len(shape_cases)} hidden input sets")
        results.append(_shape_result(shape, verdict, "; ".join(details)[:1000],
                                     error_excerpt=excerpt or (logs if verdict in (
                                         Verdict.RUNTIME_ERROR,) else None),
                                     comparisons=comparisons, trace=trace, findings=findings,
                                     timing=timing if verdict in _TIMED else None,
                                     reference_timing=judge_timing(reference, shape)[0]))
    return results
