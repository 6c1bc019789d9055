"""On an NVIDIA GPU host (run with --run-docker --run-gpu): real kernels, real containers.

Run on the H200 with bench/gpu_session.sh; docs/benchmarks.md records what it showed.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path

import pytest

from grader.grading.config import GradingOptions, Presentation, RunOptions, Scheduling
from grader.grading.runner import grade_bundle
from grader.grading.settings import GradingSettings
from grader.paths import REPO
from grader.verdicts import Verdict

pytestmark = [pytest.mark.docker, pytest.mark.gpu]


GPU_HOST = GradingSettings(device="cuda", runtime="host")


def _grade(example: str, tmp_path: Path, start_ahead: str = "auto",  # type: ignore[no-untyped-def]
           serve: bool = False):
    from grader.intake.tools import create_bundle

    bundle = tmp_path / f"{example}.tar"
    create_bundle(REPO / "examples" / example, bundle)
    grading = GradingOptions(bundle=bundle, out_dir=tmp_path / "out", settings=GPU_HOST,
                             python=sys.executable,
                             scheduling=Scheduling(start_ahead=start_ahead, serve=serve))
    return grade_bundle(RunOptions(grading=grading, presentation=Presentation(quiet=True)))


# served: every batch a worker of one serving container (--serve, issue 32), each forked by
# the zygote, making its CUDA context and the profiler's set-up after the fork.
SERVED = pytest.mark.parametrize("serve", [False, True], ids=["containers", "served"])


@SERVED
def test_triton_example_passes_with_timings_and_own_kernels(tmp_path: Path, serve: bool
                                                             ) -> None:
    rep = _grade("triton", tmp_path, serve=serve)
    assert rep.environment.is_performance and "H" in rep.environment.device
    for p in rep.problems:
        for s in p.shapes:
            assert s.verdict == Verdict.PASSED, (p.id, s.id, s.detail, s.error_excerpt)
            assert s.timing is not None and s.timing.median_us > 0
            assert s.trace is not None and s.trace.dsl_share is not None
            assert s.trace.dsl_share >= 0.9
            assert any(k.kind == "own_triton" for k in s.trace.device_kernels)


@SERVED
def test_torch_fallback_is_caught_with_vendor_kernels(tmp_path: Path, serve: bool) -> None:
    rep = _grade("torch-fallback", tmp_path, serve=serve)
    assert {p.verdict for p in rep.problems} == {Verdict.FALLBACK}
    matmul = next(p for p in rep.problems if p.id == "matmul")
    kinds = {k.kind for s in matmul.shapes if s.trace for k in s.trace.device_kernels}
    assert "vendor" in kinds


@pytest.mark.skipif(not os.environ.get("GRADER_CUDA_BASE"),
                    reason="GRADER_CUDA_BASE names no CUDA base image (bench/cuda_base.py)")
def test_cuda_runtime_kind_on_the_gpu(tmp_path: Path) -> None:
    """The production runtime kind: FROM a CUDA PyTorch base, with no host folder bound but
    (without NVIDIA's toolkit) the driver's libraries; real kernels, timed and attributed."""
    from grader.intake.tools import create_bundle
    from grader.sandbox.gpus import DRIVER_LIB_DIR

    bundle = tmp_path / "triton.tar"
    create_bundle(REPO / "examples" / "triton", bundle)
    gpu_cuda = GradingSettings(device="cuda", runtime="cuda")
    rep = grade_bundle(RunOptions(grading=GradingOptions(
        bundle=bundle, out_dir=tmp_path / "out", settings=gpu_cuda,
        cuda_base=os.environ["GRADER_CUDA_BASE"], python=sys.executable),
        presentation=Presentation(quiet=True)))
    assert rep.environment.is_performance
    for p in rep.problems:
        for s in p.shapes:
            assert s.verdict == Verdict.PASSED, (p.id, s.id, s.detail, s.error_excerpt)
            assert s.timing is not None and s.timing.median_us > 0
            assert s.trace is not None
            assert any(k.kind == "own_triton" for k in s.trace.device_kernels)
    from grader.grading.grader import worker_setup
    from grader.sandbox.docker_engine import get_engine

    cfg = GradingOptions(bundle=bundle, out_dir=tmp_path, settings=gpu_cuda,
                         cuda_base=os.environ["GRADER_CUDA_BASE"], python=sys.executable)
    setup = worker_setup(cfg, get_engine(), "inspect")
    # Nothing of the host's but (without the toolkit) the driver's own libraries, read-only.
    assert setup.gpu is not None
    assert bool(setup.extra_binds) == (setup.gpu.mode == "devices")
    assert all(b.read_only and b.container.startswith(DRIVER_LIB_DIR) for b in setup.extra_binds)


def test_started_ahead_the_same_verdicts(tmp_path: Path) -> None:
    rep = _grade("triton", tmp_path, start_ahead="on")
    assert {s.verdict for p in rep.problems for s in p.shapes} == {Verdict.PASSED}
    for p in rep.problems[1:]:
        # The cold imports and the entry's GPU set-up made at the standby, not after it.
        assert p.phases_s["entry.standby"] > 0, p.phases_s
        assert p.phases_s["entry.standby_prepare"] > 0, p.phases_s
        assert "entry.prepare" not in p.phases_s, p.phases_s


def test_started_ahead_only_the_entrys_standby_sets_up_the_gpu(tmp_path: Path) -> None:
    from grader.grading.grader import worker_setup
    from grader.harness.protocol import GATE_FILE
    from grader.images import ensure, problem_plan
    from grader.model.channel import read_frames
    from grader.model.runs import Case
    from grader.run.ahead import Standby
    from grader.run.batch import Batch
    from grader.sandbox.docker_engine import get_engine
    from grader.sandbox.runtimes import RuntimeConfig, runtime_for
    from grader.sandbox.spec import Limits
    from grader.suite.load import load_suite

    engine = get_engine()
    cfg = GradingOptions(bundle=tmp_path / "b.tar", out_dir=tmp_path, settings=GPU_HOST,
                         python=sys.executable)
    setup = worker_setup(cfg, engine, f"test-{uuid.uuid4().hex[:8]}")
    runtime = runtime_for(RuntimeConfig(kind="host", python=sys.executable)).ensure_image(engine)
    bundle = load_suite(REPO / "problem_bundles" / "demo").problems["vector_add"]
    shape = bundle.problem.shapes[0]
    image = ensure(engine, problem_plan(runtime.tag, "demo", bundle))
    batch = Batch(image=image.tag, kernel_file=REPO / "examples" / "triton" / "kernels" /
                  "vector_add.py", cases=[Case(id=f"{shape.id}.0", shape=shape, seed=1)],
                  ref_limits=cfg.reference_limits, entry_limits=Limits(wall_s=120.0),
                  problem=bundle.problem)
    try:
        st = Standby(setup, batch)
        st.settle()
        assert st.usable()
        # The entry's harness made its CUDA context and profiler set-up before its gate (so
        # the host's wait for an idle standby covers them); the reference's touched no GPU.
        # The entry's gate is a frame on its warden's stdout (grader/model/channel.py).
        gate = read_frames(st.ent.stdout()).standby
        assert gate is not None and gate.model_dump() == {
            "ok": True, "cuda_initialized": True, "prepared": True}
        assert json.loads((st.ref_out / GATE_FILE).read_text()) == {
            "ok": True, "cuda_initialized": False, "prepared": False}
        st.close()
    finally:
        engine.reap(setup.session)
