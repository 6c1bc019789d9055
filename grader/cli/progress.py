"""The command line's progress sink (grading/progress.py's `Sink`): how a run's records show.

Progress records, by mode:
- ``live``: on a terminal, a live bar (rich, grader/terminal.py): spinner, the current
  message, problems done of planned, elapsed time and ETA; each finished problem leaves a
  line above it.
- ``human``: plain lines, one per stage, e.g. ``[grader 0:42 eta 1:10 2/3 done] rmsnorm:
  entry``: what ``live`` degrades to when stderr is not a terminal (a pipe, a CI log), with no
  escape codes.
- ``json``: one JSON object per line on stderr (``--log-format json``), for machines.
- ``off``: nothing (``--quiet``).

A command that is not a grading (`grader suite check`: no problem count, no ETA) labels its
sink: its records are plain ``[suite check] vector_add: image`` lines, terminal or not.

Lines said to the user print whatever the mode: a note on stderr, a result line on stdout (on
stderr under --json, which keeps stdout for its one summary object), the --json summary on
stdout.
"""

from __future__ import annotations

import sys
from typing import Literal, TextIO

import click

from grader.grading.progress import Event, Progress, Said

Mode = Literal["live", "human", "json", "off"]
LOG_FORMATS: tuple[str, ...] = ("human", "json")


def choose_mode(log_format: str, *, quiet: bool, stream: TextIO) -> Mode:
    """`--quiet` silences everything; JSON lines always print; a live bar on a terminal,
    plain lines otherwise."""
    if quiet:
        return "off"
    if log_format == "json":
        return "json"
    isatty = getattr(stream, "isatty", None)
    return "live" if callable(isatty) and isatty() else "human"


def _clock(seconds: float) -> str:
    s = int(seconds + 0.5)
    h, rest = divmod(s, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


def human_line(ev: Event, label: str | None = None) -> str:
    if label is not None:  # a labelled command's steps: no clock, no counts (see above)
        return f"[{label}] {ev.message}"
    head = f"[grader {_clock(ev.elapsed_s)}"
    if ev.eta_s is not None:
        head += f" eta {_clock(ev.eta_s)}"
    if ev.event == "finish":
        return f"{head}] done: {ev.done}/{ev.total} problem(s)"
    if ev.total:
        head += f" {ev.done}/{ev.total} done"
    return f"{head}] {ev.message}"


class Terminal:
    """The sink of a command: progress on `stream` (stderr) by mode, said lines by kind."""

    def __init__(self, mode: Mode = "off", *, stream: TextIO | None = None,
                 json_out: bool = False, label: str | None = None) -> None:
        self.mode: Mode = mode
        self.stream = stream if stream is not None else sys.stderr
        self.json_out = json_out  # --json: stdout holds the summary object alone
        self.label = label  # human lines as `[label] message` (see human_line)
        self.bar: LiveBar | None = None  # mode live, once the first event came

    @property
    def shows_progress(self) -> bool:
        return self.mode != "off"

    def show(self, event: Event) -> None:
        if self.mode == "off":
            return
        if self.mode == "live":
            self._live(event)
            return
        line = event.as_json() if self.mode == "json" else human_line(event, self.label)
        try:
            self.stream.write(line + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # a closed pipe must not fail a grading run
            self.mode = "off"

    def say(self, text: str, kind: Said) -> None:
        click.echo(text, err=kind == "note" or (kind == "result" and self.json_out))

    def close(self) -> None:
        """Stop the live bar, if any (closing twice is harmless)."""
        if self.bar is not None:
            self.bar.stop()
            self.bar = None

    def _live(self, ev: Event) -> None:
        try:
            if self.bar is None:
                self.bar = LiveBar(self.stream)
            self.bar.show(ev)
        except (OSError, ValueError):  # a closed terminal must not fail a grading run
            self.mode = "off"


def for_cli(log_format: str, *, quiet: bool, json_out: bool = False,
            stream: TextIO | None = None) -> Progress:
    """A command's Progress: its records shown on `stream` (stderr) as the options say."""
    out = stream if stream is not None else sys.stderr
    return Progress(Terminal(choose_mode(log_format, quiet=quiet, stream=out), stream=out,
                             json_out=json_out))


def labelled(label: str, *, stream: TextIO | None = None) -> Progress:
    """The Progress of a command that is not a grading: each record a `[label] message` line
    on `stream` (stderr), on a terminal too (a bar over no count would show nothing more)."""
    return Progress(Terminal("human", stream=stream, label=label))


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
