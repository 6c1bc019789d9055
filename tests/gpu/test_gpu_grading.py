"""On an NVIDIA GPU host (run with --run-docker --run-gpu): real kernels, real containers.

Run on the H200 with bench/gpu_session.sh; docs/benchmarks.md records what it showed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from grader.paths import REPO
from grader.runner import RunRequest, grade_bundle
from grader.verdicts import Verdict

pytestmark = [pytest.mark.docker, pytest.mark.gpu]


def _grade(example: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    from grader.bundle_tools import create_bundle

    bundle = tmp_path / f"{example}.tar"
    create_bundle(REPO / "examples" / example, bundle)
    return grade_bundle(RunRequest(bundle=bundle, out_dir=tmp_path / "out", device="cuda",
                                   runtime="host", python=sys.executable, quiet=True))


def test_triton_example_passes_with_timings_and_own_kernels(tmp_path: Path) -> None:
    rep = _grade("triton", tmp_path)
    assert rep.environment.is_performance and "H" in rep.environment.device
    for p in rep.problems:
        for s in p.shapes:
            assert s.verdict == Verdict.PASSED, (p.id, s.id, s.detail, s.error_excerpt)
            assert s.timing is not None and s.timing.median_us > 0
            assert s.trace is not None and s.trace.dsl_share is not None
            assert s.trace.dsl_share >= 0.9
            assert any(k.kind == "own_triton" for k in s.trace.device_kernels)


def test_torch_fallback_is_caught_with_vendor_kernels(tmp_path: Path) -> None:
    rep = _grade("torch-fallback", tmp_path)
    assert {p.verdict for p in rep.problems} == {Verdict.FALLBACK}
    matmul = next(p for p in rep.problems if p.id == "matmul")
    kinds = {k.kind for s in matmul.shapes if s.trace for k in s.trace.device_kernels}
    assert "vendor" in kinds
