"""The production runtime kind (`--runtime cuda`: an image FROM a configurable CUDA PyTorch base)
built and graded with against the real engine, offline.

No CUDA base image can be pulled here (no registry), so the base is a stand-in made FROM the
CPU runtime image, which has what the template needs of one (an interpreter with torch and
triton) but a C compiler: Triton's interpreter needs none, so the stand-in only names one in
CC (nothing is compiled on the CPU). This checks the template builds FROM a local base without
a network, that the harness runs in the result, that a base with no C compiler (as the
pytorch/pytorch "-runtime" images are) is refused with a message that says so, and that a
missing base is a clear usage error. On the H200, bench/cuda_base.py makes a real CUDA base
and tests/gpu grades with it (docs/benchmarks.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.detect.detector import Detector
from grader.detect.policy import load_policy
from grader.errors import ImageBuildError, UsageError
from grader.grading.config import GradingOptions
from grader.grading.grader import Grader
from grader.grading.settings import GradingSettings
from grader.intake.tools import create_bundle
from grader.paths import REPO
from grader.sandbox.gpus import DRIVER_LIB_DIR
from grader.sandbox.runtimes import RuntimeConfig, runtime_for
from grader.verdicts import Verdict

pytestmark = pytest.mark.docker
VENV_PYTHON = "/opt/venv/bin/python3"  # the CPU runtime image's interpreter


@pytest.fixture(scope="module")
def stand_in(engine, runtime, tmp_path_factory) -> str:  # type: ignore[no-untyped-def]
    """A CUDA base's stand-in: the CPU runtime, with a C compiler named in CC."""
    tag = "grader-test/cuda-stand-in:cc"
    if engine.image_id(tag) is None:
        ctx = tmp_path_factory.mktemp("stand-in")
        (ctx / "Dockerfile").write_text(f"FROM {runtime.tag}\nENV CC=/usr/bin/cc\n")
        engine.build(ctx, tag, kind="test")
    return tag


def test_cuda_runtime_kind_builds_from_a_local_base_and_grades(engine, stand_in,  # type: ignore[no-untyped-def]
                                                              tmp_path: Path) -> None:
    cfg = RuntimeConfig(kind="cuda", cuda_base=stand_in, python=VENV_PYTHON)
    built = runtime_for(cfg).ensure_image(engine)
    assert built.tag.startswith("grader-runtime-cuda:") and built.id != engine.image_id(stand_in)
    env = engine.client.images.get(built.tag).attrs["Config"]["Env"]
    # Where the grader binds the host's driver libraries without NVIDIA's toolkit.
    assert f"LD_LIBRARY_PATH={DRIVER_LIB_DIR}" in env, env
    assert runtime_for(cfg).ensure_image(engine).built is False  # cached by content hash
    bundle = tmp_path / "t.tar"
    create_bundle(REPO / "examples" / "triton", bundle)
    run = GradingOptions(bundle=bundle, out_dir=tmp_path / "out",
                         settings=GradingSettings(problems=("vector_add",), runtime="cuda"),
                         cuda_base=stand_in, python=VENV_PYTHON)
    assert run.runtime_config == cfg
    grader = Grader(run, engine, Detector(policy=load_policy("triton")), lambda _m: None)
    rep = grader.open_and_grade()
    assert [p.verdict for p in rep.problems] == [Verdict.PASSED], rep.problems[0].detail
    assert rep.problems[0].image.startswith("grader-problem-demo-vector_add:")


def test_a_cuda_base_without_a_c_compiler_is_refused(engine, runtime) -> None:  # type: ignore[no-untyped-def]
    cfg = RuntimeConfig(kind="cuda", cuda_base=runtime.tag, python=VENV_PYTHON)
    with pytest.raises(ImageBuildError) as caught:
        runtime_for(cfg).ensure_image(engine)
    assert "has no C compiler, which Triton needs at run time" in (caught.value.hint or "")


def test_a_cuda_base_not_on_the_host_is_a_usage_error(engine) -> None:  # type: ignore[no-untyped-def]
    cfg = RuntimeConfig(kind="cuda", cuda_base="grader-test/absent-base:0", python=VENV_PYTHON)
    with pytest.raises(UsageError, match="is not on this host"):
        runtime_for(cfg).ensure_image(engine)
