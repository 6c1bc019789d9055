"""When workers start containers ahead (worker.start_ahead), and how a standby that never gets
to its gate is dropped (run.ahead.Standby.idle), with fake containers."""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

from grader.grading import worker as worker_mod
from grader.grading.config import AHEAD_CORES, BESIDE_CORES, Scheduling
from grader.grading.judging import Judged
from grader.harness.protocol import GATE_FILE, STANDBY
from grader.harness.warden import encode_frame
from grader.run import ahead as problem_run
from grader.run.ahead import Standby


def test_auto_needs_cores_for_each_worker() -> None:
    cfg = Scheduling()
    assert cfg.start_ahead == "auto"
    assert cfg.ahead(1, cores=AHEAD_CORES)
    assert not cfg.ahead(1, cores=2)  # the CI machine: no core to overlap on
    assert not cfg.ahead(2, cores=AHEAD_CORES)
    assert cfg.ahead(4, cores=16)
    on, off = (Scheduling(start_ahead=v) for v in ("on", "off"))
    assert on.ahead(8, cores=2) and not off.ahead(1, cores=64)
    assert on.ahead(1) == on.ahead_depth == 2  # batches started ahead at once
    assert replace(on, ahead_depth=3).ahead(1) == 3


class FakeContainer:
    def __init__(self, running: bool = True) -> None:
        self.is_running = running
        self.frames = b""  # what its warden has written on stdout

    def running(self) -> bool:
        return self.is_running

    def stdout(self) -> bytes:
        return self.frames


def _standby(tmp_path: Path, since: float) -> Standby:
    st = Standby.__new__(Standby)
    st.closed, st.released, st.gated, st.since = False, False, True, since
    st.ref_out, st.ent_out = tmp_path / "ref", tmp_path / "ent"
    st.ref_in, st.ent_in = tmp_path / "ref_in", tmp_path / "ent_in"
    st.ref_out.mkdir()
    st.ent_out.mkdir()
    st.ref, st.ent = FakeContainer(), FakeContainer()  # type: ignore[assignment]
    st._stack = contextlib.ExitStack()
    return st


def test_idle_when_each_is_at_its_gate_or_gone(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(problem_run.time, "monotonic", lambda: 10.0)
    st = _standby(tmp_path, since=9.0)
    assert not st.idle()
    (st.ref_out / GATE_FILE).write_text("{}")
    assert not st.idle()  # the entry's harness is still importing
    st.ent.is_running = False  # type: ignore[attr-defined]
    assert st.idle() and not st.usable()
    st.ent.is_running = True  # type: ignore[attr-defined]
    (st.ent_out / GATE_FILE).write_text("{}")  # a file is no gate for an entry: its frame is
    assert not st.idle()
    st.ent.frames = encode_frame(STANDBY, {"data": {"ok": True}})  # type: ignore[attr-defined]
    assert st.idle() and st.usable()


def test_one_that_never_gets_there_is_dropped(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(problem_run.time, "monotonic", lambda: now[0])
    st = _standby(tmp_path, since=100.0)
    assert not st.idle()
    now[0] += problem_run.GATE_WAIT_S + 1
    assert st.idle() and st.closed and not st.usable()


class FakeStandby:
    made: ClassVar[list[FakeStandby]] = []

    def __init__(self, _setup: object, batch: str, *, server: object = None) -> None:
        assert server is None  # no --serve here
        self.batch = batch
        self.closed = False
        FakeStandby.made.append(self)

    def close(self) -> None:
        self.closed = True


def _worker(monkeypatch: pytest.MonkeyPatch, depth: int, parts: dict[str, int],
            broken: frozenset[str] = frozenset(),
            judged: dict[str, list[Judged]] | None = None,
            beside: bool = False) -> tuple[Any, list[str]]:
    """A Worker over problems of `parts[id]` batches whose containers are fakes
    (FakeStandby); batches named in `broken` run one container after the other; `judged`:
    a problem's judgings (none: done at once). Its grade_batch records what each batch
    started beside it in `w.ran`; `events` says when each problem was taken, each batch ran
    and each problem was finished."""
    judged = judged or {}
    from grader.grading.planned import Planned
    from grader.grading.worker import Worker

    monkeypatch.setattr(worker_mod, "Standby", FakeStandby)
    FakeStandby.made = []
    events: list[str] = []
    w = Worker.__new__(Worker)
    w.depth, w.queued, w.setup, w.beside = depth, deque(), None, beside
    w.ctx = SimpleNamespace(progress=events.append, references=None,
                            scheduling=SimpleNamespace(serve=False))
    w.refs = SimpleNamespace(folder=lambda plan, k, reuse=False: None)
    w.ran, w.waited = [], []  # per batch: the standbys and the judgings its timed loops wait for

    def plan(pid: str | None) -> Planned | None:
        if pid is None:
            return None
        events.append(f"take {pid}")
        p = Planned.__new__(Planned)
        p.sp = SimpleNamespace(id=pid)  # type: ignore[assignment]
        p.parts, p.batches, p.standbys = [[]] * parts[pid], {}, {}
        p.image_id = p.device_name = None
        p.judged = list(judged.get(pid, []))
        return p

    def grade_batch(p: Planned, k: int, beside: problem_run.Beside | None) -> None:
        got = p.standbys.pop(k, None)
        assert got is None or got.batch == f"{p.sp.id}{k}"
        w.ran.append((f"{p.sp.id}{k}", [s.batch for s in beside.standbys] if beside
                      else []))
        w.waited.append(len(beside.after) if beside else 0)
        events.append(f"run {p.sp.id}{k}")

    w.open = plan
    w.batch = lambda p, k: None if f"{p.sp.id}{k}" in broken else f"{p.sp.id}{k}"
    w.grade_batch = grade_batch

    def finish(p: Planned) -> str:
        for j in p.judged:
            j.future.result()
        events.append(f"finish {p.sp.id}")
        return p.sp.id

    w.finish = finish
    return w, events


def _claim(ids: list[str]) -> Callable[[], str | None]:
    todo = list(ids)
    return lambda: todo.pop(0) if todo else None


def test_two_ahead_the_wait_falls_on_every_other_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    parts = {"a": 1, "b": 2, "c": 1, "d": 1}
    w, events = _worker(monkeypatch, 2, parts)
    w.grade(_claim(list(parts)), lambda _r: True)
    assert w.ran == [("a0", ["b0", "b1"]), ("b0", []), ("b1", ["c0", "d0"]), ("c0", []),
                     ("d0", [])]
    # Problems are taken when their batches are reached, not sooner.
    assert events[:3] == ["take a", "take b", "run a0"]
    assert events.index("take c") > events.index("run b0")
    assert not any(s.closed for s in FakeStandby.made)  # each one taken by its batch


def test_one_ahead_each_batch_starts_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    for depth, ran in ((1, [("a0", ["a1"]), ("a1", ["b0"]), ("b0", [])]),
                       (0, [("a0", []), ("a1", []), ("b0", [])])):
        w, _ = _worker(monkeypatch, depth, {"a": 2, "b": 1})
        w.grade(_claim(["a", "b"]), lambda _r: True)
        assert w.ran == ran


def test_a_batch_that_cannot_start_ahead_stops_the_run_of_standbys(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # b0 runs one container after the other: a0 starts nothing, b0 starts c0 and d0.
    parts = {"a": 1, "b": 1, "c": 1, "d": 1}
    w, _ = _worker(monkeypatch, 2, parts, broken=frozenset({"b0"}))
    w.grade(_claim(list(parts)), lambda _r: True)
    assert w.ran == [("a0", []), ("b0", ["c0", "d0"]), ("c0", []), ("d0", [])]


def test_a_stopped_run_closes_the_standbys_of_problems_taken_ahead(
        monkeypatch: pytest.MonkeyPatch) -> None:
    w, _ = _worker(monkeypatch, 2, {"a": 1, "b": 1, "c": 1, "d": 1})
    # The run stops once the first problem is finished: after the batch that follows it, and
    # nothing after it is finished (b, graded, is not kept).
    took: list[str] = []
    w.grade(_claim(["a", "b", "c", "d"]), lambda r: bool(took.append(r.result)))
    assert w.ran == [("a0", ["b0", "c0"]), ("b0", [])] and took == ["a"]
    assert [s.batch for s in FakeStandby.made] == ["b0", "c0"]
    # b0's taken by its batch; c's, a problem taken ahead, closed with the run
    assert FakeStandby.made[1].closed and not w.queued


def test_a_problem_is_finished_once_its_judging_is_done_not_before_the_next_batch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A problem's last judging runs beside the next problem's first batch: the worker goes on
    and finishes the problem after the first batch by which its judging is done, in order,
    waiting only at the end."""
    slow: Future[Any] = Future()  # a's last judging, still running
    last: Future[Any] = Future()  # c's, done only once the worker waits for it
    w, events = _worker(monkeypatch, 0, {"a": 1, "b": 2, "c": 1},
                        judged={"a": [Judged(slow)], "c": [Judged(last)]})
    finished: list[str] = []

    def took(fin: Any) -> bool:
        finished.append(fin.result)
        return True

    real = w.grade_batch

    def grade_batch(p: Any, k: int, beside: Any) -> None:
        real(p, k, beside)
        if f"{p.sp.id}{k}" == "b0":
            slow.set_result(([], 0.0, 0.0))  # a's judging ends while b's first batch runs
        if f"{p.sp.id}{k}" == "c0":
            threading.Timer(0.05, last.set_result, (([], 0.0, 0.0),)).start()

    w.grade_batch = grade_batch
    w.grade(_claim(["a", "b", "c"]), took)
    assert finished == ["a", "b", "c"]
    ran = [e for e in events if e.startswith(("run", "finish"))]
    assert ran == ["run a0", "run b0", "finish a", "run b1", "run c0", "finish b", "finish c"]


def test_auto_times_beside_where_the_host_has_the_cores() -> None:
    cfg = Scheduling()
    assert cfg.time_beside == "auto"
    assert cfg.beside(1, cores=BESIDE_CORES) and cfg.beside(8, cores=128)
    assert not cfg.beside(1, cores=2)  # the CI machine: the loop's cores are the imports'
    assert not cfg.beside(2, cores=BESIDE_CORES)
    on, off = (Scheduling(time_beside=v) for v in ("on", "off"))
    assert on.beside(8, cores=2) and not off.beside(1, cores=64)


def test_a_judging_before_a_batch_holds_its_timed_loops_unless_beside(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """b0's timed loops wait for a's judging (on the worker's judging thread), still running
    when b0 starts; timed beside (--time-beside on) they do not, and a is still finished only
    once its judging is done."""
    for beside, waited in ((False, [0, 1]), (True, [0, 0])):
        gate = threading.Event()
        w, events = _worker(monkeypatch, 0, {"a": 1, "b": 1}, beside=beside)
        real = w.grade_batch

        def grade_batch(p: Any, k: int, bs: Any, real: Any = real,
                        gate: threading.Event = gate, w: Any = w) -> None:
            real(p, k, bs)
            if p.sp.id == "a":  # a's judging runs until b's batch has run
                p.judged.append(w.judging.submit(lambda: [] if gate.wait(5) else [0],
                                                 contextlib.ExitStack()))
            else:
                gate.set()

        w.grade_batch = grade_batch
        w.grade(_claim(["a", "b"]), lambda _r: True)
        assert w.waited == waited
        ran = [e for e in events if e.startswith(("run", "finish"))]
        assert ran == ["run a0", "run b0", "finish a", "finish b"]


def test_timed_beside_a_batch_starts_with_one_judging_behind_it_at_most(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Timed beside the judging, b0 starts while a's judging runs; c0 waits until a's is
    done (b's may still run): the host never holds more than two batches' outputs."""
    gate = threading.Event()
    w, events = _worker(monkeypatch, 0, {"a": 1, "b": 1, "c": 1}, beside=True)
    real = w.grade_batch

    def judged(pid: str) -> list[Any]:
        if pid == "a":
            gate.wait(5)
        events.append(f"judged {pid}")
        return []

    def grade_batch(p: Any, k: int, bs: Any) -> None:
        real(p, k, bs)
        p.judged.append(w.judging.submit(lambda pid=p.sp.id: judged(pid),
                                         contextlib.ExitStack()))
        if p.sp.id == "b":
            threading.Timer(0.1, gate.set).start()

    w.grade_batch = grade_batch
    w.grade(_claim(["a", "b", "c"]), lambda _r: True)
    ran = [e for e in events if e.startswith(("run", "judged"))]
    assert ran[:2] == ["run a0", "run b0"] and w.waited == [0, 0, 0]
    assert ran.index("judged a") < ran.index("run c0")


def test_timed_beside_each_standby_starts_depth_batches_ahead_and_none_is_waited_for(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """--time-beside on: no batch's timed loops wait for the standbys (it has no Beside), and
    each is started `depth` batches ahead of its turn, one a batch (not two every other
    batch, as when the loops wait for them), then taken by its batch."""
    parts = {"a": 1, "b": 2, "c": 1, "d": 1, "e": 1}
    w, events = _worker(monkeypatch, 2, parts, beside=True)
    made = FakeStandby.__init__

    def noted(self: FakeStandby, setup: object, batch: str, **kw: Any) -> None:
        made(self, setup, batch, **kw)
        events.append(f"start {batch}")

    monkeypatch.setattr(FakeStandby, "__init__", noted)
    w.grade(_claim(list(parts)), lambda _r: True)
    assert w.ran == [("a0", []), ("b0", []), ("b1", []), ("c0", []), ("d0", []), ("e0", [])]
    assert [e for e in events if e.startswith(("run", "start"))] == [
        "start b0", "start b1", "run a0", "start c0", "run b0", "start d0", "run b1",
        "start e0", "run c0", "run d0", "run e0"]
    assert not any(s.closed for s in FakeStandby.made)  # each one taken by its batch


def test_a_light_batchs_reference_runs_from_its_gate_or_not_at_all(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """run.ahead.ReferenceStandby: at its gate, `run` releases it (START in its input folder)
    and reads its run; one that died on the way is closed and gives None (its batch then runs
    a reference afresh)."""
    from grader.model.runs import ExitState
    from grader.run.ahead import ReferenceStandby

    monkeypatch.setattr(problem_run.time, "monotonic", lambda: 10.0)
    done = ExitState(exit_code=0, timed_out=False, oom_killed=False, wall_s=1.5, logs="",
                     logs_truncated=False)

    class Ref(FakeContainer):
        rebased = False

        def rebase(self) -> None:
            self.rebased = True

        def wait(self) -> ExitState:
            return done

    def standby(name: str, ref: Ref) -> ReferenceStandby:
        st = ReferenceStandby.__new__(ReferenceStandby)
        st.closed, st.released, st.gated, st.since = False, False, True, 9.0
        st.ref_in, st.ref_out = tmp_path / f"{name}_in", tmp_path / f"{name}_out"
        st.ref_in.mkdir()
        st.ref_out.mkdir()
        st.ref, st._stack = ref, contextlib.ExitStack()  # type: ignore[assignment]
        return st

    dead = standby("dead", Ref(running=False))
    assert dead.run() is None and dead.closed
    ref = Ref()
    ready = standby("ready", ref)
    (ready.ref_out / GATE_FILE).write_text("{}")
    got = ready.run()
    assert got is not None and got.exit is done and ready.released and ref.rebased
    assert (ready.ref_in / problem_run.START_FILE).is_file()
