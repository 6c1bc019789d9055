"""Turn what came back from the containers into verdicts. Pure: no Docker, no files written.

The entry's own reports (its result.json, its trace) are evidence, weighed here; the outputs
are compared with the reference's by the host (compare.py).
"""

from __future__ import annotations

from collections import Counter
from typing import Protocol

from grader.compare import compare
from grader.detect.findings import Finding, Layer, Severity
from grader.evidence import OutDir
from grader.formats.problem import Problem, Shape
from grader.problem_run import Case, ContainerRun
from grader.report.model import Comparison, KernelTime, ShapeResult, Trace
from grader.verdicts import Verdict, worst

EXCERPT = 2000
_NO_SPACE = ("No space left on device", "Errno 28")


class TraceJudge(Protocol):
    """How dynamic evidence becomes findings (grader/detection.py has the real one)."""

    def judge(self, trace: Trace, own_kernels: set[str]) -> tuple[list[Finding], Trace]:
        """Findings for `trace`, and the trace with kernel kinds and DSL share filled in."""
        ...


def tail(text: str | None, n: int = EXCERPT) -> str | None:
    if not text:
        return None
    return text if len(text) <= n else "…" + text[-n:]


def finding_verdict(findings: list[Finding]) -> Verdict | None:
    sev = {f.severity for f in findings}
    if Severity.TAMPERING in sev:
        return Verdict.TAMPERING
    if Severity.VIOLATION in sev:
        return Verdict.POLICY_VIOLATION
    if Severity.FALLBACK in sev:
        return Verdict.FALLBACK
    return None


def _shape_result(shape: Shape, verdict: Verdict, detail: str, **kw: object) -> ShapeResult:
    return ShapeResult(id=shape.id, phase=shape.phase, smoke=shape.smoke, params=shape.params,
                       verdict=verdict, detail=detail, **kw)  # type: ignore[arg-type]


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
        return Verdict.RUNTIME_ERROR, f"the process died while importing (exit {ex.exit_code})"
    if not ready.ok:
        return Verdict.COMPILE_ERROR, "importing the kernel file failed"
    if run.out.result is None:
        return Verdict.RUNTIME_ERROR, f"the process died before finishing (exit {ex.exit_code})"
    return None


def _anomaly_findings(out: OutDir) -> list[Finding]:
    findings = []
    for a in out.anomalies:
        tamper = "symlink" in a or "non-regular" in a or "not valid" in a or "larger" in a
        findings.append(Finding(rule="TM900" if tamper else "TM901",
                                severity=Severity.TAMPERING if tamper else Severity.WARNING,
                                layer=Layer.DYNAMIC, message=f"output directory: {a}"))
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


def judge_problem(*, problem: Problem, shapes: list[Shape], cases: list[Case],
                  reference: ContainerRun, entry: ContainerRun, static: list[Finding],
                  own_kernels: set[str], tracer: TraceJudge, max_output_bytes: int
                  ) -> list[ShapeResult]:
    failure = _container_failure(entry)
    logs = tail(entry.exit.logs)
    if failure is not None:
        verdict, detail = failure
        excerpt = tail(entry.out.ready.error) if entry.out.ready and entry.out.ready.error \
            else logs
        return whole_problem(shapes, verdict, detail, excerpt)
    assert entry.out.result is not None
    problem_findings = _anomaly_findings(entry.out)
    results = []
    for shape in shapes:
        shape_cases = [c for c in cases if c.shape.id == shape.id]
        verdicts: list[Verdict] = []
        details: list[str] = []
        comparisons: list[Comparison] = []
        traces: list[Trace] = []
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
            if not rec.ok:
                err = rec.error or ""
                no_space = any(s in err for s in _NO_SPACE)
                verdicts.append(Verdict.RESOURCE_LIMIT if no_space else Verdict.RUNTIME_ERROR)
                details.append(f"case {case.id}: " + ("output space exhausted" if no_space
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
            if rec.trace is not None:
                traces.append(Trace(
                    torch_ops=rec.trace.torch_ops, triton_launches=rec.trace.triton_launches,
                    device_kernels=[KernelTime(name=k.name, kind="unknown", device_us=k.device_us,
                                               calls=k.calls) for k in rec.trace.device_kernels]))
        trace = _merge_traces(traces) if traces else None
        findings: list[Finding] = list(problem_findings)
        if trace is not None:
            dyn, trace = tracer.judge(trace, own_kernels)
            findings += dyn
        verdict = worst(verdicts)
        if verdict == Verdict.PASSED:
            by_findings = finding_verdict(static + findings)
            if by_findings is not None:
                verdict = by_findings
                decisive = [f.message for f in static + findings
                            if f.severity not in (Severity.INFO, Severity.WARNING)]
                details.append("; ".join(decisive)[:600])
            else:
                details.append(f"correct on {len(shape_cases)} hidden input sets")
        elif (tampered := finding_verdict(findings)) == Verdict.TAMPERING:
            verdict = tampered
        results.append(_shape_result(shape, verdict, "; ".join(details)[:1000],
                                     error_excerpt=excerpt or (logs if verdict in (
                                         Verdict.RUNTIME_ERROR,) else None),
                                     comparisons=comparisons, trace=trace, findings=findings))
    return results
