"""Host-runtime mode (issue 18) on this CPU host, against the real engine: a container shows
nothing of the host but what the host's interpreter is made of; the C compiler's binds build
a Triton launcher; an exposed layout is refused before anything runs; a hostile entry that
looks around sees the runtime alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grader.cli.selftest import Target, grade_case
from grader.paths import REPO
from grader.sandbox.docker_engine import DockerEngine
from grader.sandbox.host_runtime import resolve
from grader.sandbox.host_view import VIEW_ROOTS, expected_view
from grader.sandbox.runtimes import RuntimeConfig, runtime_for
from grader.sandbox.spec import Bind, ContainerSpec, Limits, Role
from grader.verdicts import Verdict

pytestmark = pytest.mark.docker

# What the container shows under VIEW_ROOTS, not entering mount points: each path, and
# which are mount points.
LISTING = r"""
import json, os, sys
roots = json.loads(sys.argv[1])
mounts = set()
for line in open("/proc/self/mountinfo"):
    mounts.add(line.split()[4].replace("\\040", " "))
seen, mounted = [], []
def visit(path):
    seen.append(path)
    if path in mounts:
        mounted.append(path)
        return
    if os.path.isdir(path) and not os.path.islink(path):
        for name in sorted(os.listdir(path)):
            visit(os.path.join(path, name))
for root in roots:
    if os.path.lexists(root):
        visit(root)
print(json.dumps({"seen": seen, "mounts": mounted}))
"""

# A C extension built the way Triton builds its GPU launchers (runtime/build.py: gcc with
# Python's headers, linked as a shared object), then loaded and called.
BUILD = r"""
from triton.runtime.build import compile_module_from_src
src = '''
#include <Python.h>
#include <math.h>
static PyObject *twice(PyObject *self, PyObject *arg) {
    return PyFloat_FromDouble(2.0 * sqrt(PyFloat_AsDouble(arg)));
}
static PyMethodDef methods[] = {{"twice", twice, METH_O, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "probe_launcher", NULL, -1, methods};
PyMODINIT_FUNC PyInit_probe_launcher(void) { return PyModule_Create(&mod); }
'''
m = compile_module_from_src(src, "probe_launcher", libraries=["m"])
print("built", m.twice(16.0))
"""


@pytest.fixture(scope="module")
def skeleton(engine: DockerEngine) -> str:
    return runtime_for(RuntimeConfig(kind="host", python=sys.executable)).ensure_image(engine).tag


def _run(engine: DockerEngine, session: str, image: str, python: str,
         binds: tuple[Bind, ...], env: dict[str, str], args: list[str]) -> str:
    spec = ContainerSpec(
        image=image, command=[python, "-I", *args], role=Role.PROBE, session=session,
        env={"HOME": "/tmp", "TMPDIR": "/tmp", "TRITON_CACHE_DIR": "/tmp/triton",
             "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", **env},
        binds=binds, limits=Limits(memory_bytes=2 << 30, pids=128, cpus=1.0,
                                   scratch_bytes=256 << 20, wall_s=120.0))
    state = engine.run(spec)
    assert state.exit_code == 0, state.logs[-3000:]
    return state.logs


def test_the_container_shows_only_the_runtime(engine: DockerEngine, session: str,
                                              skeleton: str) -> None:
    rt = resolve(sys.executable, gpu=False)
    logs = _run(engine, session, skeleton, rt.python, rt.as_binds(), dict(rt.env),
                ["-c", LISTING, json.dumps(VIEW_ROOTS)])
    view = json.loads(logs.strip().splitlines()[-1])
    expected = expected_view(rt.binds)
    assert set(view["seen"]) == expected, (sorted(set(view["seen"]) - expected),
                                           sorted(expected - set(view["seen"])))
    bound = {b.container for b in rt.binds if b.container.startswith(VIEW_ROOTS)}
    assert bound <= set(view["mounts"])
    # Nothing of the host's /etc but the loader's cache; passwd and group are ours.
    etc = {p for p in view["seen"] if p.startswith("/etc/")}
    assert etc == {"/etc/ld.so.cache", "/etc/passwd", "/etc/group", "/etc/hostname",
                   "/etc/hosts", "/etc/resolv.conf", "/etc/mtab"}
    # No folder of the system is bound whole: the interpreter's own install only.
    folders = {b.container for b in rt.binds if b.folder}
    assert not any(f in ("/usr", "/etc", "/opt", "/usr/lib", "/usr/lib/x86_64-linux-gnu",
                         "/usr/local", "/root", "/home") for f in folders), folders


def test_the_compiler_binds_build_a_triton_launcher(engine: DockerEngine, session: str,
                                                     skeleton: str) -> None:
    rt = resolve(sys.executable, gpu=True)  # on a GPU host: the driver's libraries too
    if not any(b.why == "compiler" for b in rt.binds):
        pytest.skip("no gcc on this host")
    logs = _run(engine, session, skeleton, rt.python, rt.as_binds(), dict(rt.env),
                ["-c", BUILD])
    assert "built 8.0" in logs


def test_a_layout_that_would_show_the_output_folder_is_refused(tmp_path: Path) -> None:
    """A venv's prefix is bound whole; reports written inside it would be readable by the
    next entry. The run stops before any container, naming the folder and the bind."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages",
                    str(venv)], check=True, timeout=120)
    bundle = tmp_path / "bundle.tar"
    subprocess.run([sys.executable, "-m", "grader", "bundle", "create",
                    str(REPO / "examples" / "triton"), "-o", str(bundle)], check=True,
                   capture_output=True, timeout=120)
    out = venv / "reports"
    res = subprocess.run([sys.executable, "-m", "grader", "run", str(bundle), "--runtime", "host",
                          "--python", str(venv / "bin" / "python"), "-o", str(out), "-q"],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert res.returncode == 5, res.stderr
    assert f"the output folder {out.resolve()} lies inside {venv.resolve()}" in res.stderr
    assert "interpreter prefix" in res.stderr and "hint:" in res.stderr
    assert not (out / "seed.secret").exists()  # refused before the secret was written


def test_a_hostile_entry_sees_the_runtime_alone(engine: DockerEngine, tmp_path: Path) -> None:
    """tests/cases/hostile_gpu/host_view_probe on the CPU: it lists and reads what it can;
    what it saw is the view `expected_view` predicts, with no suite file, secret or hidden
    table among it, and its verdict is the policy's, not `incorrect` (a breach)."""
    case = REPO / "tests" / "cases" / "hostile_gpu" / "host_view_probe"
    result = grade_case(engine, case, tmp_path,
                        Target(device="cpu", runtime="host", python=sys.executable))
    problem = result.report.problems[0]
    assert problem.verdict == Verdict.POLICY_VIOLATION, [
        (s.id, s.verdict, s.detail) for s in problem.shapes]
    assert result.leftovers == 0
    line = [x for x in (problem.stderr_excerpt or "").splitlines()
            if x.startswith("HOSTVIEW ")][-1]
    view = json.loads(line.removeprefix("HOSTVIEW "))
    rt = resolve(sys.executable, gpu=False)
    expected = expected_view(rt.binds, view["roots"])
    assert view["found"] == [] and view["hidden"] == 0
    assert view["count"] == len(expected) and view["digest"] == _digest(expected), view
    assert view["proc1_root"] is None  # pid 1's root is this container's own
    assert all(m.startswith(("/tmp", "/grader")) for m in view["odd_mounts"]), view


def _digest(paths: set[str]) -> str:
    import hashlib

    return hashlib.sha256("\n".join(sorted(paths)).encode()).hexdigest()[:16]


def test_an_honest_entry_passes_in_host_mode_with_public_reports(tmp_path: Path) -> None:
    """The runtime the binds give is enough to grade: examples/triton's vector_add passes,
    and `--public` marks the HTML while report.json stays the record."""
    bundle = tmp_path / "bundle.tar"
    subprocess.run([sys.executable, "-m", "grader", "bundle", "create",
                    str(REPO / "examples" / "triton"), "-o", str(bundle)], check=True,
                   capture_output=True, timeout=120)
    out = tmp_path / "out"
    res = subprocess.run([sys.executable, "-m", "grader", "run", str(bundle), "--runtime", "host",
                          "--problem", "vector_add", "--format", "json,html", "--public",
                          "-o", str(out), "-q"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    report = json.loads((out / "report.json").read_text())
    assert [s["verdict"] for p in report["problems"] for s in p["shapes"]] == ["passed"]
    assert 'id="public-report"' in (out / "report.html").read_text()
