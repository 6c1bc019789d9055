"""The runtime objects (sandbox/runtimes.py), one per kind, without Docker: each one's image
plan, what it gives a worker's containers (interpreter, binds, environment), the devices it
serves and the layouts it refuses; and that no other module branches on a runtime's name
(issue 33: those branches were spread over five functions)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from grader import images
from grader.errors import ExposedHostPath, UsageError
from grader.grading import grader as grade
from grader.grading.config import GradingOptions
from grader.grading.settings import GradingSettings
from grader.images import BuildPlan, host_skeleton
from grader.paths import REPO
from grader.round.conduct import check_round_dir
from grader.sandbox import runtimes
from grader.sandbox.gpus import DRIVER_LIB_DIR
from grader.sandbox.host_runtime import HostBind, HostRuntime
from grader.sandbox.runtimes import (
    CpuRuntime,
    CudaRuntime,
    HostfsRuntime,
    RuntimeConfig,
    runtime_config,
    runtime_for,
)
from grader.sandbox.spec import Bind, GpuAccess

DEVICES = GpuAccess(mode="devices", index=0, device_nodes=("/dev/nvidia0",))
TOOLKIT = GpuAccess(mode="toolkit", index=0)
EVERYTHING = [("the suite", Path("/"), True)]  # a protected path every bind would show


class Builder:
    """images.Builder that records what it was asked: images present by tag."""

    def __init__(self, *present: str) -> None:
        self.present = set(present)
        self.built: list[tuple[str, str]] = []

    def image_id(self, tag: str) -> str | None:
        return f"id-{tag}" if tag in self.present else None

    def build(self, context: Path, tag: str, kind: str) -> str:
        assert (context / "Dockerfile").is_file()
        self.built.append((tag, kind))
        self.present.add(tag)
        return f"id-{tag}"

    def import_rootfs(self, tarball: Path, tag: str, kind: str) -> str:
        assert tarball.is_file()
        self.built.append((tag, kind))
        self.present.add(tag)
        return f"id-{tag}"


@pytest.fixture(autouse=True)
def _cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GRADER_CACHE", str(tmp_path / "cache"))


def test_each_kind_is_chosen_by_its_name_with_its_default_interpreter() -> None:
    for kind, cls in (("cpu", CpuRuntime), ("cuda", CudaRuntime), ("host", HostfsRuntime)):
        rt = runtime_for(runtime_config(kind))
        assert type(rt) is cls and rt.name == kind
    assert runtime_config("cpu") == RuntimeConfig()
    assert runtime_config("host").python == sys.executable  # the grader's own interpreter
    assert runtime_config("cuda", python="python3.12", cuda_base="b:1") == RuntimeConfig(
        kind="cuda", python="python3.12", cuda_base="b:1")
    with pytest.raises(UsageError, match="--runtime 'gpu' is not a runtime") as err:
        runtime_config("gpu")
    assert err.value.hint == "one of cpu, cuda, host"


def test_the_cpu_runtime_is_the_debootstrap_image_and_its_venv() -> None:
    rt = runtime_for(RuntimeConfig())
    plan = rt.plan(download=False)
    assert plan == images.cpu_runtime_plan(download=False)
    assert plan.kind == "runtime-cpu" and plan.tag.startswith("grader-runtime-cpu:")
    for gpu in (None, DEVICES):
        side = rt.container(gpu)
        assert (side.python, side.binds, side.env) == ("/opt/venv/bin/python3", (), ())
    rt.check_device("cpu")
    with pytest.raises(UsageError, match="--device cuda with --runtime cpu") as err:
        rt.check_device("cuda")
    assert err.value.hint and "--runtime host" in err.value.hint
    assert rt.exposures(EVERYTHING, gpu=False) == []  # it binds nothing of the host


def test_the_cpu_image_makes_the_root_filesystem_only_when_it_builds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    plan = BuildPlan(kind="runtime-cpu", tag="grader-runtime-cpu:t", dockerfile="FROM x\n")
    monkeypatch.setattr(runtimes, "cpu_runtime_plan", lambda download=True: plan)
    made: list[str] = []
    monkeypatch.setattr(runtimes, "make_rootfs",
                        lambda engine, tag: made.append(tag) or engine.present.add(tag))
    rt = runtime_for(RuntimeConfig())
    present = rt.ensure_image(Builder(plan.tag))
    assert (present.built, made) == (False, [])  # present: the root filesystem is not asked
    engine = Builder(images.rootfs_tag())
    assert rt.ensure_image(engine).built and made == []
    engine = Builder()
    got = rt.ensure_image(engine)
    assert made == [images.rootfs_tag()] and engine.built == [(plan.tag, "runtime-cpu")]
    assert (got.tag, got.id, got.built) == (plan.tag, f"id-{plan.tag}", True)


def test_the_cuda_runtime_is_from_its_base_and_binds_the_driver_without_the_toolkit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = RuntimeConfig(kind="cuda", cuda_base="my/base:1", python="/opt/py/bin/python3")
    rt = runtime_for(cfg)
    plan = rt.plan()
    assert plan == images.cuda_runtime_plan("my/base:1", "/opt/py/bin/python3")
    assert "FROM my/base:1" in plan.dockerfile and plan.tag.startswith("grader-runtime-cuda:")
    monkeypatch.setattr(runtimes, "driver_libraries",
                        lambda: {"libcuda.so.1": "/usr/lib/libcuda.so.580"})
    assert rt.container(None) == runtimes.ContainerSide(python="/opt/py/bin/python3")
    assert rt.container(TOOLKIT).binds == ()  # the toolkit brings the driver itself
    side = rt.container(DEVICES)
    assert side.python == "/opt/py/bin/python3"
    assert side.binds == (Bind(host="/usr/lib/libcuda.so.580",
                               container=f"{DRIVER_LIB_DIR}/libcuda.so.1"),)
    assert side.env == (("TRITON_LIBCUDA_PATH", DRIVER_LIB_DIR),)
    rt.check_device("cuda")
    assert rt.exposures(EVERYTHING, gpu=True) == []  # driver files only, none protected
    monkeypatch.setattr(runtimes, "driver_libraries", lambda: {})
    with pytest.raises(UsageError, match=r"no libcuda\.so\.1 is found"):
        rt.container(DEVICES)


def test_a_missing_cuda_base_is_refused_only_when_the_image_must_be_built() -> None:
    rt = runtime_for(RuntimeConfig(kind="cuda", cuda_base="my/base:1"))
    tag = rt.plan().tag
    assert rt.ensure_image(Builder(tag)).built is False  # built before: the base is not needed
    with pytest.raises(UsageError, match="the CUDA base image my/base:1 is not on this host"):
        rt.ensure_image(Builder())
    engine = Builder("my/base:1")
    assert rt.ensure_image(engine).built and engine.built == [(tag, "runtime-cuda")]


def _probed(calls: list[tuple[str, bool]], rt: HostRuntime):  # type: ignore[no-untyped-def]
    def host_runtime(python: str, gpu: bool) -> HostRuntime:
        calls.append((python, gpu))
        return rt
    return host_runtime


def test_the_host_runtime_gives_what_the_interpreter_is_made_of(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    venv.mkdir()
    probed = HostRuntime(python=f"{venv}/bin/python3.11", version="3.11",
                         binds=(HostBind(host=str(venv), container=str(venv),
                                         why="interpreter prefix"),),
                         env=(("TRITON_LIBCUDA_PATH", "/usr/lib"),))
    calls: list[tuple[str, bool]] = []
    monkeypatch.setattr(runtimes, "host_runtime", _probed(calls, probed))
    rt = runtime_for(RuntimeConfig(kind="host", python="python3"))
    with pytest.raises(UsageError, match="imported, not built from a Dockerfile"):
        rt.plan()
    side = rt.container(None)
    assert side.python == f"{venv}/bin/python3.11" and side.env == probed.env
    assert side.binds == (Bind(host=str(venv), container=str(venv)),)
    rt.container(DEVICES)
    assert calls == [("python3", False), ("python3", True)]  # a GPU adds driver and compiler
    rt.check_device("cuda")
    rt.check_device("cpu")
    found = rt.exposures([("the output folder", venv / "out", False),
                          ("the temporary folder", tmp_path / "tmp", False)], gpu=False)
    assert found == [f"the output folder {venv / 'out'} lies inside {venv}, which --runtime "
                     f"host binds read-only into every container (interpreter prefix, at "
                     f"{venv})"]


def test_the_host_image_is_imported_once() -> None:
    rt = runtime_for(RuntimeConfig(kind="host"))
    tag = host_skeleton()[0]
    engine = Builder()
    got = rt.ensure_image(engine)
    assert (got.tag, got.built) == (tag, True) and engine.built == [(tag, "runtime-host")]
    again = rt.ensure_image(engine)
    assert (again.tag, again.id, again.built) == (tag, f"id-{tag}", False)


def test_only_a_runtime_that_binds_the_host_refuses_a_layout(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The run's and the round's checks ask every runtime; cpu and cuda find nothing."""
    bound = HostRuntime(python="/p", version="3.11",
                        binds=(HostBind(host=str(tmp_path), container=str(tmp_path),
                                        why="interpreter prefix"),))
    monkeypatch.setattr(runtimes, "host_runtime", lambda python, gpu: bound)
    rd = SimpleNamespace(root=tmp_path / "round")
    suite = SimpleNamespace(directory=tmp_path / "demo")
    for kind, device in (("cpu", "cpu"), ("cuda", "cuda")):
        cfg = GradingOptions(bundle=tmp_path / "b.tar", out_dir=tmp_path / "out",
                             suite_roots=(tmp_path,),
                             settings=GradingSettings.model_validate(
                                 {"runtime": kind, "device": device}))
        grade.check_host_binds(cfg, suite, grade.Checkpoint(cfg.out_dir))  # type: ignore[arg-type]
        check_round_dir(SimpleNamespace(run=cfg), rd)  # type: ignore[arg-type]
    host = GradingOptions(bundle=tmp_path / "b.tar", out_dir=tmp_path / "out",
                          settings=GradingSettings(runtime="host"))
    with pytest.raises(ExposedHostPath) as err:
        check_round_dir(SimpleNamespace(run=host), rd)  # type: ignore[arg-type]
    assert str(err.value).startswith("--runtime host would let entries read the round's "
                                     f"folder:\n    the round folder {rd.root} lies inside")
    assert err.value.hint == "keep the round folder outside the interpreter's install"


# A runtime's name compared with something that names a runtime or a kind, or a table keyed by
# every runtime's name: the branches runtime objects replace.
NAMES = frozenset(runtimes.RUNTIMES) | {f"runtime-{n}" for n in runtimes.RUNTIMES}
RUNTIME_WORDS = re.compile(r"\b(runtime|kind)\b")


def _strings(node: ast.expr) -> set[str]:
    items = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return {n.value for n in items if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def runtime_branches(source: str) -> list[str]:
    """Each line of `source` that branches on a runtime's name (see NAMES)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = set().union(*(_strings(s) for s in sides)) & NAMES
            if named and any(RUNTIME_WORDS.search(ast.unparse(s)) for s in sides
                             if not _strings(s)):
                found.append(ast.unparse(node))
        elif isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            if set(runtimes.RUNTIMES) <= keys:
                found.append(ast.unparse(node))
        elif isinstance(node, ast.Match) and RUNTIME_WORDS.search(ast.unparse(node.subject)):
            found += [ast.unparse(c.pattern) for c in node.cases
                      if isinstance(c.pattern, ast.MatchValue)
                      and _strings(c.pattern.value) & NAMES]
    return found


def test_the_check_sees_the_branches_it_replaced() -> None:
    old = '''
python = {"cpu": "/opt/venv/bin/python3", "cuda": runtime.python, "host": runtime.python}[kind]
if kind == "host":
    pass
if cfg.runtime != "host":
    pass
if plan.kind == "runtime-cpu" and engine.image_id(rootfs_tag()) is None:
    pass
if req.run.runtime in ("cuda", "host"):
    pass
match cfg.runtime:
    case "cpu":
        pass
if cfg.device == "cuda" or what == "problem":  # devices are not runtimes
    pass
'''
    assert len(runtime_branches(old)) == 6


def test_no_module_but_the_runtimes_branches_on_a_runtimes_name() -> None:
    own = Path(runtimes.__file__).resolve()
    found = [f"{path.relative_to(REPO)}: {line}"
             for path in sorted((REPO / "grader").rglob("*.py")) if path.resolve() != own
             for line in runtime_branches(path.read_text(encoding="utf-8"))]
    assert not found, "ask the runtime object (sandbox/runtimes.py) instead:\n" + "\n".join(
        found)


def test_a_gpu_defaults_to_the_host_runtime() -> None:
    assert (runtimes.default_runtime("cpu"), runtimes.default_runtime("cuda")) == ("cpu", "host")
