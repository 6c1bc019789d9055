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

`bind_conflicts` says which protected path (a suite, the output folder, the secret) a bind
would show the entry; the run refuses to start on any (errors.ExposedHostPath).
"""

from __future__ import annotations

import functools
import glob
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from grader.errors import UsageError
from grader.paths import cache_dir
from grader.sandbox.gpus import driver_library_links
from grader.sandbox.spec import Bind

# Prefixes shared with the rest of the system: binding one whole would show the host.
SHARED_PREFIXES = frozenset({"/", "/usr", "/usr/local"})
# Folders of the system's own libraries: bound file by file, never whole.
SYSTEM_LIB_DIRS = frozenset({"/usr/lib", "/usr/lib64", "/usr/lib32", "/usr/lib/x86_64-linux-gnu",
                             "/usr/lib/aarch64-linux-gnu", "/lib", "/lib64", "/lib32",
                             "/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu"})
# What gcc needs beside its own folder to link a shared object (Triton's launchers).
LINK_FILES = ("crt1.o", "Scrt1.o", "crti.o", "crtn.o", "libc.so", "libc_nonshared.a",
              "libm.so", "libgcc_s.so", "libgcc_s.so.1", "libdl.so", "libpthread.so")
# The standard library's extensions whose libraries are not bound: a kernel has no window,
# terminal or host database (tkinter alone would bring X11, fonts and image codecs).
UNUSED_EXTENSIONS = ("_tkinter", "readline", "_curses", "nis", "_dbm", "_gdbm", "_test",
                     "_xxtest", "xxlimited", "_ctypes_test")
COMPILER_PROGS = ("cc1", "collect2", "lto-wrapper", "as", "ld")
PASSWD = "root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:" \
         "/usr/sbin/nologin\n"
GROUP = "root:x:0:\nnogroup:x:65534:\n"

# Run by the host's interpreter with the container's flags (-I) and a bare environment, so
# that it loads what the harness will load.
PROBE = r"""
import json, os, sys, sysconfig
scheme = sysconfig.get_default_scheme()
out = {"executable": sys.executable, "version": sys.version.split()[0],
       "prefixes": sorted({sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}),
       "include": sysconfig.get_paths(scheme="posix_prefix" if scheme == "posix_local"
                                      else scheme)["include"],
       "packages": {}, "error": None}
try:
    import torch, triton
    out["packages"] = {m.__name__: os.path.dirname(m.__file__) for m in (torch, triton)}
except BaseException as exc:
    out["error"] = f"{type(exc).__name__}: {exc}"
out["path"] = [p for p in sys.path if os.path.isabs(p) and os.path.exists(p)]
mapped = set()
with open("/proc/self/maps") as f:
    for line in f:
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/"):
            mapped.add(parts[5].strip())
out["mapped"] = sorted(p for p in mapped if os.path.isfile(p))
print(json.dumps(out))
"""


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


def parse_ldd(text: str) -> list[str]:
    """The absolute paths `ldd` printed, as the loader named them ("libz.so.1 => /lib/...",
    "/lib64/ld-linux-x86-64.so.2 (0x...)"); libraries not found are left out."""
    found: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.endswith(":"):
            continue
        _, arrow, rest = line.partition("=> ")
        path = (rest if arrow else line).split(" (")[0].strip()
        if path.startswith("/") and path not in found:
            found.append(path)
    return found


def _ldd(files: Iterable[str]) -> list[str]:
    files = sorted(set(files))
    if not files:
        return []
    try:
        res = subprocess.run(["ldd", *files], capture_output=True, text=True, timeout=120,
                             check=False)
    except (OSError, subprocess.SubprocessError):
        return []
    return parse_ldd(res.stdout)


def _is_elf(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def probe(python: str) -> dict[str, object]:
    """Run the probe with `python` on the host; what it reports about itself."""
    exe = python if os.path.isabs(python) else shutil.which(python)
    if not exe or not os.path.isfile(exe):
        raise UsageError(f"--runtime host: no interpreter {python!r} on this host",
                         hint="name the host's Python that has torch and triton with --python")
    with tempfile.TemporaryDirectory(prefix="grader-probe-") as home:
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "HOME": home, "TMPDIR": home, "TRITON_CACHE_DIR": f"{home}/triton",
               "PYTHONDONTWRITEBYTECODE": "1"}
        try:
            res = subprocess.run([exe, "-I", "-c", PROBE], capture_output=True, text=True,
                                 timeout=300, check=False, env=env, cwd=home)
        except (OSError, subprocess.SubprocessError) as exc:
            raise UsageError(f"--runtime host: {exe} did not run: {exc}") from None
    try:
        info: dict[str, object] = json.loads(res.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise UsageError(f"--runtime host: {exe} could not describe itself",
                         hint=res.stderr[-1500:] or None) from None
    if info.get("error"):
        raise UsageError(f"--runtime host: {exe} cannot import torch and triton: "
                         f"{info['error']}", hint="name an interpreter that can, with --python")
    return info


def compiler_files() -> tuple[list[str], list[str], list[str]]:
    """gcc as Triton finds it (on PATH), as (programs, folders, link files): the driver and
    the programs it runs, GCC's own folders (cc1, crtbeginS.o, libgcc, its headers) and the
    C library's start files and link scripts. Empty where there is no gcc."""
    gcc = shutil.which("gcc")
    if gcc is None:
        return [], [], []

    def ask(flag: str) -> str:
        try:
            return subprocess.run([gcc, flag], capture_output=True, text=True, timeout=30,
                                  check=False).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    progs = [gcc]
    for name in COMPILER_PROGS:
        path = ask(f"-print-prog-name={name}")
        path = path if os.path.isabs(path) else (shutil.which(path) or "")
        if os.path.isfile(path):
            progs.append(path)
    folders = [os.path.dirname(p) for p in (ask("-print-libgcc-file-name"),
                                            ask("-print-prog-name=cc1")) if os.path.isabs(p)]
    links: list[str] = []
    for name in LINK_FILES:
        path = ask(f"-print-file-name={name}")
        if os.path.isabs(path) and os.path.isfile(path):
            links.append(os.path.normpath(path))
            links += _script_paths(path)
    return progs, sorted(set(folders)), links


def _script_paths(path: str) -> list[str]:
    """The absolute paths a linker script (libc.so: "GROUP ( /lib/.../libc.so.6 ... )")
    names; nothing for a real library."""
    if _is_elf(path) or os.path.getsize(path) > 64 << 10:
        return []
    text = Path(path).read_text(errors="replace")
    words = text.replace("(", " ").replace(")", " ").split()
    return [w for w in words if w.startswith("/") and os.path.isfile(w)]


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


def bind_conflicts(binds: Iterable[HostBind], protected: Iterable[tuple[str, Path, bool]]
                   ) -> list[str]:
    """Each protected path that a bind would show the container, as a sentence. `protected`:
    (what, path, whole); the path is shown when it lies inside a bound folder or is a bound
    file, and with `whole` (a suite, the secret: everything in it is protected) also when a
    bound folder lies inside it."""
    found: list[str] = []
    binds = list(binds)
    for what, path, whole in protected:
        real = os.path.realpath(path)
        for bind in binds:
            inside = _within(real, bind.host)
            if inside or (whole and bind.folder and _within(bind.host, real)):
                where = f"lies inside {bind.host}" if inside else f"holds {bind.host}"
                found.append(f"{what} {real} {where}, which --runtime host binds read-only "
                             f"into every container ({bind.why}, at {bind.container})")
                break
    return found


def describe(rt: HostRuntime) -> list[str]:
    """One line per bind, for `grader doctor`."""
    return [f"{b.container}" + (f" <- {b.host}" if b.host != b.container else "")
            + f"  ({b.why})" for b in rt.binds] + [f"env {k}={v}" for k, v in rt.env]


__all__ = ["HostBind", "HostRuntime", "bind_conflicts", "compiler_files", "describe",
           "etc_files", "host_runtime", "parse_ldd", "probe", "resolve"]


# Files the engine itself puts in every container (its own, not the host's; mtab is a link to
# /proc/mounts).
ENGINE_ETC = ("/etc/hostname", "/etc/hosts", "/etc/mtab", "/etc/resolv.conf")
# The folders of a host-runtime container's view that `expected_view` accounts for (the
# skeleton image's empty folders, the binds and their parents).
VIEW_ROOTS = ("/opt", "/etc", "/usr", "/home", "/root", "/srv", "/var")
SKELETON_DIRS = ("/opt", "/etc", "/usr", "/root", "/var")


def expected_view(binds: Iterable[HostBind], roots: Iterable[str] = VIEW_ROOTS) -> set[str]:
    """Every path a host-runtime container shows under `roots`, listed without entering a
    bind: the skeleton's empty folders, each bind's target and the folders made to hold it,
    and the engine's own files. What a test (or a hostile entry) sees beyond this is a leak."""
    roots = tuple(roots)
    seen = {d for d in SKELETON_DIRS if d in roots}
    seen.update(p for p in ENGINE_ETC if any(_within(p, r) for r in roots))
    binds = list(binds)
    folders = [b.container for b in binds if b.folder]
    for b in binds:
        if not any(_within(b.container, r) for r in roots):
            continue
        if any(b.container != f and _within(b.container, f) for f in folders):
            continue  # inside a bound folder: a mount point, which a listing does not enter
        path = b.container
        while path != "/":
            if any(_within(path, r) for r in roots):
                seen.add(path)
            path = os.path.dirname(path)
    return seen
