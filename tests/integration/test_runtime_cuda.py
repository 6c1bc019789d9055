"""The production runtime kind (`--runtime cuda`: an image FROM a configurable CUDA PyTorch base)
built and graded with against the real engine, offline.

No CUDA base image can be pulled here (no registry), so the base is the CPU runtime image, which
has what the template needs of one (an interpreter with torch and triton): this checks the
template builds FROM a local base without a network, that the harness runs in the result, and
that a missing base is a clear usage error. A GPU host builds the same template FROM its CUDA
PyTorch image (docs/sandbox.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.bundle_tools import create_bundle
from grader.config import RunConfig
from grader.detect.policy import load_policy
from grader.detection import Detector
from grader.errors import UsageError
from grader.grade import Grader
from grader.imaging import RuntimeConfig, ensure_runtime
from grader.paths import REPO
from grader.verdicts import Verdict

pytestmark = pytest.mark.docker
VENV_PYTHON = "/opt/venv/bin/python3"  # the CPU runtime image's interpreter


def test_cuda_runtime_kind_builds_from_a_local_base_and_grades(engine, runtime,  # type: ignore[no-untyped-def]
                                                              tmp_path: Path) -> None:
    cfg = RuntimeConfig(kind="cuda", cuda_base=runtime.tag, python=VENV_PYTHON)
    built = ensure_runtime(engine, cfg)
    assert built.tag.startswith("grader-runtime-cuda:") and built.id != runtime.id
    assert ensure_runtime(engine, cfg).built is False  # cached by content hash
    bundle = tmp_path / "t.tar"
    create_bundle(REPO / "examples" / "triton", bundle)
    run = RunConfig(bundle=bundle, out_dir=tmp_path / "out", problems=("vector_add",),
                    runtime=cfg)
    rep = Grader(run, engine, Detector(policy=load_policy("triton")), lambda _m: None).run()
    assert [p.verdict for p in rep.problems] == [Verdict.PASSED], rep.problems[0].detail
    assert rep.problems[0].image.startswith("grader-problem-demo-vector_add:")


def test_a_cuda_base_not_on_the_host_is_a_usage_error(engine) -> None:  # type: ignore[no-untyped-def]
    cfg = RuntimeConfig(kind="cuda", cuda_base="grader-test/absent-base:0", python=VENV_PYTHON)
    with pytest.raises(UsageError, match="is not on this host"):
        ensure_runtime(engine, cfg)
