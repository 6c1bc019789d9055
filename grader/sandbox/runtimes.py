"""The runtimes an entry's container runs on: one object per kind, chosen once from the kind's
name (`runtime_for`), in place of the `if kind == ...` branches that were spread over the
worker's set-up, the image plans, the run's options and the checks of a round (issue 33;
repo2docker's build packs and cibuildwheel's platform modules are the models).

- cpu: a Debian root filesystem made by debootstrap, torch and triton installed offline from
  a host-made wheelhouse; entries run under Triton's interpreter, no GPU.
- cuda: an image FROM a CUDA PyTorch base already on the host; without NVIDIA's container
  toolkit, the host's driver libraries are bound one file at a time.
- host: an image of empty folders, run with what the host's interpreter is made of bound
  read-only (host_runtime.py); the one kind whose binds can show the entry the host's files,
  so the one whose exposure checks can refuse a layout.

Each says what its image is (`plan`, `ensure_image`), what every container of a worker is
given (`container`: the interpreter, binds and environment), which devices it serves
(`check_device`) and which protected paths its binds would show (`exposures`).
"""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from grader.errors import UsageError
from grader.images import (
    Builder,
    BuildPlan,
    Ensured,
    cpu_runtime_plan,
    cuda_runtime_plan,
    ensure,
    host_skeleton,
    make_host_skeleton,
    make_rootfs,
    rootfs_tag,
)
from grader.sandbox.gpus import DRIVER_LIB_DIR, driver_libraries
from grader.sandbox.host_runtime import host_runtime
from grader.sandbox.host_view import bind_conflicts
from grader.sandbox.spec import Bind, GpuAccess

RuntimeKind = Literal["cpu", "cuda", "host"]
# (what, path, whole) as host_view.bind_conflicts takes them: a path the entry must not see.
Protected = tuple[str, Path, bool]


@dataclass(frozen=True, kw_only=True)
class RuntimeConfig:
    """The runtime as the user chose it: --runtime, --python, --cuda-base."""

    kind: RuntimeKind = "cpu"
    # A -devel image: Triton needs a C compiler at run time, which -runtime ones have lacked.
    cuda_base: str = "pytorch/pytorch:2.9.1-cuda12.8-cudnn9-devel"
    python: str = "python3"  # the interpreter inside the container (cuda and host kinds)


@dataclass(frozen=True, kw_only=True)
class ContainerSide:
    """What a runtime gives every container of one worker: the interpreter that runs the
    harness, host files bound read-only, and environment variables added."""

    python: str
    binds: tuple[Bind, ...] = ()
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Runtime(ABC):
    cfg: RuntimeConfig
    name: ClassVar[RuntimeKind]
    default_python: ClassVar[str] = "python3"  # --python when it is not given

    @abstractmethod
    def plan(self, *, download: bool = True) -> BuildPlan:
        """The runtime image's build plan; `download`: fetch what the plan hashes if missing."""

    @abstractmethod
    def ensure_image(self, engine: Builder) -> Ensured:
        """The runtime image, made only when no image has its tag yet."""

    @abstractmethod
    def container(self, gpu: GpuAccess | None) -> ContainerSide:
        """What every container of a worker is given; `gpu`: the worker's GPU, None on the
        CPU."""

    def check_device(self, device: str) -> None:
        """Refuse a --device this runtime cannot serve (UsageError); cuda and host serve both."""
        return None

    def exposures(self, protected: Iterable[Protected], *, gpu: bool) -> list[str]:
        """Each protected path a bind of this runtime would show the entry, as a sentence."""
        return []


@dataclass(frozen=True)
class CpuRuntime(Runtime):
    name: ClassVar[RuntimeKind] = "cpu"
    # The venv images/runtime-cpu.Dockerfile.j2 installs torch and triton into.
    python: ClassVar[str] = "/opt/venv/bin/python3"

    def plan(self, *, download: bool = True) -> BuildPlan:
        return cpu_runtime_plan(download=download)

    def ensure_image(self, engine: Builder) -> Ensured:
        def rootfs() -> None:  # the image is built FROM the imported root filesystem
            if engine.image_id(rootfs_tag()) is None:
                make_rootfs(engine, rootfs_tag())

        return ensure(engine, self.plan(), prepare=rootfs)

    def container(self, gpu: GpuAccess | None) -> ContainerSide:
        return ContainerSide(python=self.python)

    def check_device(self, device: str) -> None:
        if device == "cuda":
            raise UsageError("--device cuda with --runtime cpu: the cpu runtime image has no "
                             "CUDA build of torch",
                             hint="add --runtime host (the host's CUDA stack, read-only) or "
                             "--runtime cuda (an image FROM --cuda-base)")


@dataclass(frozen=True)
class CudaRuntime(Runtime):
    name: ClassVar[RuntimeKind] = "cuda"

    def plan(self, *, download: bool = True) -> BuildPlan:
        return cuda_runtime_plan(self.cfg.cuda_base, self.cfg.python)

    def ensure_image(self, engine: Builder) -> Ensured:
        base = self.cfg.cuda_base

        def present() -> None:  # no registry here: a CUDA base image must be on the host
            if engine.image_id(base) is None:
                raise UsageError(f"the CUDA base image {base} is not on this host",
                                 hint="load it (docker load) or name another with --cuda-base")

        return ensure(engine, self.plan(), prepare=present)

    def container(self, gpu: GpuAccess | None) -> ContainerSide:
        if gpu is not None and gpu.mode == "devices":
            binds, env = driver_binds()
            return ContainerSide(python=self.cfg.python, binds=binds, env=env)
        return ContainerSide(python=self.cfg.python)  # the toolkit brings the driver itself


def driver_binds() -> tuple[tuple[Bind, ...], tuple[tuple[str, str], ...]]:
    """Without NVIDIA's toolkit, a CUDA image reaches the GPU through the host's driver
    libraries, bound read-only one file at a time into DRIVER_LIB_DIR (the image's own
    LD_LIBRARY_PATH names it; the runtime template adds it too), and Triton told where
    libcuda is (it would ask ldconfig, whose cache in the image does not list that folder)."""
    libs = driver_libraries()
    if "libcuda.so.1" not in libs:
        raise UsageError("--runtime cuda without NVIDIA's container toolkit needs the host's "
                         "driver libraries, and no libcuda.so.1 is found (ldconfig -p)",
                         hint="install the toolkit, or grade with --runtime host")
    binds = tuple(Bind(host=path, container=f"{DRIVER_LIB_DIR}/{name}")
                  for name, path in libs.items())
    return binds, (("TRITON_LIBCUDA_PATH", DRIVER_LIB_DIR),)


@dataclass(frozen=True)
class HostfsRuntime(Runtime):
    """--runtime host: the grader-hostfs image (empty folders), the host's toolchain bound."""

    name: ClassVar[RuntimeKind] = "host"
    default_python: ClassVar[str] = sys.executable  # this interpreter, which has the grader

    def plan(self, *, download: bool = True) -> BuildPlan:
        raise UsageError("the host runtime is imported, not built from a Dockerfile")

    def ensure_image(self, engine: Builder) -> Ensured:
        tag, data = host_skeleton()
        existing = engine.image_id(tag)
        if existing is not None:
            return Ensured(tag=tag, id=existing, built=False)
        return Ensured(tag=tag, id=make_host_skeleton(engine, tag, data), built=True)

    def container(self, gpu: GpuAccess | None) -> ContainerSide:
        # Only what the host's interpreter is made of (host_runtime.py), at its own paths.
        rt = host_runtime(self.cfg.python, gpu is not None)
        return ContainerSide(python=rt.python, binds=rt.as_binds(), env=rt.env)

    def exposures(self, protected: Iterable[Protected], *, gpu: bool) -> list[str]:
        # Issue 18: with a copy of the suites under /opt, an entry printed a hidden table.
        return bind_conflicts(host_runtime(self.cfg.python, gpu).binds, protected)


RUNTIMES: dict[str, type[Runtime]] = {r.name: r for r in (CpuRuntime, CudaRuntime, HostfsRuntime)}


def _kind(name: str) -> type[Runtime]:
    try:
        return RUNTIMES[name]
    except KeyError:
        raise UsageError(f"--runtime {name!r} is not a runtime",
                         hint=f"one of {', '.join(RUNTIMES)}") from None


def runtime_config(kind: str, *, python: str | None = None, cuda_base: str | None = None
                   ) -> RuntimeConfig:
    """The runtime of --runtime, with --python (default: the kind's) and --cuda-base
    (default: RuntimeConfig's)."""
    cls = _kind(kind)
    return RuntimeConfig(kind=cls.name, python=python or cls.default_python,
                         **({"cuda_base": cuda_base} if cuda_base else {}))


def default_runtime(device: str) -> RuntimeKind:
    """The runtime for a --device when none is named: cpu on the CPU; on a GPU the host's
    toolchain, which needs no CUDA base image on the host."""
    return "host" if device == "cuda" else "cpu"


def runtime_for(cfg: RuntimeConfig) -> Runtime:
    """The runtime object of `cfg`'s kind."""
    return _kind(cfg.kind)(cfg)
