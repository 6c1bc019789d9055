"""A CUDA PyTorch base image made from this host's own installation, for a host that reaches no
registry (our H200 host): what `--runtime cuda --cuda-base TAG` builds FROM there.

    python bench/cuda_base.py [--tag grader-cuda-base:host] [--python PATH]

It copies (does not bind) the host's system folders (/usr, /etc and the top-level links into
/usr) and the interpreter's environment, keeping of its site-packages only what the harness and
PyTorch need (torch, triton, numpy, NVIDIA's CUDA wheels and torch's own dependencies), and
imports the result with `docker import`. Left out: the CUDA toolkit under /usr/local/cuda*
(PyTorch's wheels and Triton carry what they use), documentation, and every NVIDIA driver
library, so that a container of this image reaches the GPU only through what the grader binds
from the host (grade.driver_binds). Prints the image's size and the seconds each step took.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from grader.sandbox.docker_engine import get_engine
from grader.sandbox.gpus import DRIVER_LIBS

# Of the interpreter's site-packages: what `import torch, triton` and the harness load.
KEEP = ("torch", "torchgen", "functorch", "triton", "numpy", "numpy.libs", "nvidia", "cuda",
        "filelock", "typing_extensions", "sympy", "mpmath", "networkx", "jinja2", "markupsafe",
        "fsspec", "setuptools", "_distutils_hack", "packaging")
SYSTEM = ("usr", "etc", "bin", "sbin", "lib", "lib64")
EXCLUDE = ("usr/local/cuda*", "usr/share/doc", "usr/share/man", "usr/share/info",
           "usr/share/locale", "usr/lib/firmware", "usr/src",
           *(f"*/{lib}*" for lib in DRIVER_LIBS))


def site_members(site: Path) -> list[Path]:
    """The site-packages entries to keep: KEEP's packages and their metadata."""
    return [entry for entry in sorted(site.iterdir())
            if entry.name.split("-")[0].lower().removesuffix(".py") in KEEP]


def environment_paths(python: str) -> tuple[list[str], Path]:
    """Paths to copy for `python`'s environment (relative to /), and its site-packages."""
    out = subprocess.run([python, "-c", "import site, sys; print(sys.prefix); "
                          "print(sys.base_prefix); print(site.getsitepackages()[0])"],
                         capture_output=True, text=True, check=True).stdout.split()
    prefix, base, site = Path(out[0]), Path(out[1]), Path(out[2])
    paths = [str(p.relative_to("/")) for p in site_members(site)]
    for folder in (prefix, base):
        if not str(folder).startswith("/usr"):
            # The environment's own files but its site-packages (kept above, in part).
            paths += [str(p.relative_to("/")) for p in sorted(folder.iterdir())
                      if p.name != "lib"]
            lib = folder / "lib"
            if lib.is_dir():
                for sub in sorted(lib.iterdir()):
                    if sub.name.startswith("python") and (sub / "site-packages").is_dir():
                        paths += [str(p.relative_to("/")) for p in sorted(sub.iterdir())
                                  if p.name != "site-packages"]
                    else:
                        paths.append(str(sub.relative_to("/")))
    return paths, site


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tag", default="grader-cuda-base:host")
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    env_paths, site = environment_paths(args.python)
    members = [p for p in SYSTEM if os.path.lexists(f"/{p}")] + env_paths
    with tempfile.TemporaryDirectory(prefix="cuda-base-") as tmp:
        tarball = Path(tmp) / "base.tar"
        cmd = ["tar", "-C", "/", "-cf", str(tarball),
               *(f"--exclude={e}" for e in EXCLUDE), *members]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode not in (0, 1):  # 1: a file changed while read
            print(done.stderr[-2000:], file=sys.stderr)
            return 1
        t_tar = time.monotonic()
        image = get_engine().import_rootfs(tarball, args.tag, kind="cuda-base")
        size = tarball.stat().st_size
    t_import = time.monotonic()
    print(f"{args.tag}: {image[:19]}, {size / 2**30:.2f} GiB from {len(members)} paths "
          f"(site-packages {site}); tar {t_tar - t0:.1f} s, import {t_import - t_tar:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
