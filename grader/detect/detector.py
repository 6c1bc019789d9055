"""The detection layer as the grading loop sees it: a policy, the static analysis of a file,
and the judge of what ran (kernel attribution + the policy's rules)."""

from __future__ import annotations

from dataclasses import dataclass

from grader.detect.dynamic import CallEvidence, judge_calls, judge_trace
from grader.detect.kernels import classify
from grader.detect.policy import Policy
from grader.detect.static import analyze, jit_function_names
from grader.model.findings import Finding
from grader.model.results import KernelTime, Trace


@dataclass(frozen=True, kw_only=True)
class Detector:
    policy: Policy

    def static(self, source: str, filename: str,
               entry: tuple[str, ...] | None = ("kernel",)) -> list[Finding]:
        """`entry`: what the harness calls (Problem.entry_names()); None guesses."""
        return analyze(source, filename, self.policy, entry)

    def own_kernels(self, source: str) -> set[str]:
        return jit_function_names(source, self.policy)

    def judge(self, trace: Trace, own_kernels: set[str]) -> tuple[list[Finding], Trace]:
        kernels = [KernelTime(name=k.name, kind=str(classify(k.name, own_kernels)),
                              device_us=k.device_us, calls=k.calls) for k in trace.device_kernels]
        # The share excludes what the policy ignores (e.g. copies), as the DY003 decision does.
        findings, share = judge_trace(trace.torch_ops, trace.triton_launches,
                                      [(k.name, k.kind, k.device_us) for k in kernels],
                                      self.policy)
        return findings, trace.model_copy(update={"device_kernels": kernels, "dsl_share": share})

    def judge_calls(self, evidence: CallEvidence) -> tuple[list[Finding], float | None]:
        return judge_calls(evidence, self.policy)
