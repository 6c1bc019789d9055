"""Issue 23: honest verdicts. A reference that raises is reference_error (the suite's fault),
one stopped from outside infra_error; Triton's CPU-interpreter limits make a case
unverified, while look-alike ordinary errors stay runtime_error; a violation beside a runtime
error shows both; the new verdicts are counted apart by scoring, gates and leaderboards."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from grader.judge.interpreter import bf16_limit, interpreter_limit
from grader.judge.problem import judge_problem, reference_failure
from grader.model.evidence import CaseRecord, OutDir, ResultFile
from grader.model.findings import Finding, Layer, Severity
from grader.model.runs import Case, Evidence
from grader.scoring.leaderboard import COUNT_COLUMNS
from grader.scoring.metrics import funnel
from grader.verdicts import NOT_JUDGED, Verdict, worst
from tests.unit.test_judge import PROBLEM, SHAPE, NoDetection, _exit, _runs

# What Triton 3.9's interpreter raised for honest kernels (run here with TRITON_INTERPRET=1).
FLOAT_ARG = ('Traceback (most recent call last):\n  File "kernel.py", line 8, in k\n'
             "    e = eps.to(tl.float32)\nAttributeError: 'float' object has no attribute 'to'"
             "\n\ntriton.runtime.errors.InterpreterError: AttributeError(\"'float' object has "
             "no attribute 'to'\")")
LIBDEVICE = ('Traceback (most recent call last):\n  File "kernel.py", line 16, in k\n'
             "    t = tanh(v)\nTypeError: cannot convert None of type <class 'NoneType'> to "
             "tensor\n\ntriton.runtime.errors.InterpreterError: TypeError(\"cannot convert None"
             " of type <class 'NoneType'> to tensor\")")
LIBDEVICE_SOURCE = "from triton.language.extra import libdevice\ntanh = libdevice.tanh\n"
# Look-alikes: ordinary failures of the entry's own code.
HOST_NONE = ("Traceback (most recent call last):\n  File \"kernel.py\", line 20, in kernel\n"
             "TypeError: unsupported operand type(s) for +: 'NoneType' and 'int'")
KERNEL_BUG = ("triton.runtime.errors.InterpreterError: IndexError('index 70000 is out of "
              "bounds for axis 0 with size 16')")
NONE_WITHOUT_LIBDEVICE = ("triton.runtime.errors.InterpreterError: TypeError(\"unsupported "
                          "operand type(s) for +: 'NoneType' and 'float'\")")


@pytest.mark.parametrize(("error", "source", "limit"), [
    (FLOAT_ARG, "", True),
    (LIBDEVICE, LIBDEVICE_SOURCE, True),
    (LIBDEVICE, "import triton\n", False),  # no libdevice in the file: the entry's own None
    (HOST_NONE, LIBDEVICE_SOURCE, False),  # raised outside any kernel body
    (KERNEL_BUG, LIBDEVICE_SOURCE, False),
    (NONE_WITHOUT_LIBDEVICE, "", False),
    ("AttributeError: 'float' object has no attribute 'to'", "", False),  # host code
    (None, "", False),
])
def test_interpreter_limits_and_look_alikes(error: str | None, source: str, limit: bool
                                            ) -> None:
    assert (interpreter_limit(error, source) is not None) is limit


def _failing(tmp: Path, error: str, *, interpreter: bool, source: str = "",
             static: list[Finding] | None = None):  # type: ignore[no-untyped-def]
    cases, ref, ent = _runs(tmp, None, ok=False)
    assert ent.out.result is not None
    ent.out.result.cases["s.0"] = CaseRecord(ok=False, error=error)
    return judge_problem(problem=PROBLEM, shapes=[SHAPE], cases=cases, reference=ref,
                         entry=ent, static=static or [], own_kernels=set(),
                         tracer=NoDetection(), max_output_bytes=1 << 20,
                         interpreter=interpreter, source=source)[0]


def test_an_interpreter_limit_is_unverified_on_the_cpu_only(tmp_path: Path) -> None:
    got = _failing(tmp_path, FLOAT_ARG, interpreter=True)
    assert got.verdict is Verdict.UNVERIFIED
    assert "unverified on this host" in got.detail and "float" in got.detail
    assert got.error_excerpt and "InterpreterError" in got.error_excerpt
    # On a GPU the same text is the entry's runtime error.
    assert _failing(tmp_path, FLOAT_ARG, interpreter=False).verdict is Verdict.RUNTIME_ERROR


def test_an_ordinary_runtime_error_on_the_cpu_stays_runtime_error(tmp_path: Path) -> None:
    for error in (HOST_NONE, KERNEL_BUG, "ValueError: shapes differ"):
        got = _failing(tmp_path, error, interpreter=True, source=LIBDEVICE_SOURCE)
        assert got.verdict is Verdict.RUNTIME_ERROR, error


def test_a_violation_beside_a_runtime_error_shows_both(tmp_path: Path) -> None:
    violation = Finding(rule="ST101", severity=Severity.VIOLATION, layer=Layer.STATIC,
                        message="imports cupy, which the policy forbids")
    for error, verdict_alone in ((KERNEL_BUG, "kernel() raised"),
                                 (FLOAT_ARG, "unverified on this host")):
        got = _failing(tmp_path, error, interpreter=True, static=[violation])
        assert got.verdict is Verdict.POLICY_VIOLATION
        assert verdict_alone in got.detail and "imports cupy" in got.detail
        assert got.error_excerpt and "InterpreterError" in got.error_excerpt


def _reference(tmp: Path, *, error: str | None = None, **exit_kw: object
               ) -> tuple[Evidence, list[Case]]:
    cases, _, _ = _runs(tmp, None)
    result = None if error is None else ResultFile(cases={"s.0": CaseRecord(ok=False,
                                                                            error=error)})
    return Evidence(exit=_exit(**exit_kw), out=OutDir(result=result)), cases


def test_a_reference_that_raises_is_the_suites_fault(tmp_path: Path) -> None:
    ref, cases = _reference(tmp_path, error="Traceback (most recent call last):\n"
                            "RuntimeError: the organiser broke this")
    verdict, detail, excerpt = reference_failure(ref, cases)  # type: ignore[misc]
    assert verdict is Verdict.REFERENCE_ERROR and "suite" in detail
    assert excerpt and "organiser broke this" in excerpt
    # Dying on its import: a traceback in the logs, no result.
    ref, cases = _reference(tmp_path, exit_code=1, logs="Traceback (most recent call last):\n"
                            "ModuleNotFoundError: No module named 'nope'")
    assert reference_failure(ref, cases)[0] is Verdict.REFERENCE_ERROR  # type: ignore[index]


@pytest.mark.parametrize("exit_kw", [
    {"timed_out": True, "exit_code": None},
    {"oom_killed": True, "exit_code": 137},
    {"exit_code": 1, "logs": "Traceback (most recent call last):\nOSError: [Errno 28] "
                             "No space left on device"},
    {"exit_code": 137, "logs": ""},
])
def test_a_reference_stopped_from_outside_is_infra_error(tmp_path: Path,
                                                         exit_kw: dict[str, object]) -> None:
    ref, cases = _reference(tmp_path, **exit_kw)
    verdict, detail, _ = reference_failure(ref, cases)  # type: ignore[misc]
    assert verdict is Verdict.INFRA_ERROR and detail.startswith("the reference run failed")


def test_new_verdicts_are_counted_apart() -> None:
    assert not any(v.is_entry_failure for v in NOT_JUDGED)
    assert worst([Verdict.PASSED, Verdict.UNVERIFIED]) is Verdict.UNVERIFIED
    assert worst([Verdict.UNVERIFIED, Verdict.RUNTIME_ERROR]) is Verdict.RUNTIME_ERROR
    assert COUNT_COLUMNS["unverified"] == {Verdict.UNVERIFIED}
    assert not COUNT_COLUMNS["failed"] & set(NOT_JUDGED)
    assert not COUNT_COLUMNS["passed"] & set(NOT_JUDGED)


def test_the_funnel_leaves_out_what_was_not_judged() -> None:
    from grader.model.scores import ScoreOptions
    from grader.scoring.scores import ScoreInput, score_shape

    shapes = [score_shape(ScoreInput(problem="p", shape=str(i), phase="decode", verdict=v),
                          ScoreOptions())
              for i, v in enumerate([Verdict.PASSED, Verdict.UNVERIFIED,
                                     Verdict.REFERENCE_ERROR, Verdict.INCORRECT])]
    got = funnel(shapes)
    assert (got.shapes, got.unverified, got.infra_errors) == (2, 1, 1)
    assert "unverified" in shapes[1].flags and "reference_error" in shapes[2].flags


def _wrong(tmp: Path, bf16_ops: dict[str, int], *, interpreter: bool = True) -> Verdict:
    from grader.model.evidence import TraceRecord

    cases, ref, ent = _runs(tmp, torch.arange(8.0))  # wrong outputs
    assert ent.out.result is not None
    ent.out.result.cases["s.0"] = CaseRecord(ok=True, trace=TraceRecord(
        interpreter_bf16=bf16_ops))
    return judge_problem(problem=PROBLEM, shapes=[SHAPE], cases=cases, reference=ref,
                         entry=ent, static=[], own_kernels=set(), tracer=NoDetection(),
                         max_output_bytes=1 << 20, interpreter=interpreter)[0].verdict


def test_wrong_outputs_after_interpreted_bf16_arithmetic_are_unverified(tmp_path: Path
                                                                        ) -> None:
    assert _wrong(tmp_path, {"add": 3}) is Verdict.UNVERIFIED
    # No bf16 arithmetic seen: an honest-looking wrong kernel is incorrect.
    assert _wrong(tmp_path, {}) is Verdict.INCORRECT
    # On a GPU the record means nothing: wrong is wrong.
    assert _wrong(tmp_path, {"add": 3}, interpreter=False) is Verdict.INCORRECT
    assert "bit patterns" in (bf16_limit({"add": 2, "dot": 1}) or "")
    assert bf16_limit({}) is None and bf16_limit(None) is None


def test_the_harness_sees_the_interpreters_bf16_arithmetic() -> None:
    """The watch in the entry's harness, run here on Triton's interpreter."""
    import os
    import subprocess
    import sys

    code = (
        "import contextlib, torch, triton, triton.language as tl\n"
        "from grader.harness.trace import install_bf16_watch\n"
        "seen = []\n"
        "@triton.jit\n"
        "def k(x, o, n, WIDE: tl.constexpr, B: tl.constexpr):\n"
        "    offs = tl.arange(0, B)\n"
        "    v = tl.load(x + offs, mask=offs < n)\n"
        "    if WIDE:\n"
        "        v = v.to(tl.float32)\n"
        "    tl.store(o + offs, (v + v).to(o.dtype.element_ty), mask=offs < n)\n"
        "x = torch.rand(8, dtype=torch.bfloat16)\n"
        "with contextlib.ExitStack() as stack:\n"
        "    install_bf16_watch(stack, seen.append)\n"
        "    k[(1,)](x, torch.empty_like(x), 8, WIDE=True, B=8)\n"
        "    wide = len(seen)\n"
        "    k[(1,)](x, torch.empty_like(x), 8, WIDE=False, B=8)\n"
        "print(wide, sorted(set(seen)))\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "TRITON_INTERPRET": "1"}, check=False, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split()[0] == "0"  # widened to fp32 first: nothing seen
    assert "'add'" in res.stdout
