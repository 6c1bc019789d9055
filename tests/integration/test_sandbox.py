"""The hardening of entry containers, proven with `docker inspect` and from inside."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from grader.sandbox.capped import capped_dir
from grader.sandbox.spec import Bind, ContainerSpec, Limits, Role

pytestmark = pytest.mark.docker

PROBE = r"""
import json, os, socket, subprocess, sys
r = {}
r["uid"] = os.getuid(); r["gid"] = os.getgid()
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
r["cap_eff"] = status["CapEff"].strip(); r["no_new_privs"] = status["NoNewPrivs"].strip()
r["seccomp"] = status["Seccomp"].strip()
r["ifaces"] = sorted(os.listdir("/sys/class/net"))
try:
    socket.create_connection(("1.1.1.1", 53), timeout=2); r["net"] = "connected"
except OSError as e:
    r["net"] = type(e).__name__
for path in ("/etc/probe", "/grader/entry/probe", "/usr/probe"):
    try:
        open(path, "w").write("x"); r[path] = "written"
    except OSError as e:
        r[path] = e.errno
try:
    open("/grader/entry/kernel.py", "a").write("x"); r["kernel_write"] = "written"
except OSError as e:
    r["kernel_write"] = e.errno
r["kernel_read"] = open("/grader/entry/kernel.py").read()
# scratch: /tmp is a capped tmpfs that can execute (Triton loads .so files from it)
try:
    with open("/tmp/big", "wb") as f:
        for _ in range(64): f.write(b"\0" * (1 << 20))
    r["tmp_fill"] = "no limit"
except OSError as e:
    r["tmp_fill"] = e.errno
os.remove("/tmp/big")
open("/tmp/x.sh", "w").write("#!/bin/sh\necho exec-ok\n"); os.chmod("/tmp/x.sh", 0o755)
r["tmp_exec"] = subprocess.run(["/tmp/x.sh"], capture_output=True, text=True).stdout.strip()
try:
    with open("/grader/out/big", "wb") as f:
        for _ in range(64): f.write(b"\0" * (1 << 20))
    r["out_fill"] = "no limit"
except OSError as e:
    r["out_fill"] = e.errno
os.remove("/grader/out/big")
r["problem_dir"] = os.listdir("/grader/problem") if os.path.isdir("/grader/problem") else None
try:
    os.mknod("/tmp/dev", 0o600 | 0o060000, os.makedev(8, 0)); r["mknod"] = "made"
except OSError as e:
    r["mknod"] = e.errno
json.dump(r, open("/grader/out/probe.json", "w"))
"""


def _spec(image: str, session: str, command: list[str], binds: tuple[Bind, ...] = (),
          **limits: object) -> ContainerSpec:
    lim = Limits(memory_bytes=512 << 20, pids=64, cpus=1.0, scratch_bytes=16 << 20,
                 output_bytes=8 << 20, log_bytes=64 << 10, wall_s=60.0)
    lim = Limits(**{**lim.__dict__, **limits})  # type: ignore[arg-type]
    return ContainerSpec(image=image, command=command, role=Role.PROBE, session=session,
                         binds=binds, limits=lim, masks=("/grader/problem",))


@pytest.fixture()
def kernel_file(tmp_path: Path) -> Path:
    p = tmp_path / "kernel.py"
    p.write_text("def kernel(x):\n    return x\n")
    return p


def test_hardening_seen_by_inspect_and_from_inside(engine, runtime, session, kernel_file):  # type: ignore[no-untyped-def]
    with capped_dir(8 << 20) as out:
        binds = (Bind(host=str(kernel_file), container="/grader/entry/kernel.py"),
                 Bind(host=str(out), container="/grader/out", read_only=False))
        spec = _spec(runtime.tag, session, ["/opt/venv/bin/python3", "-c", PROBE], binds)
        with engine.start(spec) as c:
            hc = c.attrs()["HostConfig"]
            cfg = c.attrs()["Config"]
            state = c.wait()
            probe = json.loads((out / "probe.json").read_text())
        cid = c.id
    assert state.exit_code == 0, state.logs
    # docker inspect
    assert hc["NetworkMode"] == "none"
    assert hc["ReadonlyRootfs"] is True
    assert hc["CapDrop"] == ["ALL"]
    assert "no-new-privileges" in hc["SecurityOpt"]
    assert hc["PidsLimit"] == 64
    assert hc["Memory"] == 512 << 20 and hc["MemorySwap"] == 512 << 20
    assert hc["NanoCpus"] == 1_000_000_000
    assert "size=16777216" in hc["Tmpfs"]["/tmp"] and "exec" in hc["Tmpfs"]["/tmp"].split(",")
    assert "uid=65534" in hc["Tmpfs"]["/tmp"]
    assert hc["LogConfig"]["Config"]["max-size"] == str(64 << 10)
    assert cfg["User"] == "65534:65534"
    assert cfg["Labels"]["grader.session"] == session
    mounts = {m["Target"]: m for m in hc["Mounts"]}
    assert set(mounts) == {"/grader/entry/kernel.py", "/grader/out"}
    assert mounts["/grader/entry/kernel.py"]["ReadOnly"] is True
    # from inside
    assert probe["uid"] == 65534 and probe["gid"] == 65534
    assert int(probe["cap_eff"], 16) == 0
    assert probe["no_new_privs"] == "1"
    assert probe["seccomp"] == "2"  # filter mode: Docker's default profile
    assert probe["ifaces"] == ["lo"]
    assert probe["net"] != "connected"
    for path in ("/etc/probe", "/usr/probe"):
        assert probe[path] in (30, 13), probe  # EROFS or EACCES
    assert probe["kernel_write"] in (30, 13)
    assert probe["kernel_read"].startswith("def kernel")
    assert probe["tmp_fill"] == 28  # ENOSPC: the scratch tmpfs is capped
    assert probe["tmp_exec"] == "exec-ok"
    assert probe["out_fill"] == 28  # ENOSPC: the output folder is capped
    assert probe["problem_dir"] == []  # masked: the reference is not visible
    assert probe["mknod"] == 1  # EPERM
    # removed in finally
    assert not engine.client.containers.list(all=True, filters={"id": cid})


def test_wall_clock_limit_kills_from_outside(engine, runtime, session):  # type: ignore[no-untyped-def]
    spec = _spec(runtime.tag, session, ["sleep", "600"], wall_s=2.0)
    state = engine.run(spec)
    assert state.timed_out and state.exit_code is None
    assert 2.0 <= state.wall_s < 20


def test_fork_bomb_is_contained_by_pids_limit(engine, runtime, session):  # type: ignore[no-untyped-def]
    code = ("import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n"
            "            time.sleep(30); os._exit(0)\n        n += 1\nexcept OSError:\n"
            "    print('forks', n)\n")
    state = engine.run(_spec(runtime.tag, session, ["/opt/venv/bin/python3", "-c", code],
                             wall_s=30.0))
    assert "forks" in state.logs
    assert int(state.logs.split()[-1]) < 64


def test_memory_limit_kills(engine, runtime, session):  # type: ignore[no-untyped-def]
    code = "x = []\nwhile True:\n    x.append(bytearray(64 << 20))\n"
    state = engine.run(_spec(runtime.tag, session, ["/opt/venv/bin/python3", "-c", code]))
    assert state.oom_killed or state.exit_code == 137


def test_endless_output_is_capped(engine, runtime, session):  # type: ignore[no-untyped-def]
    code = "import sys\nfor _ in range(200000):\n    sys.stdout.write('x' * 1000 + '\\n')\n"
    state = engine.run(_spec(runtime.tag, session, ["/opt/venv/bin/python3", "-c", code]))
    assert len(state.logs.encode()) <= 64 << 10


def test_leftovers_are_reaped_by_label(engine, runtime, session):  # type: ignore[no-untyped-def]
    from grader.sandbox.docker_engine import to_create_kwargs

    kwargs = to_create_kwargs(_spec(runtime.tag, session, ["sleep", "600"]))
    engine.client.containers.run(**kwargs)  # as if the grader had crashed mid-run
    assert engine.reap(session) == 1
    assert not engine.client.containers.list(all=True,
                                             filters={"label": f"grader.session={session}"})


def test_capped_dir_is_a_sized_tmpfs() -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    with capped_dir(1 << 20) as d:
        mounts = Path("/proc/mounts").read_text()
        assert f" {d} tmpfs " in mounts
    assert not d.exists()
