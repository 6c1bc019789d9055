"""How GPUs reach containers: which device nodes each worker's containers get (one GPU a
worker, `--gpus 0,1,...`), and how the host's NVIDIA driver libraries are found and bound for
`--runtime cuda` without NVIDIA's container toolkit (doctor, runtimes.CudaRuntime). The run on
several GPUs at once needs a host with them (docs/benchmarks.md)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from grader.errors import UsageError
from grader.grading import grader as grade
from grader.grading.config import GradingOptions, Scheduling
from grader.grading.settings import GradingSettings
from grader.run.jobs import WorkerSetup, container_spec
from grader.sandbox import gpus as doctor
from grader.sandbox import runtimes
from grader.sandbox.gpus import (
    DRIVER_LIB_DIR,
    driver_libraries,
    gpu_mode,
    gpu_nodes,
    parse_ldconfig,
)
from grader.sandbox.host_runtime import HostBind, HostRuntime
from grader.sandbox.spec import Bind, Limits, Role

# As `ldconfig -p` printed it on the H200 host (2026-12-02), shortened (one path cut), with a
# 32-bit entry.
LDCONFIG = """\
1234 libs found in cache `/etc/ld.so.cache'
\tlibnvidia-ml.so.1 (libc6,x86-64) => /usr/local/nvidia/lib64/libnvidia-ml.so.1
\tlibnvidia-ml.so.1 (libc6,x86-64) => /lib/libnvidia-ml.so.1
\tlibnvidia-gpucomp.so.580.159.04 (libc6,x86-64) => /usr/local/nvidia/lib64/libnvidia-gpucomp.so.5
\tlibcudart.so.13 (libc6,x86-64) => /usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.13
\tlibcuda.so.1 (libc6) => /usr/lib/i386-linux-gnu/libcuda.so.1
\tlibcuda.so.1 (libc6,x86-64) => /usr/local/nvidia/lib64/libcuda.so.1
\tlibcudadebugger.so.1 (libc6,x86-64) => /usr/local/nvidia/lib64/libcudadebugger.so.1
\tlibc.so.6 (libc6,x86-64) => /lib/x86_64-linux-gnu/libc.so.6
"""


def test_ldconfig_gives_the_drivers_64_bit_libraries_first_entry_first() -> None:
    assert parse_ldconfig(LDCONFIG) == {
        "libnvidia-ml.so.1": "/usr/local/nvidia/lib64/libnvidia-ml.so.1",
        "libnvidia-gpucomp.so.580.159.04": "/usr/local/nvidia/lib64/libnvidia-gpucomp.so.5",
        "libcuda.so.1": "/usr/local/nvidia/lib64/libcuda.so.1",
        "libcudadebugger.so.1": "/usr/local/nvidia/lib64/libcudadebugger.so.1",
    }  # not CUDA's runtime (libcudart: the image brings it), not 32-bit, not libc


def _driver(tmp_path: Path) -> Path:
    """A driver's files as installed: the versioned file and its soname link."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "libcuda.so.580.159.04").write_bytes(b"\x7fELF")
    (lib / "libcuda.so.1").symlink_to("libcuda.so.580.159.04")
    (lib / "libcuda.so").symlink_to("libcuda.so.1")
    return lib


def test_each_name_is_bound_to_the_real_file_behind_it(tmp_path: Path) -> None:
    lib = _driver(tmp_path)
    text = (f"\tlibcuda.so.1 (libc6,x86-64) => {lib}/libcuda.so.1\n"
            f"\tlibcuda.so (libc6,x86-64) => {lib}/libcuda.so\n"
            f"\tlibnvidia-ml.so.1 (libc6,x86-64) => {lib}/libnvidia-ml.so.1\n")  # gone
    real = str(lib / "libcuda.so.580.159.04")
    assert driver_libraries(text) == {"libcuda.so": real, "libcuda.so.1": real}


def test_without_ldconfig_the_usual_folders_are_searched(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    lib = _driver(tmp_path)
    monkeypatch.setattr(doctor, "_LIB_DIRS", (str(tmp_path / "none"), str(lib)))
    found = driver_libraries("")
    assert set(found) == {"libcuda.so", "libcuda.so.1", "libcuda.so.580.159.04"}
    assert set(found.values()) == {str(lib / "libcuda.so.580.159.04")}


def test_the_binds_are_read_only_files_in_the_images_library_folder(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtimes, "driver_libraries", lambda: {
        "libcuda.so.1": "/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04",
        "libnvidia-ml.so.1": "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.159.04"})
    binds, env = runtimes.driver_binds()
    assert binds == (
        Bind(host="/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04",
             container=f"{DRIVER_LIB_DIR}/libcuda.so.1"),
        Bind(host="/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.159.04",
             container=f"{DRIVER_LIB_DIR}/libnvidia-ml.so.1"))
    assert all(b.read_only for b in binds)
    # Triton asks ldconfig for libcuda unless told; the image's cache does not list the folder.
    setup = WorkerSetup(engine=None, session="s", python="/usr/bin/python3", device="cuda",  # type: ignore[arg-type]
                 extra_binds=binds, extra_env=env)
    spec = container_spec(setup, "img", Role.ENTRY, [], Limits())
    assert spec.env["TRITON_LIBCUDA_PATH"] == DRIVER_LIB_DIR
    assert spec.binds[:2] == binds


def test_no_libcuda_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtimes, "driver_libraries", lambda: {})
    with pytest.raises(UsageError, match=r"no libcuda\.so\.1 is found"):
        runtimes.driver_binds()


NODES = ["/dev/nvidia-caps", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia0",
         "/dev/nvidia1", "/dev/nvidiactl"]  # as on the H200 host, with a second GPU


class FakeEngine:
    def __init__(self, runtimes: dict[str, object] | None = None) -> None:
        self.runtimes = runtimes or {}

    def info(self) -> dict[str, object]:
        return {"Runtimes": self.runtimes}

    def clone(self) -> FakeEngine:  # each worker's own client
        return FakeEngine(self.runtimes)


@pytest.fixture()
def two_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor.glob, "glob", lambda pattern: list(NODES)
                        if pattern == "/dev/nvidia*" else [])
    monkeypatch.setattr(doctor.os.path, "exists", lambda path: path in NODES)


@pytest.mark.usefixtures("two_gpus")
def test_each_gpu_gets_its_own_node_and_the_shared_ones_never_the_others() -> None:
    assert gpu_mode({"Runtimes": {"runc": {}}}) == ("devices", NODES)
    assert gpu_mode({"Runtimes": {"nvidia": {}}})[0] == "toolkit"
    assert gpu_nodes(NODES, 1) == ["/dev/nvidia1", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                                   "/dev/nvidiactl"]
    assert "/dev/nvidia0" not in gpu_nodes(NODES, 1)


@pytest.mark.usefixtures("two_gpus")
def test_one_worker_per_gpu_each_with_its_gpu_alone(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    monkeypatch.setattr(runtimes, "driver_libraries", lambda: {"libcuda.so.1": "/lib/libcuda.so"})
    # The host runtime's binds come from running the host's interpreter (host_runtime.py,
    # tested in test_host_binds.py and tests/integration/test_host_runtime.py).
    libcuda = HostBind(host="/usr/lib/libcuda.so.580", container="/usr/lib/libcuda.so.1",
                       why="driver")
    monkeypatch.setattr(runtimes, "host_runtime", lambda python, gpu: HostRuntime(
        python="/opt/py/bin/python", version="3.11", binds=(libcuda,)))
    for kind, bound in (("host", False), ("cuda", True)):
        cfg = GradingOptions(bundle=tmp_path / "b.tar", out_dir=tmp_path,
                             settings=GradingSettings(device="cuda", runtime=kind),
                             scheduling=Scheduling(gpus=(0, 1)))
        g = grade.Grader(cfg, FakeEngine(), None, lambda _m: None)  # type: ignore[arg-type]
        workers = g.workers()
        assert [w.gpu.index for w in workers if w.gpu] == [0, 1]
        assert [w.gpu.device_nodes[0] for w in workers if w.gpu] == ["/dev/nvidia0",
                                                                     "/dev/nvidia1"]
        drivers = [b for w in workers for b in w.extra_binds
                   if b.container.startswith(DRIVER_LIB_DIR)]
        assert bool(drivers) == bound  # the host runtime binds them where the host has them
    cfg = GradingOptions(bundle=tmp_path / "b.tar", out_dir=tmp_path,
                         settings=GradingSettings(device="cuda", runtime="host"),
                         scheduling=Scheduling(gpus=(2,)))
    with pytest.raises(UsageError, match="GPU 2 is not on this host"):
        grade.Grader(cfg, FakeEngine(), None, lambda _m: None).workers()  # type: ignore[arg-type]
    cuda = replace(cfg, scheduling=Scheduling(gpus=(1,)),
                   settings=cfg.settings.but(runtime="cuda"))
    toolkit = grade.Grader(cuda, FakeEngine({"nvidia": {}}), None,  # type: ignore[arg-type]
                           lambda _m: None).workers()
    assert toolkit[0].gpu is not None and toolkit[0].gpu.mode == "toolkit"
    assert toolkit[0].extra_binds == ()  # the toolkit brings the driver itself
