"""The trace judge: what ran during kernel(), weighed against the policy.

The trace comes from inside the entry's container, so it is evidence, not a verdict: this
module only turns it into findings and a DSL share. It never sees entry code. The classifier
that names each device kernel's kind lives elsewhere; here kinds are taken as given.
"""

from __future__ import annotations

from dataclasses import dataclass

from grader.detect.policy import Policy
from grader.model.findings import Finding, Layer, Severity
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


# --- the record of every call (issue 17) -----------------------------------------------------

# Ops a Python loop over elements dispatches: reading one (select, item), writing one (fill_,
# copy_ into a selected view), making a scalar tensor (lift_fresh).
ELEMENT_OPS = ("aten.select", "aten.slice", "aten._local_scalar_dense", "aten.item",
               "aten.fill_", "aten.copy_", "aten.index", "aten.index_put_", "aten.unbind",
               "aten.lift_fresh")
ELEMENT_FLOOR = 64  # element ops a call may make whatever the problem's size
ELEMENT_SHARE = 0.25  # ... and beyond that, a quarter of the output's elements
# Time accounting: a shape's timed calls must have a recorded kernel running for most of their
# event-timed device time. The honest gaps are the launch of each kernel after the spin and
# the end event after the last one: a few µs (H200, 2026-12-02, docs/benchmarks.md).
UNCOVERED_SHARE = 0.5
UNCOVERED_MIN_US = 20.0
# The other way round: kernels of a call that ran for far longer than its events measured
# (seen on the H200, 2026-12-02: a Triton add on a stream of its own, 27 µs of kernel under
# 1.3 µs of events). CUPTI's kernel times run a little under the events' (26.1 against 28.5 µs
# for an honest 32 MiB add), so the bound is loose.
BUSY_FACTOR = 1.5
BUSY_SLACK_US = 5.0


@dataclass(frozen=True, kw_only=True)
class CallEvidence:
    """What one shape's calls recorded, as the judge needs it (taken from the evidence)."""

    per_call_ops: list[dict[str, int]]  # one per correctness call
    timed_ops: dict[str, int]  # summed over the timed calls
    timed_calls: int
    launch_arg_types: dict[str, int]  # over every call of the shape
    array_exports: dict[str, int]  # over every call of the shape and outside them
    outside_ops: dict[str, int]  # the entry's ops outside its calls
    output_elements: int  # elements of the reference's outputs for one call
    device_us: list[float]  # the timed calls' event times (empty on a CPU)
    covered_us: list[float] | None  # per timed call; None: no device record came back
    busy_us: list[float] | None = None  # per timed call: its kernels' time, wherever it fell
    record_problem: str | None = None  # the device record could not be split into calls


def judge_calls(ev: CallEvidence, policy: Policy) -> tuple[list[Finding], float | None]:
    """Findings from the record of every call of one shape, and the median share of the timed
    calls' device time that recorded kernels covered (None on a CPU)."""
    findings: list[Finding] = []
    if ev.launch_arg_types:
        listed = ", ".join(f"{name} x{n}" for name, n in sorted(ev.launch_arg_types.items()))
        findings.append(_finding(policy, "DY005", "a Triton launch got arguments that are not "
                                 f"plain tensors, scalars or Triton types: {listed}"))
    if ev.array_exports:
        listed = ", ".join(f"{name} x{n}" for name, n in sorted(ev.array_exports.items()))
        findings.append(_finding(policy, "DY006", f"tensor memory was handed out: {listed}"))
    per_call = [sum(n for op, n in ops.items() if op in ELEMENT_OPS) for ops in ev.per_call_ops]
    if ev.timed_calls:
        per_call.append(sum(n for op, n in ev.timed_ops.items() if op in ELEMENT_OPS)
                        // ev.timed_calls)
    worst = max(per_call, default=0)
    if worst > max(ELEMENT_FLOOR, ELEMENT_SHARE * ev.output_elements):
        findings.append(_finding(policy, "DY007", f"one call made {worst} single-element reads "
                                 f"and writes for {ev.output_elements} output elements"))
    outside = {op: n for op, n in ev.outside_ops.items() if n > 0 and not policy.allows_aten(op)}
    if outside:
        listed = ", ".join(f"{op} x{n}" for op, n in sorted(outside.items(), key=_by_count)[:8])
        findings.append(_finding(policy, "DY008", f"outside its calls: {listed}"))
    if not ev.device_us:
        return findings, None
    if ev.record_problem or ev.covered_us is None or len(ev.covered_us) != len(ev.device_us):
        why = ev.record_problem or "no per-call record of the timed calls"
        findings.append(_finding(policy, "TM916", f"the timed calls' device record: {why}"))
        return findings, None
    pairs = [(d, min(max(c, 0.0), d)) for d, c in zip(ev.device_us, ev.covered_us, strict=True)
             if d > 0]
    if not pairs:
        return findings, None
    uncovered = _median([d - c for d, c in pairs])
    device = _median([d for d, _c in pairs])
    covered_share = _median([c / d for d, c in pairs])
    if ev.busy_us and len(ev.busy_us) == len(ev.device_us):
        busy = _median(list(ev.busy_us))
        if busy > BUSY_FACTOR * device + BUSY_SLACK_US:
            findings.append(_finding(policy, "TM917", (
                f"in the median timed call its kernels ran {busy:.1f} µs where its events "
                f"measured {device:.1f} µs: work off the timed stream")))
    if uncovered > UNCOVERED_MIN_US and uncovered > UNCOVERED_SHARE * device:
        findings.append(_finding(policy, "TM915", (
            f"in the median timed call, {uncovered:.1f} of {device:.1f} µs of device time "
            "passed with no recorded kernel running: work the record cannot see")))
    return findings, covered_share


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
