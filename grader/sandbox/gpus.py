"""The host's GPUs as containers reach them: how (NVIDIA's toolkit or raw device nodes), which
device nodes one container needs, and where the driver's user-space libraries are.

Used by the run layer to give each worker its GPU, and by `grader doctor` to say what it found.
"""

from __future__ import annotations

import glob
import os
import subprocess


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
