"""Host-runtime binds (issue 18), without Docker: how the loader's answers become binds, which
layouts are refused, and what a container's view must be. The real resolution on this host is
in tests/integration/test_host_runtime.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from grader.errors import EXIT_CODES, ExposedHostPath
from grader.grading import grader as grade
from grader.grading.config import GradingOptions
from grader.grading.settings import GradingSettings
from grader.sandbox import host_runtime, runtimes
from grader.sandbox.gpus import driver_library_links
from grader.sandbox.host_probe import _script_paths, parse_ldd
from grader.sandbox.host_runtime import (
    HostBind,
    HostRuntime,
    _Binds,
    _link_chain,
    _too_wide,
    _within,
)
from grader.sandbox.host_view import bind_conflicts, expected_view

# As `ldd` printed it on this project's CPU host (2026-12-02), two files at once.
LDD = """/usr/bin/ld:
\tlinux-vdso.so.1 (0x00007f447d4d1000)
\tlibbfd-2.40-system.so => /lib/x86_64-linux-gnu/libbfd-2.40-system.so (0x00007f447d206000)
\tlibz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x00007f447cfbe000)
\tlibcuda.so.1 => not found
\t/lib64/ld-linux-x86-64.so.2 (0x00007f447d4d3000)
/usr/lib/gcc/x86_64-linux-gnu/12/cc1:
\tlibz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x00007f5e84462000)
\tlibmpc.so.3 => /lib/x86_64-linux-gnu/libmpc.so.3 (0x00007f5e8453b000)
"""


def test_ldd_output_gives_each_path_once_as_the_loader_named_it() -> None:
    assert parse_ldd(LDD) == ["/lib/x86_64-linux-gnu/libbfd-2.40-system.so",
                              "/lib/x86_64-linux-gnu/libz.so.1",
                              "/lib64/ld-linux-x86-64.so.2",
                              "/lib/x86_64-linux-gnu/libmpc.so.3"]


def test_a_library_is_bound_at_its_loader_name_and_its_real_name(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "libz.so.1.2.13").write_bytes(b"\x7fELF")
    (lib / "libz.so.1").symlink_to("libz.so.1.2.13")
    b = _Binds()
    b.file(str(lib / "libz.so.1"), "library")
    real = str((lib / "libz.so.1.2.13").resolve())
    assert {(x.container, x.host) for x in b.result()} == {
        (str(lib.resolve() / "libz.so.1"), real), (real, real)}


def test_a_file_inside_a_bound_folder_is_not_bound_again(tmp_path: Path) -> None:
    prefix = tmp_path / "venv"
    (prefix / "lib").mkdir(parents=True)
    (prefix / "lib" / "libpython3.so").write_bytes(b"\x7fELF")
    b = _Binds()
    b.folder(str(prefix), "interpreter prefix")
    b.file(str(prefix / "lib" / "libpython3.so"), "library")
    b.folder(str(prefix / "lib"), "sys.path")
    assert [x.container for x in b.result()] == [str(prefix.resolve())]


def test_system_folders_are_never_bound_whole() -> None:
    for folder in ("/usr/lib/x86_64-linux-gnu", "/usr/lib", "/lib64", "/usr", "/usr/local",
                   "/opt", "/home", "/usr/local/lib"):
        assert _too_wide(folder), folder
    assert not _too_wide("/usr/local/cuda-12.8/targets/x86_64-linux/lib")


def test_a_venv_interpreter_brings_each_link_to_the_real_file(tmp_path: Path) -> None:
    real = tmp_path / "usr" / "bin" / "python3.11"
    real.parent.mkdir(parents=True)
    real.write_bytes(b"\x7fELF")
    (tmp_path / "usr" / "bin" / "python3").symlink_to("python3.11")
    venv_py = tmp_path / "venv" / "bin" / "python"
    venv_py.parent.mkdir(parents=True)
    venv_py.symlink_to(tmp_path / "usr" / "bin" / "python3")
    root = str(tmp_path.resolve())
    assert _link_chain(str(venv_py)) == [f"{root}/venv/bin/python", f"{root}/usr/bin/python3",
                                        f"{root}/usr/bin/python3.11"]


def test_a_linker_script_names_the_files_it_pulls_in(tmp_path: Path) -> None:
    target = tmp_path / "libc.so.6"
    target.write_bytes(b"\x7fELF")
    script = tmp_path / "libc.so"
    script.write_text(f"/* GNU ld script */\nOUTPUT_FORMAT(elf64-x86-64)\nGROUP ( {target} "
                      f"{tmp_path}/missing.a AS_NEEDED ( {target} ) )\n")
    assert _script_paths(str(script)) == [str(target), str(target)]
    assert _script_paths(str(target)) == []  # a real library is not read as a script


def test_driver_libraries_are_bound_where_ldconfig_names_them(tmp_path: Path) -> None:
    real = tmp_path / "libcuda.so.580.159.04"
    real.write_bytes(b"\x7fELF")
    (tmp_path / "libcuda.so.1").symlink_to(real.name)
    text = (f"\tlibcuda.so.1 (libc6,x86-64) => {tmp_path}/libcuda.so.1\n"
            f"\tlibcuda.so.1 (libc6) => /usr/lib/i386-linux-gnu/libcuda.so.1\n"
            f"\tlibz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1\n")
    assert driver_library_links(text) == {f"{tmp_path}/libcuda.so.1": str(real.resolve())}


def _bind(path: str, why: str = "interpreter prefix") -> HostBind:
    return HostBind(host=path, container=path, why=why)


def test_conflicts_name_what_would_be_shown_and_through_which_bind(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "suites").mkdir(parents=True)
    binds = [_bind(str(venv))]
    found = bind_conflicts(binds, [("the suites folder", venv / "suites", True),
                                   ("the output folder", tmp_path / "reports", False),
                                   ("the temporary folder", tmp_path, False)])
    assert found == [f"the suites folder {venv / 'suites'} lies inside {venv}, which --runtime "
                     f"host binds read-only into every container (interpreter prefix, at "
                     f"{venv})"]
    # A bound folder inside a suite shows part of it; inside the output folder it does not.
    assert bind_conflicts(binds, [("the suite", tmp_path, True)]) == [
        f"the suite {tmp_path} holds {venv}, which --runtime host binds read-only into every "
        f"container (interpreter prefix, at {venv})"]
    assert bind_conflicts(binds, [("the output folder", tmp_path, False)]) == []
    # A bound file: only that file.
    files = [HostBind(host="/etc/ld.so.cache", container="/etc/ld.so.cache", why="etc")]
    assert bind_conflicts(files, [("the checkpoint", Path("/etc"), True)]) == []


def test_the_run_refuses_an_exposed_layout_before_anything_is_written(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    venv.mkdir()
    monkeypatch.setattr(runtimes, "host_runtime", lambda python, gpu: HostRuntime(
        python=f"{venv}/bin/python", version="3.11", binds=(_bind(str(venv)),)))
    cfg = GradingOptions(bundle=tmp_path / "b.tar", out_dir=venv / "out",
                         suite_roots=(tmp_path,), settings=GradingSettings(runtime="host"))
    suite = type("S", (), {"directory": tmp_path / "demo"})()
    with pytest.raises(ExposedHostPath) as err:
        grade.check_host_binds(cfg, suite, grade.Checkpoint(cfg.out_dir))  # type: ignore[arg-type]
    text = str(err.value)
    for what in ("the output folder", "the checkpoint", "the seed secret's file"):
        assert f"{what} " in text, what
    assert f"the suites folder {tmp_path} holds {venv}" in text
    assert err.value.hint and "grader doctor" in err.value.hint
    assert EXIT_CODES["ExposedHostPath"] == 5
    assert not (venv / "out").exists()


def test_a_host_runtime_sandbox_uses_the_probed_interpreter_and_its_binds(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    rt = HostRuntime(python="/opt/py/bin/python3.11", version="3.11",
                     binds=(_bind("/opt/py"),), env=(("TRITON_LIBCUDA_PATH", "/usr/lib"),))
    monkeypatch.setattr(runtimes, "host_runtime", lambda python, gpu: rt)
    cfg = GradingOptions(bundle=tmp_path / "b.tar", out_dir=tmp_path,
                         settings=GradingSettings(runtime="host"), python="python3")
    setup = grade.worker_setup(cfg, None, "s")  # type: ignore[arg-type]
    assert setup.python == "/opt/py/bin/python3.11"
    assert [(b.host, b.container, b.read_only) for b in setup.extra_binds] == [
        ("/opt/py", "/opt/py", True)]
    assert setup.extra_env == rt.env


def test_the_expected_view_is_the_binds_and_the_folders_that_hold_them() -> None:
    binds = [_bind("/opt/grader/.venv"),
             HostBind(host="/usr/lib/x86_64-linux-gnu/libz.so.1.2.13",
                      container="/usr/lib/x86_64-linux-gnu/libz.so.1", why="library"),
             HostBind(host="/cache/passwd", container="/etc/passwd", why="etc"),
             _bind("/tmp/elsewhere")]
    assert expected_view(binds) == {
        "/opt", "/etc", "/usr", "/root", "/var", "/opt/grader", "/opt/grader/.venv",
        "/usr/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu/libz.so.1",
        "/etc/passwd", "/etc/hostname", "/etc/hosts", "/etc/mtab", "/etc/resolv.conf"}


def test_our_passwd_names_no_host_account(monkeypatch: pytest.MonkeyPatch, tmp_path: Path
                                          ) -> None:
    monkeypatch.setenv("GRADER_CACHE", str(tmp_path))
    files = host_runtime.etc_files()
    users = [line.split(":")[0] for line in Path(files["/etc/passwd"]).read_text().splitlines()]
    assert users == ["root", "nobody"]
    assert oct(os.stat(files["/etc/group"]).st_mode & 0o777) == "0o644"
    assert set(files) <= {"/etc/passwd", "/etc/group", "/etc/ld.so.cache"}


# The H200 (2026-12-02): the driver lives in /usr/local/nvidia/lib64, and /usr/lib holds links
# to it; `ldconfig -p` lists both. Each name is bound, and ldd named the folder's libcuda.so.1.
H200_DRIVER = {"libcuda.so": "1", "libnvidia-ml.so": "1", "libnvidia-nvvm.so": "4",
               "libnvidia-gpucomp.so": None}
H200_VERSION = "580.159.04"


def _h200_layout(root: Path) -> tuple[Path, str]:
    """Fake driver files under `root` as on the H200, and its `ldconfig -p` listing."""
    nv = root / "usr" / "local" / "nvidia" / "lib64"
    usr_lib = root / "usr" / "lib"
    nv.mkdir(parents=True)
    usr_lib.mkdir(parents=True)
    (nv / "libnvidia-cfg.so.1").write_bytes(b"\x7fELF")  # the driver's rest: never shown
    lines = []
    for lib, major in H200_DRIVER.items():
        real = nv / f"{lib}.{H200_VERSION}"
        real.write_bytes(b"\x7fELF")
        names = [lib] + ([f"{lib}.{major}"] if major else [f"{lib}.{H200_VERSION}"])
        for name in names:
            if name != real.name:
                (nv / name).symlink_to(real.name)
            (usr_lib / name).symlink_to(f"../local/nvidia/lib64/{real.name}")
            lines += [f"\t{name} (libc6,x86-64) => {nv / name}",
                      f"\t{name} (libc6,x86-64) => {usr_lib / name}"]
    return nv, "\n".join(lines) + "\n"


def _container_view(binds: list[HostBind], root: str, scratch: Path) -> set[str]:
    """What a container shows under `root` with `binds`, as the GPU tests list it: Docker mounts
    shallow targets first, creating what is missing, and the listing enters no mount point."""
    folders: list[str] = []
    for b in sorted(binds, key=lambda b: b.container.count("/")):
        target = scratch / b.container.lstrip("/")
        if any(_within(b.container, f) for f in folders):
            # The folder shows the host's: Docker would refuse a mount point missing there.
            assert os.path.lexists(b.container), b
            continue
        if b.folder:
            target.mkdir(parents=True, exist_ok=True)
            folders.append(b.container)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.touch()
    mounts = {b.container for b in binds}
    seen: list[str] = []

    def visit(path: str) -> None:
        seen.append(path)
        real = scratch / path.lstrip("/")
        if path in mounts or not real.is_dir() or real.is_symlink():
            return
        for name in sorted(os.listdir(real)):
            visit(os.path.join(path, name))

    visit(root)
    assert len(seen) == len(set(seen))
    return set(seen)


def test_the_h200_driver_layout_is_bound_by_name_and_seen_as_expected(tmp_path: Path) -> None:
    host = tmp_path / "host"
    nv, ldconfig = _h200_layout(host)
    toolkit = host / "opt" / "cuda" / "lib64"
    toolkit.mkdir(parents=True)
    (toolkit / "libcudart.so.13").write_bytes(b"\x7fELF")
    (toolkit / "libnvrtc-builtins.so.13").write_bytes(b"\x7fELF")
    b = _Binds()
    drivers = driver_library_links(ldconfig)
    assert len(drivers) == 2 * 2 * len(H200_DRIVER)  # each name, in both folders
    for link in drivers:  # as resolve() does: the driver first, then what ldd names
        b.file(link, "driver")
    b.file(str(toolkit / "libcudart.so.13"), "interpreter")
    host_runtime._library(b, str(nv / "libcuda.so.1"))  # ldd: libcuda.so.1 => <nv>/...
    host_runtime._library(b, str(toolkit / "libcudart.so.13"))
    binds = list(b.result())
    nv_real = str(nv.resolve())
    # The driver: file by file, never its folder (which holds the rest of the driver).
    assert not [x for x in binds if x.folder and _within(nv_real, x.container)], binds
    in_nv = {os.path.basename(x.container) for x in binds if os.path.dirname(x.container)
             == nv_real}
    assert in_nv == {p.name for p in nv.iterdir()} - {"libnvidia-cfg.so.1"}
    assert all(x.why == "driver" for x in binds if x.container.startswith(nv_real))
    # A toolkit's folder is bound whole, and the file bound in it before is not bound again.
    tk = str(toolkit.resolve())
    assert [x.container for x in binds if _within(x.container, tk)] == [tk]
    root = str(host.resolve())
    seen = _container_view(binds, root, tmp_path / "container")
    assert seen == expected_view(binds, [root])
    assert f"{nv_real}/libnvidia-cfg.so.1" not in seen


def test_paths_inside_a_bound_folder_are_not_expected(tmp_path: Path) -> None:
    """A file bound inside a bound folder is a mount point that no listing reaches: counting it
    made the H200's expected view 20 paths larger than what the container showed."""
    folder = tmp_path / "lib"
    folder.mkdir()
    (folder / "libx.so.1").write_bytes(b"\x7fELF")
    root = str(tmp_path.resolve())
    binds = [_bind(str(folder.resolve())),
             _bind(str(folder.resolve() / "libx.so.1"), "driver")]
    assert expected_view(binds, [root]) == {root, str(folder.resolve())}
    assert _container_view(binds, root, tmp_path / "container") == expected_view(binds, [root])
