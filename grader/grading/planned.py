"""A problem made ready for a worker to grade (worker.py): its image, cases and batches, the
containers started ahead for its batches, and its results so far."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from grader.formats.problem import Shape
from grader.grading.judging import Judged
from grader.model.findings import Finding
from grader.model.results import ShapeResult
from grader.model.runs import Case
from grader.run.ahead import EntryStandby, Standby
from grader.run.batch import Batch
from grader.suite.load import SuiteProblem


@dataclass(kw_only=True)
class Planned:
    """A problem made ready to grade (image, cases, batches), and its results so far."""

    sp: SuiteProblem
    kernel: Path
    rel: str
    source: str
    static: list[Finding]
    image: str
    image_id: str | None = None
    device_name: str | None = None  # the device the reference ran on, once one has
    cases: list[Case]
    per_shape: dict[str, int]
    parts: list[list[Shape]]
    phases: dict[str, float]
    batches: dict[int, Batch | None] = field(default_factory=dict)  # made when first needed
    # Started beside the batch before (an EntryStandby where a round has the reference).
    standbys: dict[int, Standby | EntryStandby] = field(default_factory=dict)
    judged: list[Judged] = field(default_factory=list)  # its batches' judging, in order
    # Seconds each of its batches' references took to keep for the round, on the judging
    # thread before their comparing (Worker.judge).
    kept_s: list[float] = field(default_factory=list)
    results: list[ShapeResult] = field(default_factory=list)  # once judged (Worker.finish)
    logs: str = ""
    started: float | None = None  # when its first batch began
    ran: float | None = None  # when its last batch so far had run (its judging may go on)

    def label(self, k: int) -> str:
        n = len(self.parts)
        return self.sp.id if n == 1 else f"{self.sp.id} [{k + 1}/{n}]"

    def part_cases(self, k: int) -> list[Case]:
        ids = {s.id for s in self.parts[k]}
        return [c for c in self.cases if c.shape.id in ids]

    def close(self) -> None:
        """Stop the standbys no batch took (after a failure)."""
        for standby in self.standbys.values():
            standby.close()
        self.standbys.clear()


# Where a worker takes its next problem from (grader.Grader.grade_all); None: no more.
Claim = Callable[[], SuiteProblem | None]
