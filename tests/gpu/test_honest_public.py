"""The corpus of honest public Triton code (tests/cases/honest_public*/, NOTICE.md there),
graded on GPU 0 in host-runtime mode (run with --run-docker --run-gpu): every case must be
`passed`. The CPU group also runs in CI (tests/integration/test_cases.py); the GPU group holds
the cases Triton's CPU interpreter cannot run (docs/architecture.md, "Known limitations")."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from grader.sandbox.docker_engine import DockerEngine
from grader.selftest import Target, case_dirs, grade_case

pytestmark = [pytest.mark.docker, pytest.mark.gpu]
GPU = Target(device="cuda", runtime="host", python=sys.executable)


def _cases() -> list[object]:
    """A case whose case.toml says `xfail = "why"` is a known, open false alarm (strict: once
    fixed, the xfail fails and the line must go)."""
    out: list[object] = []
    for p in case_dirs(("honest_public", "honest_public_gpu")):
        why = tomllib.loads((p / "case.toml").read_text()).get("xfail")
        marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
        out.append(pytest.param(p, marks=marks, id=f"{p.parent.name}/{p.name}"))
    return out


@pytest.mark.parametrize("case", _cases())
def test_honest_public_case(case: Path, tmp_path: Path) -> None:
    result = grade_case(DockerEngine(), case, tmp_path, GPU)
    assert result.got == result.expected, (result.got, [
        (s.id, s.verdict, s.detail, [f"{f.rule} {f.severity}" for f in s.findings])
        for p in result.report.problems for s in p.shapes],
        [f"{f.rule} {f.severity} line {f.line}" for p in result.report.problems
         for f in p.findings])
    assert result.leftovers == 0
