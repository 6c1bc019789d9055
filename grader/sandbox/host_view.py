"""What a host runtime's binds show a container (issue 18): the protected paths a bind would
expose, on which the run refuses to start (`bind_conflicts`, errors.ExposedHostPath), and the
whole view a container should have, against which tests compare what an entry sees
(`expected_view`). Split from host_runtime.py (issue 33: one job per module).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from grader.sandbox.host_runtime import HostBind, _within


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


__all__ = ["ENGINE_ETC", "SKELETON_DIRS", "VIEW_ROOTS", "bind_conflicts", "expected_view"]
