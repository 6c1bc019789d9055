"""Turn what came back from the containers into verdicts. Pure: no Docker, no files written.

The entry's own reports (its result.json, its trace) are evidence, weighed here; the outputs
are compared with the reference's by the host (compare.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

from grader.detect.dynamic import CallEvidence, verdict_for
from grader.formats.problem import Problem, Shape
from grader.harness.protocol import EXPECTED, OUTPUTS
from grader.judge.entry_import import import_failure
from grader.judge.interpreter import bf16_limit, interpreter_limit, unverified_detail
from grader.judge.outputs import compare, shared_from
from grader.judge.timing import judge_timing
from grader.model.channel import check_outputs
from grader.model.evidence import OutDir, ResultFile, TraceRecord
from grader.model.findings import Finding, Layer, Severity
from grader.model.results import Comparison, KernelTime, ShapeResult, Timing, Trace
from grader.model.runs import Case, Evidence, computed
from grader.model.timed import TimedPlan
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


def reference_failure(ref: Evidence, cases: list[Case]
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


def _container_failure(run: Evidence) -> tuple[Verdict, str] | None:
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
        return Verdict.COMPILE_ERROR, import_failure(ready.error)
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


def judge_problem(*, problem: Problem, shapes: list[Shape], cases: list[Case],
                  reference: Evidence, entry: Evidence, static: list[Finding],
                  own_kernels: set[str], tracer: TraceJudge, max_output_bytes: int,
                  interpreter: bool = False, source: str = "",
                  plans: Mapping[str, TimedPlan] | None = None,
                  topup: Evidence | None = None) -> list[ShapeResult]:
    """Each shape's result. `interpreter`: the entry ran on Triton's CPU interpreter, whose
    limits make a case `unverified` rather than a runtime error (judge/interpreter.py);
    `source`: the entry's kernel file; `plans`: each timed shape's plan as the entry got it
    (model/timed.py), which says which of its timed calls are checked; `topup`: the
    reference's run on the checked timed calls its first run left to compute
    (model.runs.reached_uncomputed), where their expected samples are."""
    check_outputs(entry.out)  # the files against their sent digests, here beside the GPU
    problem_findings = _anomaly_findings(entry.out)
    whole = _whole_run(shapes, entry, problem_findings)
    if whole is not None:
        return whole
    j = _Judging(problem=problem, reference=reference, entry=entry, static=static,
                 own_kernels=own_kernels - _foreign(entry), tracer=tracer,
                 max_output_bytes=max_output_bytes,
                 interpreter=interpreter, source=source, findings=problem_findings,
                 logs=tail(entry.exit.logs), plans=dict(plans or {}), topup=topup)
    return [_judge_shape(j, shape, [c for c in cases if c.shape.id == shape.id])
            for shape in shapes]


def _foreign(entry: Evidence) -> set[str]:
    """Names of Triton kernels the entry's run launched through Triton code not defined in
    its own file (a library's, a compiler's): never its own work, even under a name its
    source defines too (issue 31)."""
    result = entry.out.result
    if result is None:
        return set()
    records = [result.outside, *(c.trace for c in result.cases.values()),
               *(t.trace for t in result.timings.values())]
    return {name for r in records if r is not None for name in r.foreign_triton}


def _whole_run(shapes: list[Shape], entry: Evidence, findings: list[Finding]
               ) -> list[ShapeResult] | None:
    """One verdict for every shape when the run as a whole cannot be judged case by case:
    its output folder or channel was tampered with (unless it timed out), or its container
    failed."""
    forged = [f for f in findings if f.severity == Severity.TAMPERING]
    logs = tail(entry.exit.logs)
    if forged and not entry.exit.timed_out:
        results = whole_problem(shapes, Verdict.TAMPERING, forged[0].message[:1000], logs)
        return [r.model_copy(update={"findings": forged}) for r in results]
    failure = _container_failure(entry)
    if failure is not None:
        verdict, detail = failure
        ready_error = entry.out.ready.error if entry.out.ready else None
        return whole_problem(shapes, verdict, detail, tail(ready_error) if ready_error else logs)
    return None


@dataclass(frozen=True, kw_only=True)
class _Judging:
    """What every shape of one entry run is judged against."""

    problem: Problem
    reference: Evidence
    entry: Evidence
    static: list[Finding]
    own_kernels: set[str]
    tracer: TraceJudge
    max_output_bytes: int
    interpreter: bool
    source: str
    findings: list[Finding]  # the output folder's and channel's (warnings by now)
    logs: str | None
    plans: dict[str, TimedPlan]
    topup: Evidence | None

    @property
    def result(self) -> ResultFile:
        assert self.entry.out.result is not None  # _whole_run said so
        return self.entry.out.result

    @cached_property
    def computed(self) -> set[str]:
        """The cases the reference's run computed (the rest: the top-up's)."""
        return computed(self.reference.out.result)

    def expected(self, case: Case) -> list[Any] | str:
        ref = self.reference
        if self.topup is not None and case.id not in self.computed:
            ref = self.topup
        return ref.out.load_tensors(case.id, EXPECTED, self.max_output_bytes * 8,
                                    shared_from())

    def actual(self, case: Case) -> list[Any] | str:
        return self.entry.out.load_tensors(case.id, OUTPUTS, self.max_output_bytes,
                                           shared_from())


@dataclass
class _Shape:
    """One shape's judgment as its cases add to it."""

    verdicts: list[Verdict] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    comparisons: list[Comparison] = field(default_factory=list)
    records: list[TraceRecord] = field(default_factory=list)  # the correctness calls'
    elements: int = 0  # of the expected outputs (the first case's)
    excerpt: str | None = None  # the first error's

    def add(self, verdict: Verdict, detail: str | None = None, excerpt: str | None = None
            ) -> None:
        self.verdicts.append(verdict)
        if detail is not None:
            self.details.append(detail)
        self.excerpt = self.excerpt or excerpt


def _judge_shape(j: _Judging, shape: Shape, cases: list[Case]) -> ShapeResult:
    """The shape's correctness cases, its timed loop and the findings on all of its calls."""
    checked = [c for c in cases if not c.timing]
    st = _Shape()
    for case in checked:
        _judge_case(j, case, st)
    timing, findings = _judge_timed(j, shape, [c for c in cases if c.timing], st)
    findings = [*j.findings, *findings]
    dyn, trace, covered = _dynamic(j.result, shape.id, st.records, st.elements, j.own_kernels,
                                   j.tracer, timed=timing is not None)
    findings += dyn
    if timing is not None and covered is not None:
        timing = timing.model_copy(update={"covered_share": min(max(covered, 0.0), 1.0)})
    verdict = _decide(st, j.static + findings, len(checked))
    return _shape_result(shape, verdict, "; ".join(st.details)[:1000],
                         error_excerpt=st.excerpt or (j.logs if verdict in (
                             Verdict.RUNTIME_ERROR,) else None),
                         comparisons=st.comparisons, trace=trace, findings=findings,
                         timing=timing if verdict in _TIMED else None,
                         reference_timing=judge_timing(j.reference, shape)[0])


def _judge_case(j: _Judging, case: Case, st: _Shape) -> None:
    """One correctness case: the entry's record of the call and its outputs against the
    reference's."""
    rec = j.result.cases.get(case.id)
    expected = j.expected(case)
    if isinstance(expected, str):
        st.add(Verdict.INFRA_ERROR, f"reference: {expected}")
        return
    if rec is None:
        st.add(Verdict.TAMPERING, f"case {case.id}: missing from the entry's result file")
        return
    # Every call's record counts, a failed or wrong one's too: a violation is one whatever
    # the outputs were (the verdict rules in _decide weigh it).
    st.elements = st.elements or sum(int(getattr(t, "numel", lambda: 0)()) for t in expected)
    if rec.trace is not None:
        st.records.append(rec.trace)
    if not rec.ok:
        err = rec.error or ""
        why = interpreter_limit(err, j.source) if j.interpreter else None
        if why is not None:
            st.add(Verdict.UNVERIFIED, unverified_detail(case.id, why), tail(err))
            return
        limited = hit_limit(err)
        st.add(Verdict.RESOURCE_LIMIT if limited else Verdict.RUNTIME_ERROR,
               f"case {case.id}: " + ("a resource limit was hit" if limited
                                      else "kernel() raised"), tail(err))
        return
    actual = j.actual(case)
    if isinstance(actual, str):
        st.add(Verdict.RUNTIME_ERROR, actual)
        return
    outcome = compare(expected, actual, j.problem)
    st.comparisons.append(outcome.comparison)
    bf16 = (bf16_limit(rec.trace.interpreter_bf16) if j.interpreter and not outcome.ok
            and rec.trace is not None else None)
    if bf16 is not None:
        st.add(Verdict.UNVERIFIED, unverified_detail(case.id, f"{bf16}; {outcome.detail}"))
    elif not outcome.ok:
        st.add(Verdict.INCORRECT, f"seed {case.seed % 10000:04d}…: {outcome.detail}")
    else:
        st.add(Verdict.PASSED)


def _judge_timed(j: _Judging, shape: Shape, timed: list[Case], st: _Shape
                 ) -> tuple[Timing | None, list[Finding]]:
    """The shape's timed loop: its timing and findings, and its checked calls, whose outputs'
    samples must match the reference's on the same fresh inputs. A wrong or missing one is
    `incorrect`: the entry's output was wrong on a hidden input, and a time it did not earn
    is never a score (docs/detection.md, "Fresh inputs")."""
    timing, findings, error = judge_timing(j.entry, shape)
    if error is not None:
        st.add(Verdict.RUNTIME_ERROR, "the timed loop failed", tail(error))
    plan = j.plans.get(shape.id)
    if timing is None or plan is None:
        return timing, findings
    by_id = {c.id: c for c in timed}
    checked = [by_id[cid] for cid in plan.checked(timing.samples) if cid in by_id]
    for n, case in enumerate(checked):
        expected, actual = j.expected(case), j.actual(case)
        if isinstance(expected, str):
            st.add(Verdict.INFRA_ERROR, f"reference: {expected}")
            return timing, findings
        outcome = None if isinstance(actual, str) else compare(expected, actual, j.problem)
        if outcome is None or not outcome.ok:
            which = "the last" if n == len(checked) - 1 else f"a checked ({case.id})"
            why = actual if isinstance(actual, str) else outcome.detail if outcome else ""
            st.add(Verdict.INCORRECT, f"{which} timed call's output is wrong or missing, "
                                      f"one of {len(checked)} checked: {why}"[:600])
            break
    return timing, findings
def _decide(st: _Shape, findings: list[Finding], checked: int) -> Verdict:
    """The shape's verdict: the worst of its cases', then the findings'. Findings decide
    once the entry ran to the end: a policy violation or tampering whatever its outputs were,
    a fallback only when they were correct."""
    verdict = worst(st.verdicts)
    by_findings = verdict_for(findings)
    if by_findings is not None and (verdict == Verdict.PASSED or by_findings in (
            Verdict.POLICY_VIOLATION, Verdict.TAMPERING)):
        decisive = [f.message for f in findings
                    if f.severity not in (Severity.INFO, Severity.WARNING)]
        st.details.append("; ".join(decisive)[:600])
        return worst([verdict, by_findings])
    if verdict == Verdict.PASSED:
        # "input sets", not "hidden input sets": a practice run says so too, and hides
        # nothing (issue 34); each set is drawn from the run's secret seed.
        st.details.append(f"correct on {checked} input sets drawn from the run's secret seed")
    return verdict
