"""The hostile cases that need a GPU (tests/cases/hostile_gpu/), graded on GPU 0 in host-runtime
mode (run with --run-docker --run-gpu; bench/gpu_session.sh does). Their CPU variants, where
one exists, run in CI under tests/cases/hostile/."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from grader.cli.selftest import Target, case_dirs, grade_case
from grader.sandbox.docker_engine import DockerEngine

pytestmark = [pytest.mark.docker, pytest.mark.gpu]
GPU = Target(device="cuda", runtime="host", python=sys.executable)


@pytest.mark.parametrize("case", case_dirs(("hostile_gpu",)), ids=lambda p: p.name)
def test_hostile_gpu_case(case: Path, tmp_path: Path) -> None:
    result = grade_case(DockerEngine(), case, tmp_path, GPU)
    assert result.got == result.expected, (result.got, [
        (s.id, s.verdict, s.detail) for p in result.report.problems for s in p.shapes])
    assert result.leftovers == 0
