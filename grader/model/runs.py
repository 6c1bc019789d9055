"""What one container's run gave back, as data the judge reads (no container in sight): its
exit, its output folder and an entry's frames (`Evidence`); and the cases a batch runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from grader.formats.problem import Shape
from grader.model.channel import Frames
from grader.model.evidence import OutDir


@dataclass(frozen=True, kw_only=True)
class ExitState:
    exit_code: int | None  # None when killed by us for the wall-clock limit
    timed_out: bool
    oom_killed: bool
    wall_s: float  # start to exit, less the time it was held (Container.extend)
    logs: str  # stdout+stderr (stderr alone for a channel's container), at most log_bytes
    logs_truncated: bool
    held_s: float = 0.0
    stdout: bytes = b""  # a channel's frames (spec.stdout_bytes > 0), read at exit


@dataclass(frozen=True, kw_only=True)
class Evidence:
    """What one side of a batch (the reference or the entry) gave back: how its container
    exited, its output folder read without trusting it, and an entry's frames."""

    exit: ExitState
    out: OutDir
    frames: Frames | None = None  # an entry's channel (grader/model/channel.py); None: files only


@dataclass(frozen=True, kw_only=True)
class Case:
    id: str  # "<shape>.<k>": a safe file name
    shape: Shape
    seed: int
    # A checked call of the timed loop (model/timed.py), not a correctness call: its inputs are
    # drawn where it runs and its outputs compared by their samples (harness/fresh.py).
    timing: bool = False
    # Module problems: the seed both containers build the case's module under. Derived from
    # the run's secret and the case seed, never equal to it (worker.derive_module_seed).
    module_seed: int = 0
