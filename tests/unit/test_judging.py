"""A worker's judging thread (grader/grading/judging.py, issue 32): the work runs off the
worker's thread, one judging at a time and in order; what a judging reads stays until it is
done and is closed on the worker's thread; a failed judging raises where the results are
taken."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest

from grader.grading.judging import Judged, Judging, results
from grader.model.results import ShapeResult
from grader.verdicts import Verdict


def _result(shape: str) -> ShapeResult:
    return ShapeResult(id=shape, phase="decode", smoke=False, verdict=Verdict.PASSED, params={})


def _kept(closed: list[str], name: str) -> contextlib.ExitStack:
    stack = contextlib.ExitStack()
    stack.callback(lambda: closed.append((name, threading.current_thread().name)))
    return stack


def test_judgings_run_off_the_thread_in_order_and_keep_their_folders() -> None:
    judging = Judging()
    gate = threading.Event()
    ran: list[tuple[str, str]] = []
    closed: list[tuple[str, str]] = []

    def work(name: str) -> list[ShapeResult]:
        gate.wait(10)
        ran.append((name, threading.current_thread().name))
        return [_result(name)]

    first = judging.submit(lambda: work("a"), _kept(closed, "a"))
    second = judging.submit(lambda: work("b"), _kept(closed, "b"))
    assert judging.pending() == (second.future,)  # the next batch's timed loops wait for it
    judging.reap()
    assert closed == []  # nothing closed before its judging is done
    gate.set()
    before = time.monotonic()
    got, seconds, ended = results([Judged.now([_result("x")]), first, second], judging)
    assert [r.id for r in got] == ["x", "a", "b"] and seconds >= 0
    # when the last judging ended: after the gate opened, no later than now
    assert before <= ended <= time.monotonic()
    assert [n for n, _t in ran] == ["a", "b"]
    assert all(t.startswith("judge") for _n, t in ran)
    assert judging.pending() == ()
    # Closed on the worker's own thread, never the judging thread's.
    assert sorted(n for n, _t in closed) == ["a", "b"]
    assert all(t == threading.current_thread().name for _n, t in closed)
    judging.close()


def test_a_failed_judging_raises_where_results_are_taken_and_still_closes() -> None:
    judging = Judging()
    closed: list[tuple[str, str]] = []

    def broken() -> list[ShapeResult]:
        raise ValueError("judge bug")

    bad = judging.submit(broken, _kept(closed, "bad"))
    with pytest.raises(ValueError, match="judge bug"):
        results([bad], judging)
    judging.close()
    assert [n for n, _t in closed] == ["bad"]


def test_close_waits_for_every_judging_and_closes_what_it_kept() -> None:
    judging = Judging()
    closed: list[tuple[str, str]] = []
    gate = threading.Event()
    judging.submit(lambda: [_result("s")] if gate.wait(10) else [], _kept(closed, "s"))
    threading.Timer(0.05, gate.set).start()
    judging.close()
    assert [n for n, _t in closed] == ["s"]
