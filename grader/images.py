"""Images without a registry: render Dockerfiles (pure), hash them with their inputs, build
what is missing.

Three layers: a Debian root filesystem made by debootstrap and imported; a runtime (Python,
torch, triton) installed offline from a host-made wheelhouse, or FROM a CUDA base image, or an
image of empty folders for the host's toolchain; a per-problem image adding the harness and the
problem's trusted files. Which runtime, and how its image is had, is the runtime object's say
(sandbox/runtimes.py): this module only renders, hashes and builds. Each tag is a hash of
everything that went into it, so an image that exists is reused and a change rebuilds.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import jinja2

from grader.errors import ImageBuildError
from grader.harness import protocol
from grader.paths import HARNESS_DIR, IMAGES_DIR, cache_dir
from grader.suite.load import SuiteProblem


class Builder(Protocol):
    """What images need of an engine (sandbox.engine.ContainerEngine has it): look an image
    up, build one, import a root filesystem."""

    def image_id(self, tag: str) -> str | None: ...

    def build(self, context: Path, tag: str, kind: str) -> str: ...

    def import_rootfs(self, tarball: Path, tag: str, kind: str) -> str: ...


# Host-runtime mode: an image with no files of its own, run with what the host's interpreter
# is made of bound read-only (air-gapped GPU hosts; grader/sandbox/host_runtime.py says what).
HOST_SKELETON_REPO = "grader-hostfs"
_SKELETON_DIRS = ("usr", "lib", "lib64", "lib32", "bin", "sbin", "etc", "opt", "tmp", "proc",
                  "dev", "sys", "root", "grader", "run", "var")
DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = os.environ.get("GRADER_DEBIAN_MIRROR", "http://deb.debian.org/debian")
DEBOOTSTRAP_INCLUDE = ("python3", "python3-venv", "ca-certificates")
# The runtime image's Python is Debian bookworm's, so the wheelhouse is for CPython 3.11.
WHEEL_TARGET = ("--python-version", "3.11", "--implementation", "cp", "--platform",
                "manylinux_2_28_x86_64", "--platform", "manylinux_2_17_x86_64",
                "--platform", "manylinux2014_x86_64")


@dataclass(frozen=True, kw_only=True)
class BuildPlan:
    """One image to have: its tag, its Dockerfile and the files of its build context."""

    kind: str
    tag: str
    dockerfile: str
    context: dict[str, Path] = field(default_factory=dict)  # name in context -> host file


def _env() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(IMAGES_DIR),
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                              autoescape=False)


def render(template: str, **values: object) -> str:
    """The Dockerfile text of `images/<template>.Dockerfile.j2` (pure)."""
    return _env().get_template(f"{template}.Dockerfile.j2").render(**values)


def _digest(parts: list[bytes]) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(hashlib.sha256(p).digest())
    return h.hexdigest()[:16]


def _file_digest(path: Path, *, by_name: bool = False) -> bytes:
    # Wheels are pinned and named by version: name and size identify them without reading GBs.
    if by_name:
        return f"{path.name}:{path.stat().st_size}".encode()
    return path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest()


def rootfs_tag() -> str:
    key = [DEBIAN_SUITE.encode(), DEBIAN_MIRROR.encode(), " ".join(DEBOOTSTRAP_INCLUDE).encode(),
           b"minbase"]
    return f"grader-rootfs:{_digest(key)}"


def requirements() -> list[str]:
    lines = (IMAGES_DIR / "requirements-cpu.txt").read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]


def wheelhouse(*, download: bool = True) -> Path:
    """The host's wheelhouse for the CPU runtime, downloaded once (pip resolves dependencies)."""
    reqs = requirements()
    key = _digest([r.encode() for r in reqs] + [" ".join(WHEEL_TARGET).encode()])
    path = cache_dir() / f"wheels-{key}"
    if (path / ".complete").exists() or not download:
        return path
    path.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
           "--only-binary=:all:", *WHEEL_TARGET, "-d", str(path), *reqs]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise ImageBuildError("downloading the runtime's wheels failed",
                              hint=(res.stderr or res.stdout)[-2000:])
    (path / ".complete").write_text("\n".join(reqs) + "\n")
    return path


def cpu_runtime_plan(*, download: bool = True) -> BuildPlan:
    """The CPU runtime: the imported root filesystem, with the wheelhouse installed offline."""
    wheels = wheelhouse(download=download)
    files = sorted(wheels.glob("*.whl")) if wheels.exists() else []
    text = render("runtime-cpu", rootfs=rootfs_tag(), debian_suite=DEBIAN_SUITE,
                  packages=requirements())
    parts = [text.encode()] + [_file_digest(f, by_name=True) for f in files]
    return BuildPlan(kind="runtime-cpu", tag=f"grader-runtime-cpu:{_digest(parts)}",
                     dockerfile=text, context={f"wheels/{f.name}": f for f in files})


def cuda_runtime_plan(cuda_base: str, python: str) -> BuildPlan:
    """The CUDA runtime: FROM `cuda_base`, whose interpreter `python` has torch and triton."""
    text = render("runtime-cuda", cuda_base=cuda_base, python=python)
    return BuildPlan(kind="runtime-cuda", tag=f"grader-runtime-cuda:{_digest([text.encode()])}",
                     dockerfile=text)


def harness_files() -> dict[str, Path]:
    return {f"harness/{p.name}": p for p in sorted(HARNESS_DIR.glob("*.py"))}


def problem_repo(suite: str, problem: str) -> str:
    """The repository of a problem's image: its tags are this and a content hash."""
    return f"grader-problem-{suite.lower().replace('.', '-')}-{problem.lower()}"


def problem_plan(runtime_tag: str, suite: str, sp: SuiteProblem) -> BuildPlan:
    text = render("problem", runtime=runtime_tag, suite=suite, problem=sp.id,
                  harness_dir=protocol.HARNESS, problem_dir=protocol.PROBLEM)
    context = harness_files()
    context.update({f"problem/{name}": sp.directory / name for name in sp.files()})
    parts = [text.encode()] + [k.encode() + _file_digest(p) for k, p in sorted(context.items())]
    return BuildPlan(kind="problem", tag=f"{problem_repo(suite, sp.id)}:{_digest(parts)}",
                     dockerfile=text, context=context)


def _stage_context(plan: BuildPlan, into: Path) -> None:
    (into / "Dockerfile").write_text(plan.dockerfile)
    for name, src in plan.context.items():
        dst = into / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(src, dst)  # wheels are large: a hard link costs nothing
        except OSError:
            shutil.copyfile(src, dst)


def make_rootfs(engine: Builder, tag: str) -> str:
    """debootstrap a minimal Debian with python3 and import it as `tag` (needs root)."""
    if shutil.which("debootstrap") is None:
        raise ImageBuildError("debootstrap is not installed",
                              hint="as root: apt-get install debootstrap (scripts/setup.sh does)")
    if os.geteuid() != 0:
        raise ImageBuildError("making the root filesystem needs root (debootstrap)")
    with tempfile.TemporaryDirectory(dir=cache_dir(), prefix="rootfs-") as tmp:
        root = Path(tmp) / "root"
        cmd = ["debootstrap", "--variant=minbase", f"--include={','.join(DEBOOTSTRAP_INCLUDE)}",
               DEBIAN_SUITE, str(root), DEBIAN_MIRROR]
        res = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if res.returncode != 0:
            raise ImageBuildError("debootstrap failed", hint=(res.stderr or res.stdout)[-2000:])
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            shutil.rmtree(root / junk, ignore_errors=True)
        tarball = Path(tmp) / "rootfs.tar"
        res = subprocess.run(["tar", "-C", str(root), "--numeric-owner", "-cf", str(tarball), "."],
                             capture_output=True, text=True, check=False)
        if res.returncode != 0:
            raise ImageBuildError("packing the root filesystem failed", hint=res.stderr[-2000:])
        return engine.import_rootfs(tarball, tag, kind="rootfs")


@dataclass(frozen=True, kw_only=True)
class Ensured:
    tag: str
    id: str
    built: bool


def ensure(engine: Builder, plan: BuildPlan, *, prepare: Callable[[], None] | None = None
           ) -> Ensured:
    """The image of `plan`, built only when no image has its tag yet; `prepare` runs first
    when it is built (a runtime's base: the root filesystem made, the CUDA base checked)."""
    existing = engine.image_id(plan.tag)
    if existing is not None:
        return Ensured(tag=plan.tag, id=existing, built=False)
    if prepare is not None:
        prepare()
    with tempfile.TemporaryDirectory(dir=cache_dir(), prefix="ctx-") as tmp:
        _stage_context(plan, Path(tmp))
        image_id = engine.build(Path(tmp), plan.tag, kind=plan.kind)
    return Ensured(tag=plan.tag, id=image_id, built=True)


def host_skeleton() -> tuple[str, bytes]:
    """The host-runtime image's tag and its one layer: empty top-level folders, and the host's
    /lib-style links as links. The tag is the layer's hash, so an image of that name made
    elsewhere (another tool's "skeleton", an older grader's) is never taken for ours: on the
    H200, 2026-12-03, a skeleton without /var of the same fixed tag was reused."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in _SKELETON_DIRS:
            info = tarfile.TarInfo(name)
            host = Path("/") / name
            if host.is_symlink():
                info.type, info.linkname = tarfile.SYMTYPE, os.readlink(host)
            else:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
    data = buf.getvalue()
    return f"{HOST_SKELETON_REPO}:{hashlib.sha256(data).hexdigest()[:16]}", data


def make_host_skeleton(engine: Builder, tag: str, data: bytes) -> str:
    """Import the host-runtime image (host_skeleton), to be run with the host's toolchain
    bound read-only."""
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        path = Path(tmp) / "skeleton.tar"
        path.write_bytes(data)
        return engine.import_rootfs(path, tag, kind="runtime-host")
