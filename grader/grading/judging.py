"""A worker's judging, beside the GPU's next work (issue 32).

Judging a batch (comparing its outputs, reading its record and timings: 0.3-7 s a batch on
the H200, 13-18 s of an entry of the llm-inference suite; in a round, copying the reference
it computed into the round's store first) used to run after the batch's
containers had exited and before the next batch's turn, so the GPU idled while the host
compared. Now the worker hands each batch's judging to one thread of its own and goes on to
the next batch at once; that batch's warm-up, correctness and traced calls run beside the
judging, and its timed loops (the reference's and the entry's) wait until it is done, as they
wait for the standbys' imports (run.ahead.Beside.after), unless they are timed beside both
(Scheduling.beside, on hosts with the cores for it): then the batch only starts once every
judging but the one before it is done (`wait_older`).

The batch's folders (the reference's expected outputs, the entry's outputs) stay until its
judging is done: its contexts are handed over whole (an ExitStack) and closed here, on the
worker's own thread, once the judging has finished (`reap`), so that only one thread ever
talks to the container engine. The judgings run one at a time, in the order they were
handed over, and a problem's results are taken in its batches' order (`results`). The worker
goes on to the next problem without waiting for them and takes them after the first later
batch by which they are done (Worker.grade), so that a problem's last judging, too, runs
beside the GPU's next work rather than in front of it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from grader.model.results import ShapeResult

# A batch's judging once done: its results, the seconds it took, and when it ended
# (time.monotonic()).
Outcome = tuple[list[ShapeResult], float, float]


@dataclass(frozen=True)
class Judged:
    """A batch's judging: its results, once done, the seconds the judging took and when."""

    future: Future[Outcome]

    @staticmethod
    def now(results: list[ShapeResult]) -> Judged:
        """Results known without judging (a reference that cannot be used)."""
        done: Future[Outcome] = Future()
        done.set_result((results, 0.0, time.monotonic()))
        return Judged(done)


class Judging:
    """One worker's judging thread, and the batches' contexts it keeps until their judging
    is done."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="judge")
        self._kept: list[tuple[Future[Outcome], contextlib.ExitStack]] = []
        self.last: Future[Outcome] | None = None

    def submit(self, work: Callable[[], list[ShapeResult]],
               keep: contextlib.ExitStack) -> Judged:
        """Run `work` on the judging thread; `keep` (what it reads: the batch's folders and
        containers) is closed once it has finished."""
        def timed() -> Outcome:
            t0 = time.monotonic()
            got = work()
            t1 = time.monotonic()
            return got, t1 - t0, t1

        try:
            future = self._pool.submit(timed)
        except BaseException:
            keep.close()
            raise
        self._kept.append((future, keep))
        self.last = future
        return Judged(future)

    def pending(self) -> tuple[Future[Outcome], ...]:
        """The judging not done yet (the next batch's timed loops wait for it)."""
        self.reap()
        return (self.last,) if self.last is not None and not self.last.done() else ()

    def wait_older(self) -> None:
        """Wait for every judging but the last one submitted: a batch whose timed loops run
        beside the judging before it (Scheduling.beside) starts with at most that one behind
        it, so that the host holds two batches' outputs at most, as when its loops wait."""
        wait([f for f, _keep in self._kept if f is not self.last])
        self.reap()

    def reap(self) -> None:
        """Close what finished judgings kept (on the worker's thread)."""
        done = [(f, keep) for f, keep in self._kept if f.done()]
        self._kept = [(f, keep) for f, keep in self._kept if not f.done()]
        for _f, keep in done:
            keep.close()

    def close(self) -> None:
        """Wait for every judging and close what each kept."""
        try:
            self._pool.shutdown(wait=True)
        finally:
            for _f, keep in self._kept:
                keep.close()
            self._kept.clear()


def results(judged: list[Judged], judging: Judging) -> Outcome:
    """A problem's results in its batches' order, waiting for each batch's judging, the
    seconds its judging took and when the last ended (0.0 with none); a judging that failed
    raises here, on the worker's thread."""
    out: list[ShapeResult] = []
    seconds = ended = 0.0
    try:
        for j in judged:
            got, s, t = j.future.result()
            out += got
            seconds += s
            ended = max(ended, t)
    finally:
        judging.reap()
    return out, seconds, ended
