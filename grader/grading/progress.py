"""Progress of a long run: which problem, which stage, how long so far, how long to go.

The grading loop (grade.Grader) reports with a plain `progress(msg: str)` callable and knows
nothing about terminals or log formats. `Progress` is that callable: it records the stage and
decides how (or whether) to show it, by mode:

- ``live``: on a terminal, a live bar (rich, grader/terminal.py): spinner, the current
  message, problems done of planned, elapsed time and ETA; each finished problem leaves a
  line above it.
- ``human``: plain lines, one per stage, e.g. ``[grader 0:42 eta 1:10 2/3 done] rmsnorm:
  entry``: what ``live`` degrades to when stderr is not a terminal (a pipe, a CI log), with no
  escape codes.
- ``json``: one JSON object per line on stderr (``--log-format json``), for machines.
- ``off``: nothing (``--quiet``).

The problem and stage come from keyword arguments when the caller gives them. Otherwise a
message that starts with ``<planned problem id>: `` names its problem, and its next word names
the stage when it is one of `STAGES`; nothing else in the message is interpreted.

Problems may be graded concurrently (one worker per GPU, or --jobs on the CPU), so messages of
several problems interleave and come from several threads. A problem counts as done when it
says ``<id>: done``; failing that, a worker holds at most two problems (the one it grades, and
the next, taken early to start its containers: grader/grading/worker.py), so with W workers at least
(started - 2W) problems are done. The ETA is by problems
done: the rate since the first problem started, applied to the problems left.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Literal, TextIO

Mode = Literal["live", "human", "json", "off"]
LogFormat = Literal["human", "json"]
LOG_FORMATS: tuple[str, ...] = ("human", "json")
# The stages of one problem, in order; "runtime" is the run-wide image before any problem.
STAGES: tuple[str, ...] = ("runtime", "image", "reference", "entry", "timing", "done")
BATCH = re.compile(r" \[\d+/\d+\]$")


def choose_mode(log_format: str, *, quiet: bool, stream: TextIO) -> Mode:
    """`--quiet` silences everything; JSON lines always print; a live bar on a terminal,
    plain lines otherwise."""
    if quiet:
        return "off"
    if log_format == "json":
        return "json"
    isatty = getattr(stream, "isatty", None)
    return "live" if callable(isatty) and isatty() else "human"


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


def _clock(seconds: float) -> str:
    s = int(seconds + 0.5)
    h, rest = divmod(s, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


def human_line(ev: Event) -> str:
    head = f"[grader {_clock(ev.elapsed_s)}"
    if ev.eta_s is not None:
        head += f" eta {_clock(ev.eta_s)}"
    if ev.event == "finish":
        return f"{head}] done: {ev.done}/{ev.total} problem(s)"
    if ev.total:
        head += f" {ev.done}/{ev.total} done"
    return f"{head}] {ev.message}"


class Progress:
    """The `progress(msg)` callable handed to the grading loop; see the module docstring."""

    def __init__(self, mode: Mode = "off", *, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.mode: Mode = mode
        self.stream = stream if stream is not None else sys.stderr
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
        self.bar: LiveBar | None = None  # mode live, once the first event came

    @classmethod
    def for_cli(cls, log_format: str, *, quiet: bool, stream: TextIO | None = None) -> Progress:
        out = stream if stream is not None else sys.stderr
        return cls(choose_mode(log_format, quiet=quiet, stream=out), stream=out)

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

    def finish(self) -> None:
        with self.lock:
            self.problem, self.stage = None, None
            self._emit("finish", "done", finished=True)
        self.close()

    def close(self) -> None:
        """Stop the live bar, if any (also when the run failed): the terminal gets its cursor
        back."""
        with self.lock:
            if self.bar is not None:
                self.bar.stop()
                self.bar = None

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
        if self.mode == "off":
            return
        if self.mode == "live":
            self._live(ev)
            return
        line = ev.as_json() if self.mode == "json" else human_line(ev)
        try:
            self.stream.write(line + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # a closed pipe must not fail a grading run
            self.mode = "off"

    def _live(self, ev: Event) -> None:
        try:
            if self.bar is None:
                self.bar = LiveBar(self.stream)
            self.bar.show(ev)
        except (OSError, ValueError):  # a closed terminal must not fail a grading run
            self.mode = "off"


class LiveBar:
    """The live display of mode `live` (rich): one bar over the problems planned."""

    def __init__(self, stream: TextIO) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )
        from rich.progress import Progress as Bar

        console = Console(file=stream, force_terminal=True, highlight=False, markup=False)
        self.bar = Bar(SpinnerColumn(), TextColumn("{task.description}", markup=False),
                       BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                       TextColumn("eta {task.fields[eta]}", markup=False), console=console)
        self.task = self.bar.add_task("grading", total=None, eta="-")
        self.bar.start()

    def show(self, ev: Event) -> None:
        if (ev.event == "stage" and ev.stage == "done") or ev.event == "finish":
            self.bar.console.print(human_line(ev))
        self.bar.update(self.task, description=ev.message, completed=ev.done,
                        total=ev.total or None,
                        eta="-" if ev.eta_s is None else _clock(ev.eta_s))

    def stop(self) -> None:
        self.bar.stop()
