"""`grader doctor`: can this host grade? Each check says what it found and what to do."""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass

from grader.errors import DockerUnavailable
from grader.images import rootfs_tag
from grader.sandbox.capped import can_mount
from grader.sandbox.gpus import DRIVER_LIB_DIR, driver_libraries, gpu_mode
from grader.sandbox.runtimes import RuntimeConfig, runtime_for


@dataclass(frozen=True, kw_only=True)
class Check:
    name: str
    ok: bool
    detail: str
    lines: tuple[str, ...] = ()  # printed below the check, indented (the host runtime's binds)


def reap_leftovers() -> str:
    """`grader doctor --reap`: remove what graders that died left (sandbox/runs.py): the
    containers of their sessions, the tmpfs mounted in their folders, the folders. Runs
    whose process is alive are left alone."""
    from grader.sandbox.docker_engine import get_engine
    from grader.sandbox.runs import reap_dead

    return str(reap_dead(get_engine().reap))


def host_runtime_check(*, gpu: bool, python: str = sys.executable) -> Check:
    """What `--runtime host` would bind, read-only, into every container, resolved from this
    host's interpreter (grader/sandbox/host_runtime.py); on a GPU host with the driver and
    compiler."""
    from grader.errors import GraderError
    from grader.sandbox.host_runtime import describe, host_runtime

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
        from grader.sandbox.docker_engine import get_engine

        engine = get_engine()
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
        runtime_tag = runtime_for(RuntimeConfig()).plan(download=False).tag
        for label, tag in (("rootfs image", rootfs_tag()), ("cpu runtime image", runtime_tag)):
            present = engine.image_id(tag) is not None
            missing = "" if present else ": missing (grader images build)"
            checks.append(Check(name=label, ok=present, detail=tag + missing))
    checks.append(Check(name="user", ok=True, detail=f"uid {os.geteuid()}"))
    return checks
