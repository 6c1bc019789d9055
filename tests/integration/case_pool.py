"""Case folders graded ahead, in worker processes, while the other tests run.

Each case is still graded alone, as `grader selftest` grades it (`grade_case`: its own bundle,
run, containers and session); what is shared is the machine's idle time. On the 2-core CI
machine one grading keeps the cores busy about half its wall time (container start and
removal, the handshake's polls, a timeout case's wait), so a second one fills the gaps:
one case at a time beside the other tests, `WORKERS` at a time once test_cases.py waits for
them (tests/integration/conftest.py starts all this at the end of collection and runs
test_cases.py last).

Why processes and not threads: a run keeps process-wide state (sandbox/runs.py: the folders a
run makes go into the innermost run open in its process), so two runs in one process would
share folders.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import tomllib
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from functools import cache
from pathlib import Path
from typing import Any

from grader.cli.selftest import CaseResult, grade_case
from grader.paths import REPO
from grader.sandbox.docker_engine import DockerEngine, get_engine

# GRADER_TEST_CASE_WORKERS=1 grades one case at a time, never beside another test.
WORKERS = int(os.environ.get("GRADER_TEST_CASE_WORKERS", "2"))
PROBLEM_S = 4.0  # a problem's grading on the CI machine, about: to order the cases


def _spec(case: Path) -> dict[str, Any]:
    return tomllib.loads((case / "case.toml").read_text())


def cost(case: Path) -> float:
    """A case's expected grading time, to start the longest first: its problems, and the
    limit a case expected to time out waits for."""
    spec = _spec(case)
    wait = float(spec.get("timeout_s", 0)) if "timeout" in spec["expect"].values() else 0.0
    return PROBLEM_S * len(spec["expect"]) + wait


def suites_of(cases: list[Path]) -> set[str]:
    """The suites the cases' submissions name."""
    names = set()
    for case in cases:
        spec = _spec(case)
        folder = REPO / spec["source"] if "source" in spec else case / "submission"
        names.add(tomllib.loads((folder / "submission.toml").read_text())["submission"]["suite"])
    return names


def _start(environ: dict[str, str]) -> None:
    """A worker starts with the environment of the session's start, whatever a test has
    changed meanwhile (a worker process is started when first needed, and inherits what is
    then set: a $TMPDIR on a small disk)."""
    os.environ.clear()
    os.environ.update(environ)
    tempfile.tempdir = None
    os.chdir(REPO)


@cache
def _engine() -> DockerEngine:
    return get_engine()


def _grade(case: str) -> CaseResult:
    """One case, in a worker process, in a work folder of its own."""
    work = Path(tempfile.mkdtemp(prefix="grader-case-"))
    try:
        return grade_case(_engine(), Path(case), work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


class CasePool:
    """Grades `cases` in the given order, at most `ahead` at a time until a result is asked
    for, then `workers` at a time."""

    def __init__(self, cases: list[Path], environ: dict[str, str], workers: int = WORKERS,
                 ahead: int = 1) -> None:
        self._workers = max(1, workers)
        self._limit = min(ahead, self._workers)
        self._ex = ProcessPoolExecutor(self._workers,
                                       mp_context=multiprocessing.get_context("spawn"),
                                       initializer=_start, initargs=(environ,))
        self._todo = deque(c.resolve() for c in cases)
        self._futures: dict[Path, Future[CaseResult]] = {}
        self._running = 0
        self._cond = threading.Condition(threading.RLock())
        self._fill()

    def _fill(self) -> None:
        with self._cond:
            while self._todo and self._running < self._limit:
                self._submit(self._todo.popleft())

    def _submit(self, case: Path) -> None:
        with self._cond:
            self._running += 1
            self._futures[case] = self._ex.submit(_grade, str(case))
            self._futures[case].add_done_callback(self._done)

    def _done(self, _future: Future[CaseResult]) -> None:
        with self._cond:
            self._running -= 1
            self._cond.notify_all()
        self._fill()

    def result(self, case: Path, *, widen: bool = True) -> CaseResult:
        """The case's result, once graded. `widen`: the tests wait for the cases now, so grade
        `workers` at a time from here on, this case next if not started yet; otherwise (another
        test wants one case) a case not started yet starts at once, beside the one running."""
        case = case.resolve()
        with self._cond:
            if widen:
                self._limit = self._workers
            if case not in self._futures:
                if case in self._todo:
                    self._todo.remove(case)
                if widen:
                    self._todo.appendleft(case)
                else:
                    self._submit(case)
            self._fill()
            self._cond.wait_for(lambda: case in self._futures)
            future = self._futures[case]
        return future.result()

    def close(self) -> None:
        with self._cond:
            self._todo.clear()
        self._ex.shutdown(wait=True, cancel_futures=True)


class Ahead:
    """What the cases need, made from the end of collection on while other tests run: their
    images (`grader images build`: the runtime, and every problem image of their suites, in a
    process of its own, so that no test's monkeypatching reaches it), then the pool. Built
    once here, no image is built by a grading ahead while another test looks at the engine's
    images, nor twice at once by two of them."""

    def __init__(self, cases: list[Path]) -> None:
        self._cases = cases
        self._environ = dict(os.environ)
        self._log = tempfile.TemporaryFile()
        suites = [arg for name in sorted(suites_of(cases)) for arg in ("--suite", name)]
        self._build = subprocess.Popen([sys.executable, "-m", "grader", "images", "build",
                                        *suites], cwd=REPO, stdout=self._log,
                                       stderr=subprocess.STDOUT)
        self._pool: CasePool | None = None
        self._error = ""
        self._ready = threading.Event()
        threading.Thread(target=self._start_pool, name="cases-ahead", daemon=True).start()

    def _start_pool(self) -> None:
        try:
            if self._build.wait() == 0:
                self._pool = CasePool(self._cases, self._environ)
            else:
                self._log.seek(0)
                tail = self._log.read().decode(errors="replace")[-3000:]
                self._error = f"grader images build failed:\n{tail}"
        except Exception as exc:  # handed to the tests that wait for the pool
            self._error = f"the case pool did not start: {exc!r}"
        finally:
            self._ready.set()

    def images(self) -> None:
        """Wait until the images are built (or their build failed)."""
        self._ready.wait()

    def pool(self) -> CasePool:
        self._ready.wait()
        if self._pool is None:
            raise RuntimeError(self._error)
        return self._pool

    def close(self) -> None:
        if self._build.poll() is None:  # the session ended first (interrupted)
            self._build.terminate()
        self._ready.wait()
        if self._pool is not None:
            self._pool.close()
        self._log.close()
