"""The trace judge: what ran during kernel(), weighed against the policy.

The trace comes from inside the entry's container, so it is evidence, not a verdict: this
module only turns it into findings and a DSL share. It never sees entry code. The classifier
that names each device kernel's kind lives elsewhere; here kinds are taken as given.
"""

from __future__ import annotations

from grader.detect.findings import Finding, Layer, Severity
from grader.detect.policy import Policy
from grader.verdicts import Verdict

TOP_KERNELS = 5  # how many offending device kernels a DY003 message names

# Worst first: the severity that decides a shape's verdict.
_ORDER = (Severity.INFO, Severity.WARNING, Severity.FALLBACK, Severity.VIOLATION,
          Severity.TAMPERING)
_VERDICTS = {
    Severity.FALLBACK: Verdict.FALLBACK,
    Severity.VIOLATION: Verdict.POLICY_VIOLATION,
    Severity.TAMPERING: Verdict.TAMPERING,
}


def _finding(policy: Policy, rule: str, message: str) -> Finding:
    return Finding(rule=rule, severity=policy.severity_of(rule), layer=Layer.DYNAMIC,
                   message=message)


def judge_trace(
    torch_ops: dict[str, int],
    triton_launches: dict[str, int],
    device_kernels: list[tuple[str, str, float]],
    policy: Policy,
) -> tuple[list[Finding], float | None]:
    """Dynamic findings for one shape, and the DSL share of device time (None on CPU).

    torch_ops: aten overload packets ("aten.mm") -> calls, already without what Triton's own
    launcher or interpreter dispatched. triton_launches: jit function name -> launches.
    device_kernels: (name, kind, device_us) from the profiler, kind as the classifier says.
    """
    findings: list[Finding] = []
    compute = {op: n for op, n in torch_ops.items() if n > 0 and not policy.allows_aten(op)}
    if compute:
        listed = ", ".join(f"{op} x{n}" for op, n in sorted(compute.items(), key=_by_count))
        findings.append(_finding(policy, "DY001", f"PyTorch computed in kernel(): {listed}"))
    if sum(n for n in triton_launches.values() if n > 0) == 0:
        findings.append(_finding(policy, "DY002", "no kernel in the target DSL ran: no Triton "
                                 "launch was recorded during kernel()"))
    share = _share(device_kernels, policy)
    if share is None:
        return findings, None
    own_us = sum(us for _, kind, us in device_kernels if kind == "own_triton")
    if triton_launches and own_us == 0:
        findings.append(_finding(policy, "DY004", "Triton launches were reported but none of "
                                 "the entry's own Triton kernels ran on the device"))
    if share < policy.native_share_threshold:
        findings.append(_finding(policy, "DY003", _share_message(device_kernels, share, policy)))
    return findings, share


def _by_count(item: tuple[str, int]) -> tuple[int, str]:
    return -item[1], item[0]


def _counted(device_kernels: list[tuple[str, str, float]], policy: Policy
             ) -> list[tuple[str, str, float]]:
    return [k for k in device_kernels if k[1] not in policy.share_ignores and k[2] > 0]


def _share(device_kernels: list[tuple[str, str, float]], policy: Policy) -> float | None:
    if not device_kernels:
        return None  # CPU (Triton's interpreter): no device time to share out
    counted = _counted(device_kernels, policy)
    total = sum(us for _, _, us in counted)
    if total <= 0:
        return 0.0
    own = sum(us for _, kind, us in counted if kind == "own_triton")
    return min(max(own / total, 0.0), 1.0)


def _share_message(device_kernels: list[tuple[str, str, float]], share: float,
                   policy: Policy) -> str:
    counted = _counted(device_kernels, policy)
    total = sum(us for _, _, us in counted)
    per_kernel: dict[tuple[str, str], float] = {}
    for name, kind, us in counted:
        if kind != "own_triton":
            per_kernel[(name, kind)] = per_kernel.get((name, kind), 0.0) + us
    top = sorted(per_kernel.items(), key=lambda kv: -kv[1])[:TOP_KERNELS]
    # Kernel names come from the entry's run: cap them, renderers escape them.
    listed = "; ".join(f"{name[:120]} ({kind}, {us / total:.0%})" for (name, kind), us in top)
    return (f"the entry's own Triton kernels took {share:.1%} of device time, below the "
            f"policy's {policy.native_share_threshold:.0%}; the rest: {listed}")


def worst_severity(findings: list[Finding]) -> Severity | None:
    if not findings:
        return None
    return max((f.severity for f in findings), key=_ORDER.index)


def verdict_for(findings: list[Finding]) -> Verdict | None:
    """The verdict the worst finding forces (fallback, policy_violation, tampering), if any."""
    worst = worst_severity(findings)
    return _VERDICTS.get(worst) if worst is not None else None


def is_native(findings: list[Finding]) -> bool:
    """True when no finding, static or dynamic, stops a correct shape from being `passed`."""
    return verdict_for(findings) is None
