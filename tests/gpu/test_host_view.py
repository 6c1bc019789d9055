"""Issue 18 on a GPU host (run with --run-docker --run-gpu; bench/gpu_session.sh does): in
host-runtime mode a container shows nothing of the host but what the host's interpreter is
made of, the driver's libraries and the C compiler, and with only that it still runs a Triton
kernel on the GPU (gcc builds the launcher, ptxas and libcuda are found). The hostile entry
tests/cases/hostile_gpu/host_view_probe, graded on GPU 0, sees exactly that view."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import uuid
from pathlib import Path

import pytest

from grader.cli.selftest import Target, grade_case
from grader.paths import REPO
from grader.sandbox.docker_engine import get_engine
from grader.sandbox.gpus import gpu_mode, gpu_nodes
from grader.sandbox.host_runtime import resolve
from grader.sandbox.host_view import VIEW_ROOTS, expected_view
from grader.sandbox.runtimes import RuntimeConfig, runtime_for
from grader.sandbox.spec import ContainerSpec, GpuAccess, Limits, Role
from grader.verdicts import Verdict

pytestmark = [pytest.mark.docker, pytest.mark.gpu]

# The view under VIEW_ROOTS (mount points not entered), then a Triton kernel on the GPU.
SCRIPT = r"""
import json, os, sys
roots = json.loads(sys.argv[1])
mounts = {line.split()[4].replace("\\040", " ") for line in open("/proc/self/mountinfo")}
seen = []
def visit(path):
    seen.append(path)
    if path in mounts or not os.path.isdir(path) or os.path.islink(path):
        return
    for name in sorted(os.listdir(path)):
        visit(os.path.join(path, name))
for root in roots:
    if os.path.lexists(root):
        visit(root)
import torch, triton, triton.language as tl
@triton.jit
def add(x, y, o, n, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(o + i, tl.load(x + i, mask=i < n) + tl.load(y + i, mask=i < n), mask=i < n)
x = torch.randn(4096, device="cuda"); y = torch.randn(4096, device="cuda")
o = torch.empty_like(x)
add[(4,)](x, y, o, 4096, B=1024)
ok = bool(torch.equal(o, x + y))
print(json.dumps({"seen": seen, "gpu": torch.cuda.get_device_name(0), "triton_ok": ok}))
"""

RUN_FROM_FILE = ("import sys; p = '/tmp/view_probe.py'; open(p, 'w').write(sys.argv[1]); "
                 "sys.argv = [p] + sys.argv[2:]; "
                 "exec(compile(open(p).read(), p, 'exec'), {'__name__': '__main__'})")


def _toolkit_file(path: str) -> bool:
    """NVIDIA's toolkit mounts the driver's files itself, where it likes."""
    name = os.path.basename(path)
    return "nvidia" in path or name.startswith(("libcuda", "libnv"))


def test_a_gpu_container_shows_only_the_runtime_and_runs_triton() -> None:
    engine = get_engine()
    host = runtime_for(RuntimeConfig(kind="host", python=sys.executable))
    skeleton = host.ensure_image(engine).tag
    rt = resolve(sys.executable, gpu=True)
    assert any(b.why == "compiler" for b in rt.binds), "no gcc: Triton cannot build launchers"
    mode, nodes = gpu_mode(engine.info())
    assert mode != "none"
    session = f"test-{uuid.uuid4().hex[:8]}"
    spec = ContainerSpec(
        # Run from a file: Triton reads a jit function's source, which `-c` code has none of.
        image=skeleton, command=[rt.python, "-I", "-c", RUN_FROM_FILE, SCRIPT,
                                      json.dumps(VIEW_ROOTS)],
        role=Role.PROBE, session=session,
        env={"HOME": "/tmp", "TMPDIR": "/tmp", "TRITON_CACHE_DIR": "/tmp/triton",
             "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
             **dict(rt.env)},
        binds=rt.as_binds(),
        limits=Limits(memory_bytes=32 << 30, pids=1024, cpus=4.0, scratch_bytes=1 << 30,
                      wall_s=300.0),
        gpu=GpuAccess(mode=mode, index=0, device_nodes=tuple(gpu_nodes(nodes, 0))))
    try:
        state = engine.run(spec)
    finally:
        engine.reap(session)
    assert state.exit_code == 0, state.logs[-4000:]
    view = json.loads(state.logs.strip().splitlines()[-1])
    assert view["triton_ok"], view["gpu"]
    expected = expected_view(rt.binds)
    extra = set(view["seen"]) - expected
    if mode == "toolkit":
        extra = {p for p in extra if not _toolkit_file(p)}
    assert not extra, sorted(extra)
    # The skeleton copies the host's top-level links: say what they are when one is missing
    # (on the H200, 2026-12-02, /var was absent from the entry's view).
    tops = {d: os.readlink(d) if os.path.islink(d) else os.path.isdir(d) for d in VIEW_ROOTS}
    assert not expected - set(view["seen"]), (sorted(expected - set(view["seen"])), tops)


def test_the_hostile_view_probe_sees_the_runtime_alone(tmp_path: Path) -> None:
    engine = get_engine()
    case = REPO / "tests" / "cases" / "hostile_gpu" / "host_view_probe"
    result = grade_case(engine, case, tmp_path,
                        Target(device="cuda", runtime="host", python=sys.executable))
    problem = result.report.problems[0]
    assert problem.verdict == Verdict.POLICY_VIOLATION, [
        (s.id, s.verdict, s.detail) for s in problem.shapes]
    assert result.leftovers == 0
    line = [x for x in (problem.stderr_excerpt or "").splitlines()
            if x.startswith("HOSTVIEW ")][-1]
    view = json.loads(line.removeprefix("HOSTVIEW "))
    assert view["found"] == [] and view["hidden"] == 0, view
    assert view["proc1_root"] is None, view
    mode, _ = gpu_mode(engine.info())
    odd = [m for m in view["odd_mounts"] if not m.startswith(("/tmp", "/grader"))]
    if mode == "toolkit":
        odd = [m for m in odd if not _toolkit_file(m)]
    assert odd == [], view
    if mode == "devices":  # with the toolkit, it adds files of its own
        expected = expected_view(resolve(sys.executable, gpu=True).binds, view["roots"])
        digest = hashlib.sha256("\n".join(sorted(expected)).encode()).hexdigest()[:16]
        assert (view["count"], view["digest"]) == (len(expected), digest), view
