"""What the run layer asks of a container engine, as protocols: start a container from a
backend-neutral spec (spec.py) and watch, hold, stop and remove it; look up, build and import
images; remove what a session left.

`DockerEngine` (docker_engine.py, the only module that imports `docker`) is the engine the
grader runs on, made by `docker_engine.get_engine()` alone; the run layer (grader/run/,
grader/images.py) types against these protocols only, so that its logic is unit-tested with
an engine that plays containers without Docker (tests/unit/fake_engine.py), beside the
integration tests on the real one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from grader.model.runs import ExitState
from grader.sandbox.spec import ContainerSpec

POLL_S = 0.05  # how often a running container is looked at


def poll_to_exit(poll: Callable[[], ExitState | None],
                 on_poll: Callable[[], None] | None = None) -> ExitState:
    """Look (`poll`) every POLL_S until a container has exited, running `on_poll` between
    looks: every Container's `wait`."""
    while (done := poll()) is None:
        if on_poll is not None:
            on_poll()
        time.sleep(POLL_S)
    return done


@runtime_checkable
class Container(Protocol):
    """A started container. Its wall-clock limit (spec.limits.wall_s) counts from its start,
    less the time the grader held it; until `rebase` starts its clock, its set-up is allowed
    on top (spec.limits.setup_s). At the deadline it gets spec.stack_signal, then the kill."""

    def running(self) -> bool:
        """Whether it still runs."""
        ...

    def poll(self) -> ExitState | None:
        """None while it runs within its deadline; else its exit state (killed when the
        deadline has passed)."""
        ...

    def wait(self, on_poll: Callable[[], None] | None = None,
             wall_s: float | None = None) -> ExitState:
        """Its exit state, once it has exited (killed at its deadline; `wall_s`: a deadline
        that many seconds from its start instead); `on_poll` runs between looks."""
        ...

    def kill(self) -> None:
        """Stop it now (nothing if it has exited)."""
        ...

    def extend(self, seconds: float) -> None:
        """Move its deadline later: time it spent held by the grader is not its own."""
        ...

    def rebase(self) -> None:
        """Count its wall clock and its deadline from now (a standby's wait, an entry's set-up
        before its harness armed its clock, were not its own)."""
        ...

    def stdout(self) -> bytes:
        """What it wrote on stdout so far (an entry's frames), at most spec.stdout_bytes and
        one byte."""
        ...

    def logs_since(self, since: float) -> tuple[str, bool]:
        """Its logs (stderr for a channel's container) from `since` (time.time()) on, at
        most spec.limits.log_bytes; whether they were cut there."""
        ...

    def last_words(self) -> None:
        """Its spec's stack_signal now, and a moment for what that makes it write to reach
        the logs (what its deadline does before the kill)."""
        ...

    def set_memory(self, memory_bytes: int) -> None:
        """Its memory limit (swap equal to it) from now on."""
        ...


@runtime_checkable
class ContainerEngine(Protocol):
    """An engine that runs ContainerSpecs. Every container it starts carries the spec's
    session label and is removed when `start`'s block ends, however it ends; engine failures
    are InfraError (the grader's failure, never an entry's)."""

    def info(self) -> dict[str, Any]:
        """The engine's own description (its runtimes: how a GPU reaches containers)."""
        ...

    def version(self) -> str:
        ...

    def image_id(self, tag: str) -> str | None:
        """The image's id, or None when the engine has no image of that tag."""
        ...

    def build(self, context: Path, tag: str, kind: str) -> str:
        """Build `context/Dockerfile` as `tag`, labelled with `kind`; the image's id."""
        ...

    def import_rootfs(self, tarball: Path, tag: str, kind: str) -> str:
        """A root filesystem's tarball as the image `tag`; the image's id."""
        ...

    def start(self, spec: ContainerSpec) -> AbstractContextManager[Container]:
        """Start a container; it is removed when the block ends."""
        ...

    def run(self, spec: ContainerSpec, on_poll: Callable[[], None] | None = None
            ) -> ExitState:
        """Start a container and wait for it to exit (then remove it)."""
        ...

    def reap(self, session: str | None = None) -> int:
        """Remove the containers of one session (None: of every grader session); how many."""
        ...

    def clone(self) -> ContainerEngine:
        """A client of the same engine of its own, for another worker thread."""
        ...
