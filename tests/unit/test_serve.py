"""An entry's serving container without Docker (issue 32): the warden in serve mode
(harness/serve.py) run as a subprocess on a copy of the harness whose protocol points its
container paths at temporary folders, driving real workers of a tiny entry through the real
harness on the CPU. The test plays the host: it writes the spawn and start requests and
the job, and reads the frames from the warden's stdout.

Outside a container the warden is not pid 1: it is its workers' subreaper and ends its
descendants, not every process; the last test runs it as pid 1 of namespaces of its own
(unshare), where the container's path (every process, SysV IPC) is taken."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grader.harness import protocol
from grader.harness.protocol import (
    ARMED,
    DEVICE_ENV,
    ENTRY_MODE,
    GONE,
    JOB_FILE,
    READY,
    RECIPE_DIR,
    REFERENCE_FILE,
    RESULT,
    SERVE_DIR,
    SERVE_MODE,
    STANDBY,
    TAMPERING,
    WORKER_ENV,
    WORKER_KEY,
    ZYGOTE_MODE,
    spawn_file,
    start_file,
)
from grader.paths import REPO

HARNESS = Path(protocol.__file__).resolve().parent
TIMEOUT_S = 120.0

RECIPE = """
import torch
def make_inputs(seed, device, n):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, generator=g),)
"""

# The entry: what each call does is the test's control file's word (read at call time).
KERNEL = r'''
import ctypes, json, os, signal, time
from pathlib import Path
WORK = Path({work!r})
def _siblings():
    """The warden's other children, oldest first: the zygote, then the gated workers."""
    me, parent, found = os.getpid(), os.getppid(), []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != me:
            try:
                raw = open(f"/proc/{{name}}/stat").read()
            except OSError:
                continue
            fields = raw[raw.rfind(")") + 2:].split()
            if int(fields[1]) == parent and fields[0] != "Z":
                found.append((int(fields[19]), int(name)))
    return [pid for _, pid in sorted(found)]
def kernel(x):
    word = (WORK / "control").read_text().strip()
    if word == "leave":  # a daemon, files in the scratch places, a SysV segment
        scratch = WORK / "scratch" / "tmp"
        (scratch / "triton" / "deep").mkdir(parents=True)
        (scratch / "triton" / "deep" / "kernel.so").write_text("cached")
        (scratch / "locked").mkdir()
        (scratch / "locked" / "f").write_text("x")
        os.chmod(scratch / "locked", 0)
        (WORK / "scratch" / "shm" / "seg").write_text("shared")
        libc = ctypes.CDLL(None, use_errno=True)
        (WORK / "shm_id").write_text(str(libc.shmget(0x5EED, 4096, 0o1600)))
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                (WORK / "daemon").write_text(str(os.getpid()))
                end = time.monotonic() + 60
                while time.monotonic() < end:  # writes its state back as it is wiped
                    (WORK / "scratch" / "tmp" / "beat").write_text(str(time.monotonic()))
                    time.sleep(0.02)
                os._exit(0)
            os._exit(0)
        while not (WORK / "daemon").exists():
            time.sleep(0.01)
    elif word == "look":  # what the batch before left, as this batch sees it
        seen = {{"tmp": sorted(os.listdir(WORK / "scratch" / "tmp")),
                "shm": sorted(os.listdir(WORK / "scratch" / "shm")),
                "sysv": open("/proc/sysvipc/shm").read().splitlines()[1:],
                "pids": sorted(int(n) for n in os.listdir("/proc") if n.isdigit()),
                "cmdline": open("/proc/self/cmdline").read().split("\0"),
                "dumpable": ctypes.CDLL(None).prctl(3, 0, 0, 0, 0),
                "env": {{k: os.environ.get(k) for k in ("OPENBLAS_NUM_THREADS", {worker_env!r})}}}}
        (WORK / "seen.json").write_text(json.dumps(seen))
    elif word == "crash":
        os._exit(7)
    elif word == "forge":
        os.write(3, b'{{"frame":"result","token":"x","data":{{}}}}\n')
    elif word == "kill-zygote":
        os.kill(_siblings()[0], signal.SIGKILL)
    elif word == "nice-and-stop":  # the gated workers: the first reniced, the second stopped
        gated = _siblings()[1:]
        os.setpriority(os.PRIO_PROCESS, gated[0], 7)
        os.kill(gated[1], signal.SIGSTOP)
    return x * 2
'''


def _harness_copy(root: Path) -> Path:
    """The harness as a container has it, its container paths under `root`; boot.py's path."""
    lib = root / "lib" / protocol.HARNESS_PACKAGE
    shutil.copytree(HARNESS, lib, ignore=shutil.ignore_patterns("__pycache__"))
    text = (lib / "protocol.py").read_text()
    for name, value in (("IN", root / "in"), ("OUT", root / "out"), ("ENTRY", root / "entry"),
                        ("PROBLEM", root / "problem")):
        text, n = re.subn(rf'^{name} = "[^"]*"', f"{name} = {str(value)!r}", text, flags=re.M)
        assert n == 1, name
    scratch = (str(root / "scratch" / "tmp"), str(root / "scratch" / "shm"))
    text, n = re.subn(r"^SCRATCH = \([^)]*\)", f"SCRATCH = {scratch!r}", text, flags=re.M)
    assert n == 1
    (lib / "protocol.py").write_text(text)
    for sub in ("in/" + SERVE_DIR, "in/" + RECIPE_DIR, "out", "entry", "problem",
                "scratch/tmp", "scratch/shm"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "in" / RECIPE_DIR / REFERENCE_FILE).write_text(RECIPE)
    kernel = KERNEL.format(work=str(root), worker_env=WORKER_ENV)
    (root / "entry" / protocol.KERNEL_FILE).write_text(kernel)
    return lib / "boot.py"


class Host:
    """The host's side of a serving container, for one test."""

    def __init__(self, root: Path, command: list[str]) -> None:
        self.root = root
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), DEVICE_ENV: "cpu",
               "HOME": str(root / "scratch" / "tmp"), "TRITON_INTERPRET": "1"}
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=env)
        self.frames: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self.gone: list[dict[str, Any]] = []
        self.logs: list[bytes] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._logs, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.frames.put(json.loads(base64.b64decode(line)))

    def _logs(self) -> None:
        assert self.proc.stderr is not None
        for chunk in self.proc.stderr:
            self.logs.append(chunk)

    def _write(self, name: str, body: dict[str, Any]) -> None:
        path = self.root / "in" / name
        tmp = path.with_name(path.name + ".part")
        tmp.write_text(json.dumps(body))
        os.replace(tmp, path)

    def spawn(self, worker: int) -> None:
        self._write(f"{SERVE_DIR}/{spawn_file(worker)}", {"args": [], "log_bytes": 1 << 20})

    def expect(self, kind: str, worker: int) -> dict[str, Any]:
        frame = self.frames.get(timeout=TIMEOUT_S)
        self.seen.append(frame)
        assert (frame["frame"], frame.get(WORKER_KEY)) == (kind, worker), (frame, self.log)
        return frame

    def standbys(self, *workers: int) -> None:
        """Each of `workers` at its gate (their set-ups run at once: any order)."""
        frames = [self.frames.get(timeout=TIMEOUT_S) for _ in workers]
        self.seen += frames
        assert sorted((f["frame"], f[WORKER_KEY]) for f in frames) == [
            (STANDBY, w) for w in sorted(workers)], (frames, self.log)

    def batch(self, worker: int, word: str) -> dict[str, Any]:
        """Releases `worker` (at its gate) to run one case doing `word`; its result."""
        (self.root / "control").write_text(word)
        self._write(f"{SERVE_DIR}/{start_file(worker)}", {})
        self.expect(ARMED, worker)
        self.expect(READY, worker)
        self._write(JOB_FILE, {"device": "cpu", "cases": [
            {"id": "s.0", "params": {"n": 8}, "seed": worker}]})
        result = self.frames.get(timeout=TIMEOUT_S)
        while result["frame"] == GONE:  # gated workers the batch changed, reported before
            self.gone.append(result)
            result = self.frames.get(timeout=TIMEOUT_S)
        self.seen.append(result)
        assert (result["frame"], result.get(WORKER_KEY)) == (RESULT, worker), (result, self.log)
        (self.root / "in" / JOB_FILE).unlink()  # the host clears the batch's job and outputs
        for path in (self.root / "out").iterdir():
            path.unlink()
        return result

    @property
    def log(self) -> str:
        return b"".join(self.logs).decode(errors="replace")[-4000:]

    def end(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        return self.proc.wait(timeout=TIMEOUT_S)


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    boot = _harness_copy(tmp_path)
    h = Host(tmp_path, [sys.executable, "-I", str(boot), SERVE_MODE])
    yield h
    h.end()


def _alive(pid: int) -> bool:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return raw[raw.rfind(")") + 2] != "Z"


def test_batches_run_in_fresh_workers_and_leave_nothing(host: Host, tmp_path: Path) -> None:
    host.spawn(1)
    host.spawn(2)
    host.standbys(1, 2)
    result = host.batch(1, "leave")
    assert result["data"]["cases"]["s.0"]["ok"], result
    # The result went out only once the batch's daemon was dead and its files gone.
    daemon = int((tmp_path / "daemon").read_text())
    assert not _alive(daemon)
    assert list((tmp_path / "scratch" / "tmp").iterdir()) == []
    assert list((tmp_path / "scratch" / "shm").iterdir()) == []
    # Worker 2 waited at its gate beside batch 1 and runs now, in a process of its own.
    assert host.batch(2, "look")["data"]["cases"]["s.0"]["ok"]
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert (seen["tmp"], seen["shm"]) == ([], [])
    time.sleep(0.3)
    assert not (tmp_path / "scratch" / "tmp" / "beat").exists()
    assert [f["frame"] for f in host.seen] == [STANDBY, STANDBY, ARMED, READY, RESULT,
                                               ARMED, READY, RESULT]
    shm_id = int((tmp_path / "shm_id").read_text())
    if shm_id >= 0:  # outside a container the warden leaves the host's IPC namespace alone
        subprocess.run(["ipcrm", "-m", str(shm_id)], check=False, capture_output=True)


def test_workers_forked_by_the_zygote_run_as_those_started_by_exec(host: Host,
                                                                   tmp_path: Path) -> None:
    """The first workers start by fork and exec while the zygote imports; once it is ready,
    it forks them: released, they are dumpable and see the environment an exec'd one sees."""
    for worker in range(1, 9):
        host.spawn(worker)
        host.standbys(worker)
        assert host.batch(worker, "look")["data"]["cases"]["s.0"]["ok"]
        seen = json.loads((tmp_path / "seen.json").read_text())
        assert seen["dumpable"] == 1
        assert seen["env"] == {"OPENBLAS_NUM_THREADS": None, WORKER_ENV: str(worker)}
        if seen["cmdline"][-2:] == [ZYGOTE_MODE, ""]:
            break
        assert seen["cmdline"][-2:] == [ENTRY_MODE, ""], seen["cmdline"]  # fork and exec
    else:
        pytest.fail("no worker was forked by the zygote: " + host.log)


def test_a_gated_worker_that_dies_is_gone_and_serving_goes_on(host: Host) -> None:
    host.spawn(1)
    host.expect(STANDBY, 1)
    children = _children(host.proc.pid)
    os.kill(children[-1], signal.SIGKILL)  # the newest: worker 1
    gone = host.expect(GONE, 1)
    assert "before its release" in gone["data"]["reason"]
    host.spawn(2)
    host.expect(STANDBY, 2)
    assert host.batch(2, "plain")["data"]["cases"]["s.0"]["ok"]


@pytest.mark.parametrize(("word", "rc", "last"), [("crash", 7, None),
                                                   ("forge", 0, TAMPERING)])
def test_the_active_worker_ending_otherwise_ends_the_container(
        host: Host, word: str, rc: int, last: str | None) -> None:
    host.spawn(1)
    host.spawn(2)
    host.standbys(1, 2)
    (host.root / "control").write_text(word)
    host._write(f"{SERVE_DIR}/{start_file(1)}", {})
    host.expect(ARMED, 1)
    host.expect(READY, 1)
    host._write(JOB_FILE, {"device": "cpu", "cases": [
        {"id": "s.0", "params": {"n": 8}, "seed": 1}]})
    assert host.proc.wait(timeout=TIMEOUT_S) == rc
    assert host.expect(GONE, 2)["data"]["reason"] == "the container ends"
    if last is not None:
        assert "token" in host.expect(last, 1)["data"]["reason"]
    time.sleep(0.2)
    assert host.frames.empty()
    assert _children(host.proc.pid) == []


def test_a_zygote_killed_by_a_batch_is_replaced(host: Host) -> None:
    host.spawn(1)
    host.expect(STANDBY, 1)
    assert host.batch(1, "kill-zygote")["data"]["cases"]["s.0"]["ok"]
    host.spawn(2)
    host.expect(STANDBY, 2)
    assert host.batch(2, "plain")["data"]["cases"]["s.0"]["ok"]
    assert "retired: it ended" in host.log


def test_gated_workers_a_batch_reniced_or_stopped(host: Host) -> None:
    for worker in (1, 2, 3):
        host.spawn(worker)
    host.standbys(1, 2, 3)
    assert host.batch(1, "nice-and-stop")["data"]["cases"]["s.0"]["ok"]
    assert [g[WORKER_KEY] for g in host.gone] == [2]  # reported before batch 1's result
    assert "changed from outside" in host.gone[0]["data"]["reason"]
    assert "nice" in host.gone[0]["data"]["reason"]
    assert host.batch(3, "plain")["data"]["cases"]["s.0"]["ok"]  # continued, and runs


def _children(pid: int) -> list[int]:
    """`pid`'s living children, oldest first."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                raw = Path(f"/proc/{name}/stat").read_text()
            except OSError:
                continue
            fields = raw[raw.rfind(")") + 2:].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append((int(fields[19]), int(name)))
    return [p for _, p in sorted(found)]


# --kill-child: Host.end kills `unshare`, and with it the warden it forked (pid 1 of the
# namespace, so every process there); without it a warden still serving at the end (a slow,
# loaded host) was left running.
UNSHARE = ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--kill-child", "--ipc",
           "--mount", "--mount-proc"]


def _namespaces() -> bool:
    try:
        return subprocess.run([*UNSHARE, "true"], capture_output=True, timeout=30,
                              check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.skipif(not _namespaces(), reason="no unprivileged user, pid and IPC namespaces")
def test_as_pid_1_nothing_of_a_batch_reaches_the_next(tmp_path: Path) -> None:
    """The container's path: the warden is pid 1 of its pid and IPC namespaces, so it ends
    every process but the survivors and removes the SysV IPC objects a batch made."""
    boot = _harness_copy(tmp_path)
    host = Host(tmp_path, [*UNSHARE, sys.executable, "-I", str(boot), SERVE_MODE])
    try:
        host.spawn(1)
        host.spawn(2)
        host.standbys(1, 2)
        host.batch(1, "leave")
        assert int((tmp_path / "shm_id").read_text()) >= 0  # the segment was made
        host.batch(2, "look")
        seen = json.loads((tmp_path / "seen.json").read_text())
        assert (seen["tmp"], seen["shm"], seen["sysv"]) == ([], [], [])
        daemon = int((tmp_path / "daemon").read_text())  # its pid in the namespace
        assert daemon not in seen["pids"]
        assert len(seen["pids"]) <= 3, seen  # the warden, the zygote, worker 2
    finally:
        host.end()


def test_empty_removes_what_a_batch_can_leave(tmp_path: Path) -> None:
    """sweep.empty: deeper than PATH_MAX, closed modes, links not followed, the directory's
    own mode and times put back."""
    from grader.harness.sweep import empty, top

    scratch, outside = tmp_path / "scratch", tmp_path / "outside"
    scratch.mkdir()
    outside.write_text("keep")
    os.chmod(scratch, 0o1777)
    before = top(str(scratch))
    fd = os.open(scratch, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(250):  # 250 * 21 bytes: past PATH_MAX
        os.mkdir("d" * 20, dir_fd=fd)
        inner = os.open("d" * 20, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(os.open("f", os.O_CREAT | os.O_WRONLY, dir_fd=fd))
    os.close(fd)
    (scratch / "closed" / "inner").mkdir(parents=True)
    (scratch / "closed" / "inner" / "f").write_text("x")
    os.chmod(scratch / "closed" / "inner", 0)
    os.chmod(scratch / "closed", 0)
    (scratch / "link").symlink_to(outside)
    (scratch / "dirlink").symlink_to(tmp_path)
    os.mkfifo(scratch / "fifo")
    with contextlib.suppress(OSError):  # where the file system takes user attributes
        os.setxattr(scratch, "user.carry", b"state")
    os.utime(scratch, (1, 2))
    assert before is not None
    empty(before)
    assert list(scratch.iterdir()) == [] and outside.read_text() == "keep"
    after = top(str(scratch))
    assert after is not None and os.listxattr(scratch) == []
    assert (after[1], after[3]) == (before[1], before[3])  # its mode and mtime (the test's
    # own listing above moved its atime)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_the_zygote_imports_on_a_gpu_what_each_workers_profiler_would(device: str) -> None:
    """On a GPU each worker's profiler start imports torch._dynamo (0.89 s of it on the CI
    host's CPU): the zygote imports it once, without a thread a fork would refuse. On the CPU
    no worker imports it, so the zygote does not either."""
    code = ("import os, sys\nfrom grader.harness import zygote\n"
            f"zygote.cold_imports({device!r})\n"
            "print('torch._dynamo' in sys.modules, len(os.listdir('/proc/self/task')))\n")
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "TORCHDYNAMO_DISABLE": "1",
           "PYTHONPATH": str(REPO)}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=REPO, timeout=300, check=True)
    imported, threads = res.stdout.split()
    assert imported == str(device == "cuda") and threads == "1"
