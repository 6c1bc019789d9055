"""The trace judge: torch ops, Triton launches and device-kernel time against the policy."""

from __future__ import annotations

import pytest

from grader.detect.dynamic import is_native, judge_trace, verdict_for, worst_severity
from grader.detect.policy import load_policy
from grader.model.findings import Finding, Layer, Severity
from grader.verdicts import Verdict

TRITON = load_policy("triton")
STRICT = load_policy("triton-strict")
HONEST_OPS = {"aten.empty_like": 1, "aten.view": 2, "aten.stride": 0}
LAUNCHES = {"_add_kernel": 1}


def rules(findings: list[Finding]) -> list[str]:
    return [f.rule for f in findings]


def test_honest_gpu_trace() -> None:
    kernels = [("_add_kernel", "own_triton", 12.0), ("Memset (Device)", "copy", 1.0)]
    findings, share = judge_trace(HONEST_OPS, LAUNCHES, kernels, TRITON)
    assert findings == [] and share == 1.0
    assert is_native(findings) and verdict_for(findings) is None


def test_cpu_trace_has_no_share() -> None:
    findings, share = judge_trace(HONEST_OPS, LAUNCHES, [], TRITON)
    assert findings == [] and share is None


def test_compute_ops_are_a_fallback_with_counts() -> None:
    ops = {**HONEST_OPS, "aten.mm": 3, "aten._softmax.default": 1}
    findings, _ = judge_trace(ops, LAUNCHES, [], TRITON)
    [f] = findings
    assert f.rule == "DY001" and f.severity is Severity.FALLBACK and f.layer is Layer.DYNAMIC
    assert "aten.mm x3" in f.message and "aten._softmax.default x1" in f.message
    assert f.file is None and f.line is None
    assert verdict_for(findings) is Verdict.FALLBACK and not is_native(findings)


def test_copies_depend_on_the_policy() -> None:
    ops = {"aten.empty_like": 1, "aten.clone": 1, "aten._to_copy": 1, "aten.zeros": 1}
    assert judge_trace(ops, LAUNCHES, [], TRITON)[0] == []
    [f] = judge_trace(ops, LAUNCHES, [], STRICT)[0]
    assert f.rule == "DY001" and "aten.clone" in f.message and "aten.empty_like" not in f.message


def test_custom_op_namespaces_are_compute() -> None:
    findings, _ = judge_trace({"vllm._C.silu_and_mul": 1}, LAUNCHES, [], TRITON)
    assert rules(findings) == ["DY001"]


def test_no_triton_launch() -> None:
    for launches in ({}, {"_add_kernel": 0}):
        findings, _ = judge_trace({"aten.add": 1}, launches, [], TRITON)
        assert rules(findings) == ["DY001", "DY002"]
        assert "no kernel in the target DSL ran" in findings[1].message


def test_low_share_names_the_top_offenders() -> None:
    kernels = [
        ("_add_kernel", "own_triton", 5.0),
        ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", "vendor", 80.0),
        ("void at::native::vectorized_elementwise_kernel<4, ...>", "torch_native", 10.0),
        ("Memcpy DtoD (Device -> Device)", "copy", 500.0),
        ("mystery", "unknown", 5.0),
    ]
    findings, share = judge_trace(HONEST_OPS, LAUNCHES, kernels, TRITON)
    assert share == pytest.approx(0.05)  # copies ignored by `triton`
    [f] = findings
    assert f.rule == "DY003" and f.severity is Severity.FALLBACK
    assert "nvjet_tst_128x256" in f.message and "(vendor, 80%)" in f.message
    assert f.message.index("nvjet") < f.message.index("at::native")
    assert "Memcpy" not in f.message


def test_share_threshold_and_copies_under_strict() -> None:
    kernels = [("_add_kernel", "own_triton", 95.0), ("Memset (Device)", "copy", 5.0)]
    assert judge_trace(HONEST_OPS, LAUNCHES, kernels, TRITON) == ([], 1.0)
    findings, share = judge_trace(HONEST_OPS, LAUNCHES, kernels, STRICT)
    assert share == pytest.approx(0.95) and rules(findings) == ["DY003"]


def test_other_triton_kernels_count_against() -> None:
    kernels = [("_add_kernel", "own_triton", 10.0), ("triton_poi_fused_mm_0", "other_triton", 90.0)]
    findings, share = judge_trace(HONEST_OPS, LAUNCHES, kernels, TRITON)
    assert share == pytest.approx(0.1) and rules(findings) == ["DY003"]


def test_launches_without_own_device_kernels() -> None:
    findings, share = judge_trace(HONEST_OPS, LAUNCHES, [("ampere_sgemm", "vendor", 9.0)], TRITON)
    assert share == 0.0 and rules(findings) == ["DY004", "DY003"]


def test_hostile_kernel_names_are_capped() -> None:
    kernels = [("_k", "own_triton", 1.0), ("x" * 10_000, "unknown", 99.0)]
    [f] = judge_trace(HONEST_OPS, LAUNCHES, kernels, TRITON)[0]
    assert len(f.message) < 400


def _f(sev: Severity) -> Finding:
    return Finding(rule="FB001", severity=sev, layer=Layer.STATIC, message="m")


@pytest.mark.parametrize(
    ("severities", "verdict"),
    [
        ([], None),
        ([Severity.INFO, Severity.WARNING], None),
        ([Severity.WARNING, Severity.FALLBACK], Verdict.FALLBACK),
        ([Severity.FALLBACK, Severity.VIOLATION], Verdict.POLICY_VIOLATION),
        ([Severity.TAMPERING, Severity.VIOLATION, Severity.INFO], Verdict.TAMPERING),
    ],
)
def test_verdict_for_worst_severity(severities: list[Severity], verdict: Verdict | None) -> None:
    findings = [_f(s) for s in severities]
    assert verdict_for(findings) is verdict
    assert is_native(findings) is (verdict is None)
    if severities:
        assert worst_severity(findings) is max(severities, key=list(Severity).index)
