"""judge.py without Docker: hand-made container evidence (the real path is in integration)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from grader.formats.problem import Problem, Shape
from grader.harness import tensors
from grader.judge.problem import judge_problem
from grader.model.evidence import Anomaly, CaseRecord, OutDir, ReadyFile, ResultFile, TimingRecord
from grader.model.results import Trace
from grader.model.runs import Case, Evidence, ExitState
from grader.verdicts import Verdict

PROBLEM = Problem(id="add", operator="add", dtypes=["float32"], flops="n", bytes="12*n",
                  shapes=[Shape(id="s", params={"n": 8}, phase="decode")])
SHAPE = PROBLEM.shapes[0]
READY = ReadyFile(ok=True)


class NoDetection:
    def judge(self, trace: Trace, own_kernels: set[str]):  # type: ignore[no-untyped-def]
        return [], trace

    def judge_calls(self, evidence):  # type: ignore[no-untyped-def]
        return [], None


def _exit(**kw: object) -> ExitState:
    base = {"exit_code": 0, "timed_out": False, "oom_killed": False, "wall_s": 3.0,
            "logs": "", "logs_truncated": False}
    return ExitState(**{**base, **kw})  # type: ignore[arg-type]


def _runs(tmp: Path, out: torch.Tensor | None, *, ok: bool = True, exit_kw: dict | None = None,
          ready: ReadyFile | None = READY, result: bool = True,
          timing: TimingRecord | None = None, timed: bool = False
          ) -> tuple[list[Case], Evidence, Evidence]:
    x = torch.arange(8, dtype=torch.float32)
    cases = [Case(id="s.0", shape=SHAPE, seed=1)]
    if timed:
        cases.append(Case(id="s.t0", shape=SHAPE, seed=2, timing=True))
    ref = OutDir(result=ResultFile(cases={c.id: CaseRecord(ok=True) for c in cases}))
    ent = OutDir(ready=ready)
    for c in cases:
        tensors.save(tmp / f"{c.id}.ref", [x + x])
        ref.tensor_files[(c.id, "ref")] = tmp / f"{c.id}.ref"
        if out is not None:
            tensors.save(tmp / f"{c.id}.out", [out])
            ent.tensor_files[(c.id, "out")] = tmp / f"{c.id}.out"
    if result:
        ent.result = ResultFile(cases={"s.0": CaseRecord(ok=ok, error=None if ok else "boom")},
                                timings={"s": timing} if timing else {})
    return (cases, Evidence(exit=_exit(), out=ref),
            Evidence(exit=_exit(**(exit_kw or {})), out=ent))


def _judge(cases: list[Case], ref: Evidence, ent: Evidence) -> Verdict:
    res = judge_problem(problem=PROBLEM, shapes=[SHAPE], cases=cases, reference=ref, entry=ent,
                        static=[], own_kernels=set(), tracer=NoDetection(),
                        max_output_bytes=1 << 20)
    return res[0].verdict


def test_correct_output_passes(tmp_path: Path) -> None:
    assert _judge(*_runs(tmp_path, torch.arange(8.0) * 2)) == Verdict.PASSED


def test_wrong_output_is_incorrect(tmp_path: Path) -> None:
    assert _judge(*_runs(tmp_path, torch.arange(8.0))) == Verdict.INCORRECT


def test_container_states_map_to_verdicts(tmp_path: Path) -> None:
    good = torch.arange(8.0) * 2
    assert _judge(*_runs(tmp_path, good, exit_kw={"timed_out": True, "exit_code": None})
                  ) == Verdict.TIMEOUT
    assert _judge(*_runs(tmp_path, good, exit_kw={"oom_killed": True, "exit_code": 137})
                  ) == Verdict.RESOURCE_LIMIT
    assert _judge(*_runs(tmp_path, None, ready=ReadyFile(ok=False, error="SyntaxError"))
                  ) == Verdict.COMPILE_ERROR
    assert _judge(*_runs(tmp_path, None, ready=None)) == Verdict.RUNTIME_ERROR
    assert _judge(*_runs(tmp_path, None, result=False)) == Verdict.RUNTIME_ERROR
    assert _judge(*_runs(tmp_path, None, ok=False)) == Verdict.RUNTIME_ERROR


def test_symlink_in_output_is_tampering(tmp_path: Path) -> None:
    cases, ref, ent = _runs(tmp_path, torch.arange(8.0) * 2)
    ent.out.anomalies.append(Anomaly("1 symlink(s) in the output directory (e.g. 'x')", True))
    assert _judge(cases, ref, ent) == Verdict.TAMPERING


def test_timing_is_summarised_and_cross_checked(tmp_path: Path) -> None:
    good = torch.arange(8.0) * 2
    rec = TimingRecord(ok=True, device_us=[10.0, 11.0, 12.0, 13.0], host_us=[20.0] * 4,
                       method="cuda-events", flush_bytes=256 << 20)
    cases, ref, ent = _runs(tmp_path, good, timing=rec, timed=True)
    res = judge_problem(problem=PROBLEM, shapes=[SHAPE], cases=cases, reference=ref, entry=ent,
                        static=[], own_kernels=set(), tracer=NoDetection(),
                        max_output_bytes=1 << 20)[0]
    assert res.verdict == Verdict.PASSED and res.timing is not None
    assert res.timing.median_us == 11.5 and res.timing.samples == 4
    assert res.timing.flush_bytes == 256 << 20  # evidence, kept for the report
    assert abs(res.timing.iqr_us - 1.5) < 1e-9
    # samples that sum to more than the container ran are impossible: tampering
    huge = TimingRecord(ok=True, device_us=[5e6, 5e6], method="cuda-events")
    assert _judge(*_runs(tmp_path, good, timing=huge, timed=True)) == Verdict.TAMPERING
    # A NaN sample never gets this far: the evidence model refuses it (evidence.py), and a
    # result the host cannot read is tampering.
    with pytest.raises(ValueError):
        TimingRecord(ok=True, device_us=[float("nan"), 3.0], method="cuda-events")


def test_the_l2_flush_is_twice_the_devices_l2_at_least() -> None:
    from grader.harness.timing import flush_bytes

    h200_l2, larger = 50 << 20, 192 << 20  # the H200's L2, and one larger than 128 MiB
    assert flush_bytes(256 << 20, h200_l2) == 256 << 20  # the configured size is enough
    assert flush_bytes(256 << 20, larger) == 2 * larger
    assert flush_bytes(0, 0) == 1 << 20  # no size reported: 1 MiB still
