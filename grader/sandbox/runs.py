"""What a run owns on the host, and reaping what dead runs left behind.

Every run records itself in `$TMPDIR/grader-runs/<session>/` (`owner.json`: its pid and that
process's start time) and makes every folder of its own below it: the bundle's work folder,
each container's input and output folders and the host tmpfs mounted on them
(sandbox/capped.py, jobs.fresh_in_dir). Its containers carry its session label
(docker_engine). So what a grader killed by any means left (issue 19: with the grader killed
for memory, two standbys still up, two exited containers, four tmpfs mounts, the input and
submission folders) is found by the next start, or by `grader doctor --reap`: a run whose
process is gone (or whose pid now names another process) has its containers removed, the
mounts under its folder unmounted, and the folder deleted. Live runs are never touched.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from grader.errors import InfraError

RUNS_DIR = "grader-runs"
OWNER = "owner.json"
# A folder without an owner file younger than this may be a run being made (mkdir, then the
# file): left alone.
YOUNG_S = 60.0

_lock = threading.Lock()
_current: list[Path] = []  # the folders of the runs open in this process, innermost last


def runs_root() -> Path:
    return Path(tempfile.gettempdir()) / RUNS_DIR


def _start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22): a pid
    reused by another process has another start time."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    try:
        return int(stat[stat.rindex(")") + 2:].split()[19])
    except (ValueError, IndexError):
        return None


def _alive(owner: dict[str, object]) -> bool:
    pid, start = owner.get("pid"), owner.get("start")
    if not isinstance(pid, int) or pid <= 0:
        return False
    return _start_ticks(pid) is not None and (start is None or _start_ticks(pid) == start)


@contextmanager
def owned_run(session: str) -> Iterator[Path]:
    """This run's folder for as long as the block runs; folders made meanwhile by
    `run_folder` go inside it. Removed on the way out (what is mounted there is unmounted by
    whoever mounted it; anything left is unmounted here)."""
    root = runs_root()
    root.mkdir(mode=0o755, exist_ok=True)
    path = root / session
    path.mkdir(mode=0o755)
    owner = {"pid": os.getpid(), "start": _start_ticks(os.getpid()), "session": session,
             "created": time.time()}
    tmp = path / f".{OWNER}.tmp"
    try:
        tmp.write_text(json.dumps(owner))
        os.replace(tmp, path / OWNER)
    except BaseException:  # a full disk: leave no folder without its owner behind
        _clear(path)
        raise
    with _lock:
        _current.append(path)
    try:
        yield path
    finally:
        with _lock:
            _current.remove(path)
        _clear(path)


def run_folder(prefix: str) -> Path:
    """A fresh folder (mkdtemp) inside the innermost run open in this process, else in the
    temporary folder. Its name carries nothing but the prefix and random letters."""
    with _lock:
        parent = _current[-1] if _current else None
    return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))


def _mounts_under(path: Path) -> list[str]:
    """Mount points at or below `path`, deepest first (/proc/self/mountinfo)."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    top = str(path)
    found = []
    for line in lines:
        parts = line.split()
        if len(parts) > 4:
            point = parts[4].replace("\\040", " ")
            if point == top or point.startswith(top + "/"):
                found.append(point)
    return sorted(set(found), key=len, reverse=True)


def _clear(path: Path) -> int:
    """Unmount what is mounted under `path`, then delete it; returns the mounts undone."""
    mounts = _mounts_under(path)
    for point in mounts:
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)
    shutil.rmtree(path, ignore_errors=True)
    return len(mounts)


@dataclass(frozen=True, kw_only=True)
class Reaped:
    runs: int = 0
    containers: int = 0
    mounts: int = 0

    def __str__(self) -> str:
        return (f"{self.runs} dead run(s): {self.containers} container(s), {self.mounts} "
                "mount(s) and their folders removed")


def reap_dead(remove_containers: Callable[[str], int] | None = None) -> Reaped:
    """Remove what runs whose process is gone left: containers of their session (through
    `remove_containers`, the engine's reap), mounts and folders. Never raises for a
    leftover it cannot remove: the next start tries again."""
    root = runs_root()
    try:
        entries = list(root.iterdir())
    except OSError:
        return Reaped()
    runs = containers = mounts = 0
    for path in entries:
        try:
            owner = json.loads((path / OWNER).read_text())
            if not isinstance(owner, dict):
                owner = {}
        except (OSError, ValueError):
            try:
                if time.time() - path.lstat().st_mtime < YOUNG_S:
                    continue
            except OSError:
                continue
            owner = {}
        if _alive(owner):
            continue
        session = str(owner.get("session") or path.name)
        if remove_containers is not None:
            try:
                containers += remove_containers(session)
            except InfraError:  # an engine that fails now: the next start tries again
                continue  # the folder is kept: its record names the session to reap
        mounts += _clear(path)
        runs += 1
    return Reaped(runs=runs, containers=containers, mounts=mounts)
