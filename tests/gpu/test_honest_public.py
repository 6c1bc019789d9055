"""The corpus of honest public Triton code (issue 17), graded on GPU 0 in host-runtime mode
(run with --run-docker --run-gpu): every case must be `passed`. The upstream code is never
committed: bench/honest_corpus_assemble.py writes the case folders into build/honest_public/
from local copies of the upstream repositories (tests/cases/honest_public_src/NOTICE.md), and
this test skips when that folder is absent. The CPU group also runs in
tests/integration/test_cases.py; the GPU group holds the cases Triton's CPU interpreter cannot
run (docs/architecture.md, "Known limitations")."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from grader.cli.selftest import Target, grade_case
from grader.paths import REPO
from grader.sandbox.docker_engine import get_engine

pytestmark = [pytest.mark.docker, pytest.mark.gpu]
GPU = Target(device="cuda", runtime="host", python=sys.executable)
CORPUS = REPO / "build" / "honest_public"
GROUPS = ("honest_public", "honest_public_gpu")


def _cases() -> list[object]:
    """A case whose case.toml says `xfail = "why"` is a known, open false alarm (strict: once
    fixed, the xfail fails and the line must go)."""
    found = sorted(p for g in GROUPS if (CORPUS / g).is_dir() for p in (CORPUS / g).iterdir()
                   if (p / "case.toml").is_file())
    if not found:
        return [pytest.param(None, id="honest_public", marks=pytest.mark.skip(
            reason=f"no assembled honest corpus in {CORPUS} (bench/honest_corpus_assemble.py)"))]
    out: list[object] = []
    for p in found:
        why = tomllib.loads((p / "case.toml").read_text()).get("xfail")
        marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
        out.append(pytest.param(p, marks=marks, id=f"{p.parent.name}/{p.name}"))
    return out


@pytest.mark.parametrize("case", _cases())
def test_honest_public_case(case: Path, tmp_path: Path) -> None:
    result = grade_case(get_engine(), case, tmp_path, GPU)
    assert result.got == result.expected, (result.got, [
        (s.id, s.verdict, s.detail, [f"{f.rule} {f.severity}" for f in s.findings])
        for p in result.report.problems for s in p.shapes],
        [f"{f.rule} {f.severity} line {f.line}" for p in result.report.problems
         for f in p.findings])
    assert result.leftovers == 0
