"""Backend-neutral description of one sandboxed run; converted to SDK arguments at the edge."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from grader.harness.protocol import ENTRY_MODE, REFERENCE_MODE

SESSION_LABEL = "grader.session"
ROLE_LABEL = "grader.role"


class Role(StrEnum):
    REFERENCE = REFERENCE_MODE  # the harness's mode: the container's command names its role
    ENTRY = ENTRY_MODE
    PROBE = "probe"


@dataclass(frozen=True, kw_only=True)
class Limits:
    """Resource limits of one container. Memory has swap equal to it (no swapping)."""

    memory_bytes: int = 4 << 30
    pids: int = 256
    cpus: float = 2.0
    scratch_bytes: int = 512 << 20  # the exec tmpfs at /tmp: Triton's cache and compiler
    output_bytes: int = 256 << 20  # the host tmpfs bound at /grader/out
    log_bytes: int = 1 << 20  # stdout+stderr kept on disk by the engine
    wall_s: float = 300.0
    nofile: int = 1024
    # Allowed on top of wall_s until the container's clock is started (Container.rebase: an
    # entry's harness arms it once set up, before any entry code runs, protocol.ARMED): the
    # container's start and its cold `import torch` are not the entry's time (issue 34:
    # --timeout 3 timed out an honest smoke kernel). 0: the clock counts from the start.
    setup_s: float = 0.0


@dataclass(frozen=True, kw_only=True)
class Bind:
    host: str
    container: str
    read_only: bool = True


@dataclass(frozen=True, kw_only=True)
class GpuAccess:
    """How the assigned GPU reaches the container: a device request (NVIDIA's container
    toolkit) or the raw /dev/nvidia* nodes (hosts without the toolkit)."""

    mode: str  # "toolkit" | "devices"
    index: int = 0
    device_nodes: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class ContainerSpec:
    image: str
    command: list[str]
    role: Role
    session: str
    env: dict[str, str] = field(default_factory=dict)
    binds: tuple[Bind, ...] = ()
    # Extra read-only tmpfs mounts that hide image paths (e.g. the problem's reference files
    # from the entry): path -> size in bytes.
    masks: tuple[str, ...] = ()
    limits: Limits = Limits()
    user: str = "65534:65534"
    gpu: GpuAccess | None = None
    workdir: str = "/tmp"
    # Sent at the deadline, a moment before the kill (an entry's: protocol.STACK_SIGNAL, for
    # its stacks in the logs); None: the kill alone.
    stack_signal: str | None = None
    # > 0: stdout is a protocol channel (an entry's warden writes its frames there,
    # harness/warden.py), read apart from the logs, at most this many bytes; 0: stdout is log.
    stdout_bytes: int = 0
