"""`grader doctor`: can this host grade? Each check says what it found and what to do."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

from grader.errors import DockerUnavailable
from grader.imaging import RuntimeConfig, rootfs_tag, runtime_plan
from grader.sandbox.capped import can_mount


@dataclass(frozen=True, kw_only=True)
class Check:
    name: str
    ok: bool
    detail: str
    lines: tuple[str, ...] = ()  # printed below the check, indented (the host runtime's binds)


def gpu_mode(info: dict[str, object] | None) -> tuple[str, list[str]]:
    """How a GPU would reach containers: NVIDIA's toolkit, raw device nodes, or none."""
    nodes = sorted(glob.glob("/dev/nvidia*"))
    runtimes = (info or {}).get("Runtimes") or {}
    if isinstance(runtimes, dict) and "nvidia" in runtimes:
        return "toolkit", nodes
    if any(n.rstrip("0123456789").endswith("/dev/nvidia") and n[-1].isdigit() for n in nodes):
        return "devices", nodes
    return "none", nodes


def gpu_nodes(nodes: list[str], index: int) -> list[str]:
    """The device nodes one container needs for GPU `index`: its own node and the shared ones
    (control, UVM), never another GPU's."""
    shared = [n for n in nodes if not n.removeprefix("/dev/nvidia").isdigit()
              and not n.startswith("/dev/nvidia-caps")]
    own = f"/dev/nvidia{index}"
    return ([own] if own in nodes else []) + [n for n in shared if os.path.exists(n)]


# Where a container without NVIDIA's toolkit finds the host's driver libraries: the directory
# that CUDA base images (pytorch/pytorch, nvidia/cuda) already put on LD_LIBRARY_PATH.
DRIVER_LIB_DIR = "/usr/local/nvidia/lib64"
# The driver's user-space libraries a CUDA program (PyTorch, Triton) loads; the rest of CUDA
# (runtime, cuBLAS, cuDNN, ptxas) comes with the image.
DRIVER_LIBS = ("libcuda.so", "libcudadebugger.so", "libnvidia-ml.so",
               "libnvidia-ptxjitcompiler.so", "libnvidia-nvvm.so", "libnvidia-gpucomp.so",
               "libnvidia-allocator.so")
_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
             "/usr/local/nvidia/lib64", "/usr/lib/wsl/lib")


def _is_driver_lib(name: str) -> bool:
    return any(name == lib or name.startswith(lib + ".") for lib in DRIVER_LIBS)


def parse_ldconfig(text: str) -> dict[str, str]:
    """`ldconfig -p`'s 64-bit entries of the driver's libraries: name -> path (first wins, as
    for the dynamic linker)."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, rest = line.strip().partition(" (")
        flags, arrow, path = rest.partition(") => ")
        if sep and arrow and "64" in flags and _is_driver_lib(name):
            found.setdefault(name, path.strip())
    return found


def driver_library_links(ldconfig: str | None = None) -> dict[str, str]:
    """The host's NVIDIA driver libraries as the loader finds them: each path `ldconfig -p`
    names (a link such as .../libcuda.so.1) -> the real file behind it. Host-runtime mode
    binds each at that path, so that a program that loads libcuda.so.1 by name finds it."""
    if ldconfig is None:
        ldconfig = _ldconfig()
    found: dict[str, str] = {}
    for line in ldconfig.splitlines():
        name, sep, rest = line.strip().partition(" (")
        flags, arrow, path = rest.partition(") => ")
        if sep and arrow and "64" in flags and _is_driver_lib(name):
            real = os.path.realpath(path.strip())
            if os.path.isfile(real):
                found.setdefault(path.strip(), real)
    return found


def _ldconfig() -> str:
    try:
        return subprocess.run(["ldconfig", "-p"], capture_output=True, text=True,
                              timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def driver_libraries(ldconfig: str | None = None) -> dict[str, str]:
    """The host's NVIDIA driver libraries, each name a program may load (libcuda.so.1,
    libcuda.so, ...) -> the real file behind it; `ldconfig -p` first, else the usual folders.
    Empty where there is no driver."""
    if ldconfig is None:
        ldconfig = _ldconfig()
    named = parse_ldconfig(ldconfig)
    if not named:
        for folder in _LIB_DIRS:
            for path in sorted(glob.glob(f"{folder}/lib*.so*")):
                if _is_driver_lib(os.path.basename(path)):
                    named.setdefault(os.path.basename(path), path)
    real = {name: os.path.realpath(path) for name, path in named.items()}
    return {name: path for name, path in sorted(real.items()) if os.path.isfile(path)}


def reap_leftovers() -> str:
    """`grader doctor --reap`: remove what graders that died left (sandbox/runs.py): the
    containers of their sessions, the tmpfs mounted in their folders, the folders. Runs
    whose process is alive are left alone."""
    from grader.sandbox.docker_engine import DockerEngine
    from grader.sandbox.runs import reap_dead

    return str(reap_dead(DockerEngine().reap))


def host_runtime_check(*, gpu: bool, python: str = sys.executable) -> Check:
    """What `--runtime host` would bind, read-only, into every container, resolved from this
    host's interpreter (grader/host_runtime.py); on a GPU host with the driver and compiler."""
    from grader.errors import GraderError
    from grader.host_runtime import describe, host_runtime

    try:
        rt = host_runtime(python, gpu)
    except GraderError as exc:
        return Check(name="host runtime", ok=False,
                     detail=f"--runtime host cannot use {python}: {exc.message}")
    folders = sum(1 for b in rt.binds if b.folder)
    compiler = any(b.why == "compiler" for b in rt.binds)
    extra = "" if not gpu else ", with the driver's libraries" + (
        " and gcc" if compiler else "; no gcc: Triton cannot build its launchers")
    return Check(name="host runtime", ok=not gpu or compiler,
                 detail=f"{rt.python} (Python {rt.version}): {len(rt.binds)} read-only binds, "
                        f"{folders} of them folders{extra}; nothing else of the host",
                 lines=tuple(describe(rt)))


def run_checks() -> list[Check]:
    checks: list[Check] = []
    info: dict[str, object] | None = None
    engine = None
    try:
        from grader.sandbox.docker_engine import DockerEngine

        engine = DockerEngine()
        info = engine.info()
        checks.append(Check(name="docker", ok=True,
                            detail=f"engine {engine.version()}, storage {info.get('Driver')}, "
                                   f"cgroup v{info.get('CgroupVersion', '?')}"))
        sec = [str(o) for o in info.get("SecurityOptions", [])]  # type: ignore[attr-defined]
        has_seccomp = any("seccomp" in o for o in sec)
        checks.append(Check(name="seccomp", ok=has_seccomp,
                            detail=", ".join(sec) or "none reported"))
    except DockerUnavailable as exc:
        checks.append(Check(name="docker", ok=False, detail=str(exc)))
    mode, nodes = gpu_mode(info)
    checks.append(Check(name="gpu", ok=True,
                        detail={"toolkit": "NVIDIA container toolkit: device requests",
                                "devices": f"no toolkit: pass device nodes {', '.join(nodes)} "
                                           "and bind the driver libraries",
                                "none": "no NVIDIA GPU: --device cpu (Triton interpreter)"}[mode]))
    if mode == "devices":
        libs = driver_libraries()
        checks.append(Check(
            name="driver libraries", ok="libcuda.so.1" in libs,
            detail=(f"bound read-only at {DRIVER_LIB_DIR} for --runtime cuda: "
                    + ", ".join(sorted(libs))) if "libcuda.so.1" in libs else
                   "libcuda.so.1 not found (ldconfig -p): --runtime cuda cannot reach the GPU; "
                   "--runtime host binds the host's driver libraries at their own paths"))
    checks.append(host_runtime_check(gpu=mode != "none"))
    checks.append(Check(name="output cap", ok=can_mount(),
                        detail="host tmpfs per container (root)" if can_mount() else
                        "not root: output folders are not size-capped; run as root"))
    checks.append(Check(name="debootstrap", ok=shutil.which("debootstrap") is not None,
                        detail=shutil.which("debootstrap")
                        or "missing: apt-get install debootstrap"))
    if engine is not None:
        runtime_tag = runtime_plan(RuntimeConfig(), download=False).tag
        for label, tag in (("rootfs image", rootfs_tag()), ("cpu runtime image", runtime_tag)):
            present = engine.image_id(tag) is not None
            missing = "" if present else ": missing (grader images build)"
            checks.append(Check(name=label, ok=present, detail=tag + missing))
    checks.append(Check(name="user", ok=True, detail=f"uid {os.geteuid()}"))
    return checks
