"""Progress of a long run, and what a run has to tell its user: the one channel from grading
(and the rounds built on it) to the command line (issue 33: only `cli/` prints).

`Progress` records: which problem, which stage, how long so far, how long to go. The grading
loop (grading/grader.py) reports with a plain `progress(msg)` call and knows nothing about
terminals or log formats; lines for the user (a warning, the summary, the reports' paths) go
through `progress.say(text, kind)`. Each record goes to a `Sink`, which decides how (or
whether) to show it: the command line's sink (grader/cli/progress.py) draws a live bar, plain
lines or JSON lines on stderr, and prints what is said on stdout or stderr. With no sink,
nothing is shown (the records are kept in `events`).

The problem and stage come from keyword arguments when the caller gives them. Otherwise a
message that starts with ``<planned problem id>: `` names its problem, and its next word names
the stage when it is one of `STAGES`; nothing else in the message is interpreted.

Problems may be graded concurrently (one worker per GPU, or --jobs on the CPU), so messages of
several problems interleave and come from several threads. A problem counts as done when it
says ``<id>: done``; failing that, a worker holds at most two problems (the one it grades, and
the next, taken early to start its containers: grader/grading/worker.py), so with W workers at
least (started - 2W) problems are done. The ETA is by problems done: the rate since the first
problem started, applied to the problems left.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Literal, Protocol

# The stages of one problem, in order; "runtime" is the run-wide image before any problem.
STAGES: tuple[str, ...] = ("runtime", "image", "reference", "entry", "timing", "done")
BATCH = re.compile(r" \[\d+/\d+\]$")
# What a line said to the user is: a note (a warning, an aside: stderr), a line of the
# command's result (stdout; stderr under --json), or the --json summary object (stdout).
Said = Literal["note", "result", "json"]


@dataclass(frozen=True, kw_only=True)
class Event:
    """One progress record; `as_json` is the line `--log-format json` prints."""

    event: str  # start | stage | finish
    problem: str | None
    stage: str | None
    message: str
    done: int  # problems finished
    total: int  # problems planned (0: not known)
    elapsed_s: float
    eta_s: float | None
    ts: str  # ISO 8601, UTC
    shape: str | None = None

    def as_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


class Sink(Protocol):
    """Where a run's records go: the command line's (grader/cli/progress.py), or a test's."""

    @property
    def shows_progress(self) -> bool:
        """Whether progress records are shown (a run then plans its problems for the counts
        and the ETA)."""
        ...

    def show(self, event: Event) -> None: ...

    def say(self, text: str, kind: Said) -> None: ...

    def close(self) -> None:
        """The run is over or failed: give the terminal back (a live bar stops)."""
        ...


class Progress:
    """The `progress(msg)` callable handed to the grading loop, and its `say`; see the module
    docstring."""

    def __init__(self, sink: Sink | None = None, *,
                 clock: Callable[[], float] = time.monotonic,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.sink = sink
        self.clock = clock
        self.now = now
        self.started = clock()
        self.planned: tuple[str, ...] = ()
        self.workers = 1
        self.seen: list[str] = []  # problems started, in order
        self.finished: set[str] = set()  # problems that said "<id>: done"
        self.lock = threading.Lock()  # workers report from their own threads
        self.problem: str | None = None
        self.stage: str | None = None
        self.events: list[Event] = []
        # The ETA counts from the first problem: the run-wide runtime image (built once, maybe
        # for minutes) says nothing about how long a problem takes.
        self.first_problem_at: float | None = None

    @property
    def shown(self) -> bool:
        return self.sink is not None and self.sink.shows_progress

    # -- what the run tells us ------------------------------------------------------------

    def plan(self, problems: Sequence[str], *, workers: int = 1) -> None:
        """The problems this run will grade, and by how many workers: for counts and the ETA."""
        with self.lock:
            self.planned = tuple(problems)
            self.workers = max(workers, 1)
            self._emit("start", f"grading {len(self.planned)} problem(s) with "
                       f"{self.workers} worker(s)")

    def __call__(self, msg: str, *, problem: str | None = None, stage: str | None = None,
                 shape: str | None = None) -> None:
        with self.lock:
            if problem is None:
                problem, guessed = self._split(msg)
                stage = stage or guessed
            if problem is not None and problem not in self.seen:
                self.seen.append(problem)
                if self.first_problem_at is None:
                    self.first_problem_at = self.clock()
            if problem is not None and stage == "done":
                self.finished.add(problem)
            self.problem, self.stage = problem, stage
            self._emit("stage", msg, shape=shape)

    def say(self, text: str, kind: Said = "result") -> None:
        """A line for the user, shown whatever the progress mode (`--quiet` too)."""
        if self.sink is not None:
            with self.lock:
                self.sink.say(text, kind)

    def finish(self) -> None:
        with self.lock:
            self.problem, self.stage = None, None
            self._emit("finish", "done", finished=True)
        self.close()

    def close(self) -> None:
        """Tell the sink the run is over (also when it failed): a live bar gives the terminal
        its cursor back."""
        if self.sink is not None:
            with self.lock:
                self.sink.close()

    # -- derived numbers ------------------------------------------------------------------

    @property
    def total(self) -> int:
        return len(self.planned)

    def done(self, *, finished: bool = False) -> int:
        """Problems finished: those that said so, or at least all but two per worker."""
        if finished:
            return max(len(self.seen), self.total)
        return max(len(self.finished), len(self.seen) - 2 * self.workers, 0)

    def eta(self, now: float, done: int) -> float | None:
        if not self.total or done <= 0 or self.first_problem_at is None:
            return None
        per_problem = (now - self.first_problem_at) / done
        return max(per_problem * (self.total - done), 0.0)

    def _split(self, msg: str) -> tuple[str | None, str | None]:
        if msg.startswith("runtime"):
            return None, "runtime"
        head, sep, rest = msg.partition(": ")
        head = BATCH.sub("", head)  # "rmsnorm [2/3]": a batch of the problem's shapes
        if not sep or head not in self.planned:
            return None, None
        word = rest.split(" ", 1)[0]
        return head, word if word in STAGES else None

    def _emit(self, kind: str, msg: str, *, shape: str | None = None,
              finished: bool = False) -> None:
        now = self.clock()
        done = self.done(finished=finished)
        eta = None if finished else self.eta(now, done)
        ev = Event(event=kind, problem=self.problem, stage=self.stage, shape=shape,
                   message=msg, done=done, total=self.total,
                   elapsed_s=round(now - self.started, 3),
                   eta_s=None if eta is None else round(eta, 1),
                   ts=self.now().isoformat().replace("+00:00", "Z"))
        self.events.append(ev)
        if self.sink is not None:
            self.sink.show(ev)
