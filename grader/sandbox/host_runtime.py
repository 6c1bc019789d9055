"""Host-runtime mode: what of the host an entry's container is given, resolved from the host's
interpreter, and nothing else (issue 18).

Until issue 18 the mode bound the host's /usr, /etc and /opt whole: an entry could read
anything world-readable there (a copy of the suites under /opt, with their hidden tables) and
print it into the report. Now the host's interpreter is run once, on the host, to say what it
is made of: its prefix, the folders on its sys.path, torch's and triton's packages and the
shared libraries they load. To that are added, on a GPU, the driver's libraries and the C
compiler Triton builds its launchers with. Every bind is read-only and as narrow as works:

- a dedicated Python install (a venv, pyenv, conda) is bound whole: it is the runtime; a shared
  prefix (/usr, /usr/local, /) never is, only its sys.path folders;
- a library in a system library folder (/usr/lib/x86_64-linux-gnu ...) is bound file by file,
  at the name the loader asks for and at its real name; a library elsewhere (a CUDA toolkit
  under /usr/local) brings its folder, whose siblings it loads by name at run time;
- of /etc only the loader's cache, and a passwd and group of two lines each written here
  (the host's own would list its accounts).

host_probe asks the host's interpreter and compiler; this module turns their answers into
binds. host_view.bind_conflicts says which protected path (a suite, the output folder, the
secret) a bind would show the entry; the run refuses to start on any (errors.ExposedHostPath).
"""

from __future__ import annotations

import functools
import glob
import os
from dataclasses import dataclass

from grader.paths import cache_dir
from grader.sandbox.gpus import driver_library_links
from grader.sandbox.host_probe import _is_elf, _ldd, compiler_files, probe
from grader.sandbox.spec import Bind

# Prefixes shared with the rest of the system: binding one whole would show the host.
SHARED_PREFIXES = frozenset({"/", "/usr", "/usr/local"})
# Folders of the system's own libraries: bound file by file, never whole.
SYSTEM_LIB_DIRS = frozenset({"/usr/lib", "/usr/lib64", "/usr/lib32", "/usr/lib/x86_64-linux-gnu",
                             "/usr/lib/aarch64-linux-gnu", "/lib", "/lib64", "/lib32",
                             "/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu"})
# The standard library's extensions whose libraries are not bound: a kernel has no window,
# terminal or host database (tkinter alone would bring X11, fonts and image codecs).
UNUSED_EXTENSIONS = ("_tkinter", "readline", "_curses", "nis", "_dbm", "_gdbm", "_test",
                     "_xxtest", "xxlimited", "_ctypes_test")
PASSWD = "root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:" \
         "/usr/sbin/nologin\n"
GROUP = "root:x:0:\nnogroup:x:65534:\n"


@dataclass(frozen=True, kw_only=True)
class HostBind:
    host: str  # the real file or folder
    container: str  # where the container sees it (the host path that names it)
    why: str  # for `grader doctor` and error messages

    @property
    def folder(self) -> bool:
        return os.path.isdir(self.host)


@dataclass(frozen=True, kw_only=True)
class HostRuntime:
    python: str  # the interpreter's path, the same inside the container
    version: str
    binds: tuple[HostBind, ...]
    env: tuple[tuple[str, str], ...] = ()

    def as_binds(self) -> tuple[Bind, ...]:
        return tuple(Bind(host=b.host, container=b.container) for b in self.binds)


def _real_dir(path: str) -> str:
    """`path` with its folder resolved but its own name kept: the name a loader asks for."""
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


class _Binds:
    """Binds collected in order, folders first; a file already visible through a bound folder
    (at the same place) is not bound again."""

    def __init__(self) -> None:
        self.items: dict[str, HostBind] = {}  # container path -> bind

    def folder(self, path: str, why: str) -> None:
        real = os.path.realpath(path)
        if os.path.isdir(real) and not self._covered(real, real):
            # A file bound earlier inside it shows the folder's own file: the folder shows it.
            for target, b in list(self.items.items()):
                if target != real and _within(target, real) and \
                        os.path.realpath(target) == os.path.realpath(b.host):
                    del self.items[target]
            self.items[real] = HostBind(host=real, container=real, why=why)

    def file(self, path: str, why: str) -> None:
        """Bind what `path` names at `path` (its folder resolved), and at its real name: a
        library is asked for by its soname (libz.so.1), a link to the real file."""
        real = os.path.realpath(path)
        if not os.path.isfile(real):
            return
        for target in dict.fromkeys((_real_dir(path), real)):
            if not self._covered(target, real):
                self.items[target] = HostBind(host=real, container=target, why=why)

    def _covered(self, target: str, real: str) -> bool:
        for b in self.items.values():
            if b.host == b.container and _within(target, b.container) and b.folder:
                return os.path.realpath(target) == real
        return False

    def result(self) -> tuple[HostBind, ...]:
        return tuple(sorted(self.items.values(), key=lambda b: b.container))


def etc_files() -> dict[str, str]:
    """/etc as the container sees it: container path -> host file."""
    folder = cache_dir() / "host-etc"
    folder.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}
    for name, text in (("passwd", PASSWD), ("group", GROUP)):
        path = folder / name
        if not path.is_file() or path.read_text() != text:
            tmp = folder / f".{name}.part"
            tmp.write_text(text)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        files[f"/etc/{name}"] = str(path)
    if os.path.isfile("/etc/ld.so.cache"):
        files["/etc/ld.so.cache"] = "/etc/ld.so.cache"
    return files


def resolve(python: str, *, gpu: bool) -> HostRuntime:
    """What a host-runtime container is given (see the module's docstring); `gpu`: with the
    driver's libraries and the C compiler (Triton compiles only for a real GPU)."""
    info = probe(python)
    b = _Binds()
    for prefix in info["prefixes"]:  # type: ignore[attr-defined]
        if os.path.realpath(prefix) not in SHARED_PREFIXES:
            b.folder(prefix, "interpreter prefix")
    for entry in info["path"]:  # type: ignore[attr-defined]
        if os.path.isdir(entry):
            b.folder(entry, "sys.path")
        else:
            b.file(entry, "sys.path")
    for pkg in info["packages"].values():  # type: ignore[attr-defined]
        b.folder(pkg, "package")
    exe = str(info["executable"])
    for link in _link_chain(exe):
        b.file(link, "interpreter")
    elves = [exe, *(p for p in info["mapped"] if _is_elf(p))]  # type: ignore[attr-defined]
    for pkg in info["packages"].values():  # type: ignore[attr-defined]
        elves += glob.glob(f"{pkg}/**/*.so*", recursive=True)
    for entry in info["path"]:  # type: ignore[attr-defined]
        if entry.endswith("lib-dynload"):
            elves += [p for p in glob.glob(f"{entry}/*.so")
                      if not os.path.basename(p).startswith(UNUSED_EXTENSIONS)]
    env: list[tuple[str, str]] = []
    if gpu:
        drivers = driver_library_links()
        for link in drivers:
            b.file(link, "driver")
        elves += list(drivers.values())
        cuda = [link for link in drivers if os.path.basename(link) == "libcuda.so.1"]
        if cuda:
            # Triton asks /sbin/ldconfig for libcuda otherwise, which is not there.
            env.append(("TRITON_LIBCUDA_PATH", os.path.dirname(_real_dir(cuda[0]))))
        progs, folders, links = compiler_files()
        for folder in folders:
            b.folder(folder, "compiler")
        if progs:
            b.folder(_include_dir(), "compiler headers")
            b.folder(str(info["include"]), "Python headers")
        for prog in progs:
            for link in _link_chain(prog):
                b.file(link, "compiler")
        for link in links:
            b.file(link, "compiler")
        elves += [os.path.realpath(p) for p in progs]
        elves += [p for f in folders for p in glob.glob(f"{f}/*.so")]
        elves += [p for f in folders for p in (f"{f}/cc1", f"{f}/collect2", f"{f}/lto-wrapper")
                  if os.path.isfile(p)]
    for lib in _ldd(p for p in elves if os.path.isfile(p)):
        _library(b, lib)
    for path in info["mapped"]:  # type: ignore[attr-defined]
        if not _is_elf(path):  # locale data, gconv's cache: opened by the C library
            b.file(path, "runtime data")
    for target, host in etc_files().items():
        b.items[target] = HostBind(host=host, container=target, why="etc")
    return HostRuntime(python=exe, version=str(info["version"]), binds=b.result(),
                       env=tuple(env))


def _include_dir() -> str:
    return "/usr/include"


def _library(b: _Binds, path: str) -> None:
    folder = os.path.realpath(os.path.dirname(path))
    real = os.path.realpath(path)
    if any(x.why == "driver" and x.host == real for x in b.items.values()):
        # A driver library: bound file by file at the names ldconfig lists, never its folder
        # (the H200's /usr/local/nvidia/lib64: bound whole, it hid its own file binds, which
        # the expected view counted, and showed the whole driver; issue 18).
        b.file(path, "driver")
        return
    if any(x.folder and _within(os.path.realpath(path), x.host) for x in b.items.values()):
        b.file(path, "library")  # its folder is bound; this adds the loader's name if elsewhere
    elif _too_wide(folder):
        b.file(path, "library")
    else:
        # Outside the system's folders (a CUDA toolkit): the folder, whose siblings the
        # library loads by name at run time (cuDNN's, nvrtc's builtins).
        b.folder(folder, "library folder")
        b.file(path, "library")


def _too_wide(folder: str) -> bool:
    """A folder that holds more than one program's libraries: its files are bound one by one."""
    return (folder in SYSTEM_LIB_DIRS or folder in SHARED_PREFIXES or folder.count("/") <= 1
            or folder in ("/usr/local/lib", "/usr/local/lib64"))


def _link_chain(path: str) -> list[str]:
    """`path` and every link it goes through to the real file, each as a name the container
    must have (a venv's bin/python -> /usr/bin/python3 -> python3.11)."""
    chain: list[str] = []
    current = os.path.abspath(path)
    for _ in range(16):
        chain.append(_real_dir(current))
        if not os.path.islink(current):
            break
        target = os.readlink(current)
        current = os.path.normpath(os.path.join(os.path.dirname(_real_dir(current)), target))
    return list(dict.fromkeys(chain))


@functools.lru_cache(maxsize=8)
def host_runtime(python: str, gpu: bool) -> HostRuntime:
    """`resolve`, once per run (each worker's sandbox asks)."""
    return resolve(python, gpu=gpu)


def describe(rt: HostRuntime) -> list[str]:
    """One line per bind, for `grader doctor`."""
    return [f"{b.container}" + (f" <- {b.host}" if b.host != b.container else "")
            + f"  ({b.why})" for b in rt.binds] + [f"env {k}={v}" for k, v in rt.env]


__all__ = ["HostBind", "HostRuntime", "describe", "etc_files", "host_runtime", "resolve"]
