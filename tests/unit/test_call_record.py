"""The judge of every call's record (detect.dynamic.judge_calls and the timed calls' share),
fed the records an H200 gave the harness's own recorder (bench/record_check.py scenarios,
2026-12-02, docs/data/h200-2026-12-02-session8/call1/scenarios.json; docs/benchmarks.md).

The scenarios: honest Triton adds (32 MiB, 4K elements), an entry that runs its own Triton GEMM
while it believes it is watched and cuBLAS after (issue 17, class 1), a sum computed on the
host behind synchronising copies (class 3), and a Triton add on a stream of its own.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from grader.detect.detector import Detector
from grader.detect.dynamic import CallEvidence, judge_calls
from grader.detect.policy import load_policy
from grader.model.findings import Severity
from grader.model.results import KernelTime, Trace
from grader.paths import REPO

RECORD = REPO / "docs" / "data" / "h200-2026-12-02-session8" / "call1" / "scenarios.json"
OWN = {"add_k", "mm_k"}


@pytest.fixture(scope="module")
def runs() -> dict[str, list[dict[str, Any]]]:
    data = json.loads(RECORD.read_text())
    assert data["consistent"]  # the spins bracketed every call
    return data["runs"]  # type: ignore[no-any-return]


def _evidence(calls: list[dict[str, Any]], **kw: Any) -> CallEvidence:
    base: dict[str, Any] = dict(
        per_call_ops=[], timed_ops={}, timed_calls=len(calls), launch_arg_types={},
        array_exports={}, outside_ops={}, output_elements=1 << 20,
        device_us=[c["device_us"] for c in calls],
        covered_us=[c["covered_us"] for c in calls],
        busy_us=[sum(k["device_us"] for k in c["kernels"]) for c in calls])
    return CallEvidence(**{**base, **kw})


def _share(calls: list[dict[str, Any]]) -> tuple[list[str], float | None]:
    """The DSL share over the calls' kernels, as the host computes it for the timed calls."""
    totals: dict[str, list[float]] = {}
    for c in calls:
        for k in c["kernels"]:
            acc = totals.setdefault(k["name"], [0.0, 0])
            acc[0] += k["device_us"]
            acc[1] += k["calls"]
    trace = Trace(torch_ops={}, triton_launches={"x": 1}, device_kernels=[
        KernelTime(name=n, kind="unknown", device_us=us, calls=int(c))
        for n, (us, c) in totals.items()])
    findings, judged = Detector(policy=load_policy("triton")).judge(trace, OWN)
    return [f.rule for f in findings], judged.dsl_share


def test_honest_calls_are_covered_and_native(runs: dict[str, Any]) -> None:
    policy = load_policy("triton")
    for name in ("honest_32MiB", "honest_4K"):
        findings, covered = judge_calls(_evidence(runs[name]), policy)
        assert findings == [], name
        assert covered is not None and covered > 0.1
        assert _share(runs[name]) == ([], 1.0)


def test_vendor_kernels_in_the_timed_calls_are_seen(runs: dict[str, Any]) -> None:
    calls = runs["switch"]
    assert all(k["name"] == "mm_k" for c in calls[:3] for k in c["kernels"])
    assert any(k["name"].startswith("nvjet_") for c in calls[3:] for k in c["kernels"])
    rules, share = _share(calls)
    assert "DY003" in rules and share is not None and share < 0.5


def test_host_work_behind_copies_is_not_the_entrys(runs: dict[str, Any]) -> None:
    rules, share = _share(runs["host"])
    # Copies to and from the host are host_copy: counted against the share, not ignored.
    assert "DY003" in rules and share is not None and share < 0.01


def test_work_off_the_timed_stream_is_tampering(runs: dict[str, Any]) -> None:
    findings, _ = judge_calls(_evidence(runs["side_stream"]), load_policy("triton"))
    assert [f.rule for f in findings] == ["TM917"]
    assert findings[0].severity == Severity.TAMPERING


def test_time_no_kernel_explains_is_a_fallback() -> None:
    """A call whose events measured far more device time than its kernels covered: a
    synchronising wait on host work (hand-made figures in the shape of the H200's)."""
    calls = [{"device_us": 900.0, "covered_us": 30.0, "kernels": [
        {"name": "add_k", "device_us": 30.0, "calls": 1}]}] * 5
    findings, covered = judge_calls(_evidence(calls), load_policy("triton"))
    assert [f.rule for f in findings] == ["TM915"] and covered == pytest.approx(1 / 30)
    assert findings[0].severity == Severity.FALLBACK


def test_a_missing_or_inconsistent_record_is_tampering() -> None:
    policy = load_policy("triton")
    calls = [{"device_us": 10.0, "covered_us": 9.0, "kernels": []}]
    findings, _ = judge_calls(_evidence(calls, covered_us=None), policy)
    assert [f.rule for f in findings] == ["TM916"]
    findings, _ = judge_calls(_evidence(calls, record_problem="12 bracketing spins on the "
                                        "device for 4 calls"), policy)
    assert [f.rule for f in findings] == ["TM916"]
    assert "12 bracketing spins" in findings[0].message


def test_element_loops_exports_and_stand_ins() -> None:
    policy = load_policy("triton")
    loop = {"aten.select": 3000, "aten._local_scalar_dense": 2000, "aten.fill_": 1000}
    ev = CallEvidence(per_call_ops=[loop, {"aten.empty_like": 1}], timed_ops={},
                      timed_calls=0, launch_arg_types={"_Lazy": 1},
                      array_exports={"numpy": 2}, outside_ops={"aten.mm": 1},
                      output_elements=1000, device_us=[], covered_us=None)
    findings, covered = judge_calls(ev, policy)
    assert covered is None  # a CPU: no device time to account for
    assert sorted(f.rule for f in findings) == ["DY005", "DY006", "DY007", "DY008"]
    # A few scalar reads are not a loop.
    few = CallEvidence(per_call_ops=[{"aten.select": 4, "aten._local_scalar_dense": 2}],
                       timed_ops={}, timed_calls=0, launch_arg_types={}, array_exports={},
                       outside_ops={}, output_elements=4099, device_us=[], covered_us=None)
    assert judge_calls(few, policy) == ([], None)
