"""Containers started one batch ahead (run.ahead.Standby, grader/grading/worker.py), against the
real engine: the gate holds them before the entry's file is loaded, the batch they run beside
waits for them before its timed loops, a dead one is replaced, and whole runs grade the
same."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import docker.errors
import pytest
from docker.models.containers import ContainerCollection
from test_faults import ALL, _bundle, _grader, _left, _verdicts
from test_pair import KERNEL, TIMED, _cases

from grader.grading.config import GradingOptions, Scheduling
from grader.harness.protocol import GATE_FILE, GO_FILE, STANDBY, STANDBY_ENV, TRACED
from grader.images import ensure, problem_plan
from grader.model.channel import GateFrame, read_frames
from grader.run.ahead import Beside, Standby
from grader.run.batch import Batch
from grader.run.jobs import WorkerSetup
from grader.run.pair import run_pair
from grader.sandbox.docker_engine import DockerEngine
from grader.sandbox.spec import Bind, Limits
from grader.verdicts import Verdict

pytestmark = pytest.mark.docker


def _sandbox(engine: DockerEngine, **kw: Any) -> WorkerSetup:
    return WorkerSetup(engine=engine, session=f"test-{uuid.uuid4().hex[:8]}",
                   python="/opt/venv/bin/python3", device="cpu", **kw)


@pytest.fixture()
def setup(engine: DockerEngine) -> Iterator[WorkerSetup]:
    """A CPU sandbox of its own session; afterwards its containers are reaped, and none
    may have been left behind."""
    box = _sandbox(engine)
    try:
        yield box
    finally:
        engine.reap(box.session)
    assert _left(engine, box.session) == []


def _batch(engine: DockerEngine, runtime: Any) -> Batch:
    cases, bundle = _cases()
    image = ensure(engine, problem_plan(runtime.tag, "demo", bundle))
    return Batch(image=image.tag, kernel_file=KERNEL, cases=[c for c in cases if not c.timing],
                 ref_limits=Limits(wall_s=120.0, memory_bytes=4 << 30),
                 entry_limits=Limits(wall_s=120.0), problem=bundle.problem)


def _files(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir())


def _frame_time(container: Any, kind: str) -> float:
    """When the container's warden wrote its `kind` frame (the engine's own timestamp)."""
    for line in container.logs(stdout=True, stderr=False, timestamps=True).splitlines():
        stamp, _, frame = line.partition(b" ")
        if json.loads(base64.b64decode(frame))["frame"] == kind:
            day, _, frac = stamp.decode().rstrip("Z").partition(".")
            return datetime.fromisoformat(day).replace(tzinfo=UTC).timestamp() + float(
                f"0.{frac or 0}")
    raise AssertionError(f"no {kind} frame")


def test_standby_waits_at_its_gate_and_its_wait_is_not_its_own(engine, runtime, setup) -> None:  # type: ignore[no-untyped-def]
    batch = _batch(engine, runtime)
    st = Standby(setup, batch)
    st.settle()
    assert st.usable()
    # Imported and waiting: the entry's file not loaded (no ready frame), no input drawn.
    assert _files(st.ent_out) == []
    assert _files(st.ref_out) == [GATE_FILE]
    assert _files(st.ent_in) == [".code"]  # its kernel file alone (jobs.entry_in)
    frames = read_frames(st.ent.stdout())  # the entry's gate is a frame (harness/warden.py)
    assert frames.ready is None
    # On a CPU: no GPU set-up at the standby (tests/gpu has the GPU's).
    assert frames.standby == GateFrame(ok=True, cuda_initialized=False, prepared=False)
    time.sleep(2.0)
    t0 = time.monotonic()
    with run_pair(setup, batch, standby=st) as pair:
        assert pair.entry is not None
        ref, entry = pair.reference, pair.entry
        assert ref.exit.exit_code == 0 and entry.exit.exit_code == 0, entry.exit.logs
        assert entry.out.result is not None and ref.out.result is not None
        assert all(r.ok for r in entry.out.result.cases.values())
        # The walls count from the release, not from the containers' start.
        assert entry.exit.wall_s <= time.monotonic() - t0
        for run in (ref, entry):
            assert run.out.result is not None
            assert run.out.result.phases_s["standby"] > 0
            assert run.out.result.phases_s["gate"] >= 2.0
    assert st.closed


def test_the_timed_loops_wait_for_the_standby_beside(engine, runtime, setup, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Batch A runs while batch B's containers are still importing (held up here by an
    interpreter that sleeps 8 s first): A's entry gets its job at once and makes its traced
    calls, but its timed loop, and its reference's, start only once both of B's harnesses
    wait at their gates. Then B runs from its standby."""
    slow = tmp_path / "slow-python"
    slow.write_text('#!/bin/sh\nsleep 8\nexec /opt/venv/bin/python3 "$@"\n')
    slow.chmod(0o755)
    timed = replace(setup, timing=TIMED)
    slow_setup = replace(timed, python="/grader-test/python",
                         extra_binds=(Bind(host=str(slow), container="/grader-test/python"),))
    cases, _ = _cases()
    first = replace(_batch(engine, runtime), cases=cases)  # with its timing set
    st = Standby(timed, first)
    beside = Standby(slow_setup, _batch(engine, runtime))
    with run_pair(timed, first, standby=st, beside=Beside((beside,))) as pair:
        assert pair.entry is not None and pair.entry.exit.exit_code == 0, pair.entry.exit.logs
        gates = max((beside.ref_out / GATE_FILE).stat().st_mtime,
                    _frame_time(beside.ent.container, STANDBY))
        # Delivered before the standby beside was there, so held: traced, then timed on GO.
        job = st.ent_in / "job.json"
        assert job.stat().st_mtime < gates
        assert json.loads(job.read_text())["hold"] is True
        assert _frame_time(st.ent.container, TRACED) < gates
        assert (st.ent_in / GO_FILE).stat().st_mtime >= gates
        assert (st.ref_in / GO_FILE).stat().st_mtime >= gates
        entry = pair.entry.out.result
        assert entry is not None and all(r.ok for r in entry.cases.values())
        assert set(entry.timings) == {cases[0].shape.id}  # (no CUDA events on a CPU)
        assert entry.phases_s["timing_wait"] > 0
        assert pair.reference.exit.exit_code == 0
    assert st.closed and beside.usable()
    with run_pair(setup, beside.batch, standby=beside) as pair:
        assert pair.entry is not None and pair.entry.exit.exit_code == 0
        assert pair.entry.out.result is not None
        assert "standby" in pair.entry.out.result.phases_s


def test_a_standby_that_dies_is_replaced(engine, runtime, setup) -> None:  # type: ignore[no-untyped-def]
    batch = _batch(engine, runtime)
    st = Standby(setup, batch)
    st.settle()
    st.ent.kill()
    assert st.idle() and not st.usable()
    with run_pair(setup, batch, standby=st) as pair:
        assert st.closed
        assert pair.entry is not None and pair.entry.exit.exit_code == 0
        assert pair.entry.out.result is not None
        assert "standby" not in pair.entry.out.result.phases_s  # started afresh


def test_a_standby_whose_harness_cannot_start_is_unusable(engine, runtime, setup) -> None:  # type: ignore[no-untyped-def]
    """Exited before its gate (here: an interpreter that fails at once): never waited on,
    never used."""
    batch = _batch(engine, runtime)
    broken = WorkerSetup(engine=engine, session=setup.session, python="/bin/false",
                     device="cpu")
    st = Standby(broken, batch)
    deadline = time.monotonic() + 30
    while not st.idle():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert not st.usable()
    st.close()


def _run(tmp_path: Path, engine: DockerEngine, time_beside: str = "auto"
         ) -> tuple[Any, list[str], str]:
    cfg = GradingOptions(bundle=_bundle(tmp_path), out_dir=tmp_path / "out",
                         scheduling=Scheduling(start_ahead="on", time_beside=time_beside))
    lines: list[str] = []
    grader = _grader(cfg, engine, progress=lines.append)
    return grader.open_and_grade(), lines, grader.session


@pytest.mark.parametrize("time_beside", ["auto", "on"])  # on: as on a GPU host (8 cores a GPU)
def test_a_run_started_ahead_grades_the_same(engine, runtime, tmp_path: Path,  # type: ignore[no-untyped-def]
                                             time_beside: str) -> None:
    rep, lines, session = _run(tmp_path, engine, time_beside)
    assert _verdicts(rep) == dict.fromkeys(ALL, Verdict.PASSED)
    first, *rest = rep.problems
    assert "entry.standby" not in first.phases_s
    for p in rest:  # their imports were made beside the problem before
        assert p.phases_s["entry.standby"] > 0 and p.phases_s["reference.standby"] > 0
    # Each next problem is taken before the last batch of the one before (for its standby).
    assert lines.index("rmsnorm: image") < lines.index("vector_add: done (passed)")
    assert rep.wall_s is not None and rep.wall_s > 0
    assert _left(engine, session) == []


def test_a_standby_killed_at_its_gate_is_started_afresh(engine, runtime, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    real = Standby.__init__
    made: list[Standby] = []

    def killing(self: Standby, *args: Any, **kw: Any) -> None:
        real(self, *args, **kw)
        if self.gated and not made:  # the first standby: its entry dies while it waits
            made.append(self)
            self.ent.kill()

    monkeypatch.setattr(Standby, "__init__", killing)
    rep, _lines, session = _run(tmp_path, engine)
    assert made
    assert _verdicts(rep) == dict.fromkeys(ALL, Verdict.PASSED)
    assert "entry.standby" not in rep.problems[1].phases_s  # rmsnorm's was replaced
    assert _left(engine, session) == []


def test_a_standby_that_cannot_start_is_not_a_failure(engine, runtime, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine refuses the first container started ahead: that problem starts its own in
    its turn, and every problem passes."""
    real_run: Callable[..., Any] = ContainerCollection.run
    refused: list[int] = []

    def run(self: ContainerCollection, *args: Any, **kwargs: Any) -> Any:
        if not refused and (kwargs.get("environment") or {}).get(STANDBY_ENV) == "1":
            refused.append(1)
            raise docker.errors.APIError("500 Server Error: no more containers (fault drill)")
        return real_run(self, *args, **kwargs)

    monkeypatch.setattr(ContainerCollection, "run", run)
    rep, lines, session = _run(tmp_path, engine)
    assert refused
    assert _verdicts(rep) == dict.fromkeys(ALL, Verdict.PASSED)
    assert any(line.startswith("rmsnorm: cannot start its containers ahead") for line in lines)
    assert _left(engine, session) == []
