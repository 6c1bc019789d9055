"""Asking the host what a host-runtime container needs (issue 18): its interpreter, which runs
PROBE to say what it is made of (`probe`), the C compiler Triton builds its launchers with
(`compiler_files`) and the libraries the loader links (`parse_ldd`). host_runtime.resolve
turns the answers into binds; split from host_runtime.py (issue 33: one job per module).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

from grader.errors import UsageError

# What gcc needs beside its own folder to link a shared object (Triton's launchers).
LINK_FILES = ("crt1.o", "Scrt1.o", "crti.o", "crtn.o", "libc.so", "libc_nonshared.a",
              "libm.so", "libgcc_s.so", "libgcc_s.so.1", "libdl.so", "libpthread.so")
COMPILER_PROGS = ("cc1", "collect2", "lto-wrapper", "as", "ld")

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



__all__ = ["PROBE", "compiler_files", "parse_ldd", "probe"]
