"""The run layer without Docker: a batch's containers on an engine that plays them
(fake_engine.FakeEngine implements grader.sandbox.engine.ContainerEngine). What a problem's
plan gives each container, the order of the handshake, what is removed when something fails,
and the verdict a dying container comes to. tests/integration has the same on the real
engine."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from fake_engine import KERNEL, FakeContainer, FakeEngine, Script, Steps, entry, reference

from grader.detect.detector import Detector
from grader.detect.policy import load_policy
from grader.errors import InfraError
from grader.formats.problem import Problem, Shape
from grader.grading.worker import entry_budget
from grader.harness.protocol import (
    BOOT,
    ENTRY,
    ENTRY_MODE,
    GATE_FILE,
    IN,
    JOB_FILE,
    LOG_BYTES_ENV,
    OUT,
    PROBLEM,
    REFERENCE_MODE,
    STDOUT_BYTES,
)
from grader.judge.problem import judge_problem, reference_failure
from grader.model.channel import read_frames
from grader.model.results import ShapeResult
from grader.model.runs import Case, Evidence, computed, computed_first, reached_uncomputed
from grader.paths import PROBLEM_BUNDLES
from grader.run import ahead, pair, plan
from grader.run.ahead import Beside, EntryStandby, Standby
from grader.run.batch import Batch
from grader.run.cached import cached_entry
from grader.run.jobs import CODE, TimingKnobs, WorkerSetup, timed_plans
from grader.run.pair import Pair, run_pair
from grader.run.sequential import entry_container, reference_container, reference_run
from grader.sandbox import capped
from grader.sandbox.engine import Container, ContainerEngine
from grader.sandbox.spec import Limits, Role
from grader.suite.load import find_suite
from grader.verdicts import Verdict

PYTHON = "/opt/venv/bin/python3"


@pytest.fixture(autouse=True)
def _quick(monkeypatch: pytest.MonkeyPatch) -> None:
    # Plain folders for the caps (mounting a tmpfs is the integration tests' business), and
    # no wait between looks at a container.
    monkeypatch.setattr(capped, "can_mount", lambda: False)
    for module in (ahead, pair):  # the protocols that wait between looks
        monkeypatch.setattr(module, "POLL_S", 0.0)
    monkeypatch.setattr("grader.sandbox.engine.POLL_S", 0.0)  # every Container's wait


@pytest.fixture(scope="module")
def problem() -> Problem:
    return find_suite("demo", [PROBLEM_BUNDLES]).problems["vector_add"].problem


def _engine(ref: Script | None = None, ent: Script | list[Script] | None = None,
            **kw: Any) -> FakeEngine:
    ents = ent if isinstance(ent, list) else [ent or entry()]
    return FakeEngine({Role.REFERENCE: [ref or reference()], Role.ENTRY: ents}, **kw)


TIMED = TimingKnobs(min_samples=4, max_samples=8)


def _sandbox(engine: FakeEngine, *, timed: bool = False) -> WorkerSetup:
    return WorkerSetup(engine=engine, session="unit", python=PYTHON, device="cpu",
                   timing=TIMED if timed else None)


def _cases(setup: WorkerSetup, shapes: list[Shape], seeds: int = 2) -> list[Case]:
    cases = [Case(id=f"{s.id}.{k}", shape=s, seed=100 * n + k)
             for n, s in enumerate(shapes) for k in range(seeds)]
    if setup.timing is not None:
        cases += [Case(id=f"{s.id}.t{k}", shape=s, seed=1000 + 100 * n + k, timing=True)
                  for n, s in enumerate(shapes) for k in range(setup.timing.checked_per_shape)]
    return cases


def _batch(tmp_path: Path, problem: Problem, setup: WorkerSetup, shapes: list[Shape], **kw: Any
           ) -> Batch:
    """A batch as the worker makes one: the caps from the problem's count of bytes."""
    kernel = tmp_path / "kernel.py"
    kernel.write_text("def kernel(x, y):\n    return x + y\n")
    cases = _cases(setup, shapes)
    per_shape = {s.id: sum(1 for c in cases if c.shape.id == s.id) for s in shapes}
    limits: dict[str, Any] = {
        "ref_limits": plan.reference_limits(Limits(), problem, shapes, per_shape),
        "entry_limits": plan.entry_limits_from_count(Limits(), problem, shapes, per_shape)}
    return Batch(image="grader-problem-demo-vector_add:x", kernel_file=kernel, cases=cases,
                 problem=problem, **{**limits, **kw})


def _judge(problem: Problem, batch: Batch, reference_run: Evidence, entry_run: Evidence,
           limits: Limits) -> list[ShapeResult]:
    shapes = list({c.shape.id: c.shape for c in batch.cases}.values())
    return judge_problem(problem=problem, shapes=shapes, cases=batch.cases,
                         reference=reference_run, entry=entry_run, static=[],
                         own_kernels={KERNEL}, tracer=Detector(policy=load_policy("triton")),
                         max_output_bytes=limits.output_bytes,
                         plans=timed_plans(TIMED, batch.cases, batch.kernel_file))


def _pair(setup: WorkerSetup, batch: Batch, problem: Problem, **kw: Any
          ) -> tuple[Pair, list[ShapeResult] | None]:
    with run_pair(setup, batch, **kw) as pair:
        got = None if pair.entry is None else _judge(problem, batch, pair.reference,
                                                     pair.entry, pair.entry_limits)
    return pair, got


def _folders(engine: FakeEngine) -> list[Path]:
    return [p for c in engine.started for p in (c.in_dir, c.out_dir)]


def test_the_real_engine_and_the_fake_implement_the_protocols() -> None:
    from grader.sandbox.docker_engine import DockerEngine, RunningContainer

    assert issubclass(DockerEngine, ContainerEngine) and issubclass(RunningContainer, Container)
    assert issubclass(FakeEngine, ContainerEngine) and issubclass(FakeContainer, Container)


def test_a_problem_plans_batches_and_each_container_its_spec(tmp_path: Path,
                                                            problem: Problem) -> None:
    shapes = problem.shapes
    per_shape = {s.id: 2 for s in shapes}
    # 1 MiB: the smoke shape's two cases fit, each production shape is a batch of its own.
    assert [[s.id for s in part] for part in plan.batches(problem, shapes, per_shape, 1 << 20)
            ] == [["smoke_4099"], ["residual_prefill"], ["residual_decode"]]
    engine = _engine()
    setup = _sandbox(engine)
    batch = _batch(tmp_path, problem, setup, [shapes[0]])
    pair, results = _pair(setup, batch, problem)
    ref, ent = engine.of(Role.REFERENCE), engine.of(Role.ENTRY)
    assert len(ref) == len(ent) == 1
    ref_spec, ent_spec = ref[0].spec, ent[0].spec
    assert ref_spec.command == [PYTHON, "-I", BOOT, REFERENCE_MODE]
    assert ent_spec.command == [PYTHON, "-I", BOOT, ENTRY_MODE]
    assert ref_spec.image == ent_spec.image == batch.image
    assert {b.container for b in ref_spec.binds} == {IN, OUT} and ref_spec.masks == ()
    # The entry: its code read-only, the reference masked, its frames on stdout.
    assert {b.container: b.read_only for b in ent_spec.binds} == {ENTRY: True, IN: True,
                                                                  OUT: False}
    assert ent_spec.masks == (PROBLEM,) and ent_spec.stdout_bytes == STDOUT_BYTES
    assert ent_spec.env[LOG_BYTES_ENV] == str(batch.entry_limits.log_bytes)
    assert ref_spec.limits == batch.ref_limits and ent_spec.limits == batch.entry_limits
    assert ref_spec.session == ent_spec.session == "unit"
    # Imported before any input or job was there: its folder held its code alone.
    assert ent[0].seen_at_import == [CODE]
    assert engine.events.index("entry: job") > engine.events.index("reference: cases done")
    assert pair.entry is not None and pair.entry.frames is not None
    assert pair.entry.frames.ready is not None and pair.entry_limits is batch.entry_limits
    assert results is not None and [r.verdict for r in results] == [Verdict.PASSED]
    assert engine.left() == [] and not any(p.exists() for p in _folders(engine))


def test_timed_loops_wait_for_the_entry_to_exit(tmp_path: Path, problem: Problem) -> None:
    engine = _engine()
    setup = _sandbox(engine, timed=True)
    batch = _batch(tmp_path, problem, setup, problem.shapes[:1])
    _pair_result, results = _pair(setup, batch, problem)
    ev = engine.events
    # The reference's timed loop starts only once no entry code runs any more.
    assert ev.index("entry: exit 0") < ev.index("reference: go")
    assert "entry: traced" not in ev  # nothing beside it to wait for: never held
    assert results is not None and [r.verdict for r in results] == [Verdict.PASSED]
    assert results[0].timing is not None and results[0].timing.median_us == 10.0
    assert results[0].reference_timing is not None
    assert engine.left() == []


LONG = TimingKnobs(min_samples=4, max_samples=100)  # 11 checked a shape, 8 computed first


def _long(tmp_path: Path, problem: Problem, engine: FakeEngine) -> tuple[WorkerSetup, Batch]:
    setup = replace(_sandbox(engine), timing=LONG)
    return setup, _batch(tmp_path, problem, setup, problem.shapes[:1])


def _judge_long(problem: Problem, batch: Batch, ref: Evidence, ent: Evidence, limits: Limits,
                topup: Evidence | None = None) -> list[ShapeResult]:
    return judge_problem(problem=problem, shapes=problem.shapes[:1], cases=batch.cases,
                         reference=ref, entry=ent, static=[], own_kernels={KERNEL},
                         tracer=Detector(policy=load_policy("triton")),
                         max_output_bytes=limits.output_bytes,
                         plans=timed_plans(LONG, batch.cases, batch.kernel_file), topup=topup)


def test_a_long_loops_checked_calls_ride_on_the_held_references_go(
        tmp_path: Path, problem: Problem) -> None:
    """The reference computes the checked timed calls a loop of up to 58 calls reaches
    (model/timed.py) and the entry's job goes out once those are done; the checked calls a
    longer loop reached come with the held reference's GO, computed before its timed loop,
    with no container to start."""
    engine = _engine(ent=entry(calls=100))
    setup, batch = _long(tmp_path, problem, engine)
    first = [c.id for c in computed_first(batch.cases)]
    rest = [c.id for c in batch.cases if c.timing][7:-1]
    with run_pair(setup, batch) as got:
        assert got.entry is not None  # side by side: no second try one after the other
        results = _judge_long(problem, batch, got.reference, got.entry, got.entry_limits)
        assert got.reference.out.result is not None
        assert set(got.reference.out.result.cases) == {*first, *rest}
    assert len(engine.of(Role.REFERENCE)) == 1
    ev = engine.events
    assert ev.index("entry: exit 0") < ev.index("reference: go") < ev.index(
        f"reference: go case {rest[0]}")
    assert [r.verdict for r in results] == [Verdict.PASSED]
    assert results[0].timing is not None and results[0].timing.samples == 100
    assert engine.left() == []


def test_a_long_loop_on_a_finished_reference_gets_a_top_up_run(
        tmp_path: Path, problem: Problem) -> None:
    """One container after the other (and a round's kept reference): the reference has
    exited, so the checked calls a long loop reached beyond it are computed by a reference
    run on those alone (grading.worker's top-up), where the judge finds them."""
    engine = _engine(ent=entry(calls=100))
    engine.scripts[Role.REFERENCE].append(reference())  # the top-up's
    setup, batch = _long(tmp_path, problem, engine)
    with reference_container(setup, batch) as (ref, ref_dir), \
            entry_container(setup, batch, ref_dir) as ent:
        plans = timed_plans(LONG, batch.cases, batch.kernel_file)
        todo = reached_uncomputed(batch.cases, plans, ent, computed(ref.out.result))
        assert [c.id for c in todo] == [c.id for c in batch.cases if c.timing][7:-1]
        assert _judge_long(problem, batch, ref, ent, batch.entry_limits)[0].verdict == \
            Verdict.INFRA_ERROR  # their expected samples missing: the grader's failure
        with reference_run(setup, batch.image, todo, batch.ref_limits, problem,
                           topup=True) as (topup, _):
            top = engine.of(Role.REFERENCE)[1].job()
            results = _judge_long(problem, batch, ref, ent, batch.entry_limits, topup)
    assert "timing" not in top and [c["id"] for c in top["cases"]] == [c.id for c in todo]
    assert [r.verdict for r in results] == [Verdict.PASSED]
    assert engine.left() == []


def test_standbys_wait_at_their_gates_and_hold_the_timed_loops_beside(
        tmp_path: Path, problem: Problem) -> None:
    engine = _engine()
    setup = _sandbox(engine, timed=True)
    first = _batch(tmp_path, problem, setup, problem.shapes[:1])
    (tmp_path / "next").mkdir()
    second = _batch(tmp_path / "next", problem, setup, problem.shapes[2:])
    ahead = Standby(setup, second)  # its harnesses make their first step beside the batch
    with run_pair(setup, first, beside=Beside((ahead,))) as pair:
        assert pair.entry is not None
    gated = engine.started[:2]  # the standby's, started first
    assert [(c.role, c.gated) for c in gated] == [(Role.REFERENCE, True), (Role.ENTRY, True)]
    ev = engine.events
    gates = max(ev.index("reference: at the gate"), ev.index("entry: at the gate"))
    # The entry's job said "hold" (the standby was not at its gates yet): traced, then timed
    # once both were; no timed loop of the batch ran before.
    assert gates < ev.index("entry: traced") < ev.index("entry: timed")
    assert ev.index("reference: go") > gates
    assert ahead.idle() and ahead.usable()
    # At its gate the entry has not imported its module: no ready frame, no job, no input.
    frames = read_frames(gated[1].stdout())
    assert frames.standby is not None and frames.ready is None
    assert [p.name for p in ahead.ent_in.iterdir()] == [CODE]
    assert [p.name for p in ahead.ref_out.iterdir()] == [GATE_FILE]
    with run_pair(setup, second, standby=ahead) as pair:
        assert pair.entry is not None
        got = _judge(problem, second, pair.reference, pair.entry, pair.entry_limits)
    assert [r.verdict for r in got] == [Verdict.PASSED]
    assert len(engine.started) == 4  # the standby's containers ran the second batch
    assert engine.left() == [] and not any(p.exists() for p in _folders(engine))


def test_one_container_after_the_other(tmp_path: Path, problem: Problem) -> None:
    engine = _engine()
    setup = _sandbox(engine)
    batch = _batch(tmp_path, problem, setup, problem.shapes[:1])
    with reference_container(setup, batch) as (ref, ref_dir):
        assert engine.left() == []  # the reference exited and was removed
        limits = plan.entry_limits(Limits(), ref_dir, batch.cases)
        with entry_container(setup, replace(batch, entry_limits=limits), ref_dir) as ent:
            got = _judge(problem, batch, ref, ent, limits)
    assert engine.of(Role.ENTRY)[0].seen_at_import == [CODE]
    assert engine.of(Role.ENTRY)[0].spec.limits == limits
    assert [r.verdict for r in got] == [Verdict.PASSED]
    assert engine.left() == [] and not any(p.exists() for p in _folders(engine))


def test_outputs_larger_than_counted_run_the_entry_again_after(tmp_path: Path,
                                                              problem: Problem) -> None:
    engine = _engine()
    setup = _sandbox(engine)
    tiny = Limits(output_bytes=4096)
    batch = _batch(tmp_path, problem, setup, problem.shapes[:1], entry_limits=tiny)
    pair, results = _pair(setup, batch, problem)
    first, again = engine.of(Role.ENTRY)
    # The first was stopped before its job; the second ran after the reference had exited.
    assert first.spec.limits == tiny and engine.events.count("entry: job") == 1
    killed = first.poll()
    assert killed is not None and killed.exit_code == 137
    assert engine.events.index("reference: exit 0") < engine.events.index("entry: job")
    assert again.spec.limits == pair.entry_limits
    assert pair.entry_limits.output_bytes > tiny.output_bytes
    assert results is not None and [r.verdict for r in results] == [Verdict.PASSED]
    assert engine.left() == []


DYING = {
    "killed at import": (entry(dies="import"), Verdict.RUNTIME_ERROR,
                         "died while importing (exit 137)"),
    "out of memory at import": (entry(dies="import", oom=True), Verdict.RESOURCE_LIMIT,
                                "killed by the memory limit"),
    "import failed": (entry(ready_ok=False), Verdict.COMPILE_ERROR,
                      "the kernel file does not parse"),
    "dies in its calls": (entry(dies="calls", exit_code=1), Verdict.RUNTIME_ERROR,
                          "died before finishing (exit 1)"),
    "never ends": (entry(hangs=True), Verdict.TIMEOUT, "wall-clock limit"),
    "a ready file": (entry(ready_file=True), Verdict.TAMPERING,
                     "ready.json in the output directory"),
    "wrong outputs": (entry(compute=torch.sub), Verdict.INCORRECT, "seed"),
}


@pytest.mark.parametrize("script,verdict,detail", DYING.values(), ids=DYING.keys())
def test_a_container_that_goes_wrong_gets_its_verdict(tmp_path: Path, problem: Problem,
                                                      script: Script, verdict: Verdict,
                                                      detail: str) -> None:
    engine = _engine(ent=script)
    setup = _sandbox(engine)
    batch = _batch(tmp_path, problem, setup, problem.shapes[:1],
                   entry_limits=plan.entry_limits_from_count(
                       Limits(wall_s=0.5), problem, problem.shapes[:1], {"smoke_4099": 2}))
    _pair_result, results = _pair(setup, batch, problem)
    assert results is not None and [r.verdict for r in results] == [verdict]
    assert detail in results[0].detail
    assert engine.left() == [] and not any(p.exists() for p in _folders(engine))


def test_a_failing_reference_stops_the_entry_beside_it(tmp_path: Path, problem: Problem) -> None:
    engine = _engine(ref=reference(failing="smoke_4099.1"), ent=entry(hangs=True))
    setup = _sandbox(engine)
    batch = _batch(tmp_path, problem, setup, problem.shapes[:1])
    with run_pair(setup, batch) as pair:
        assert pair.entry is None  # the worker grades the batch again, one after the other
        assert reference_failure(pair.reference, batch.cases) is not None
        ent = engine.of(Role.ENTRY)[0]
        assert not ent.has(JOB_FILE) and ent.poll() is not None  # stopped before its job
    assert engine.left() == [] and not any(p.exists() for p in _folders(engine))


def test_an_entry_the_engine_cannot_start_leaves_nothing(tmp_path: Path,
                                                         problem: Problem) -> None:
    engine = _engine(refuse=Role.ENTRY)
    setup = _sandbox(engine)
    batch = _batch(tmp_path, problem, setup, problem.shapes[:1])
    with pytest.raises(InfraError, match="engine refused"), run_pair(setup, batch):
        pass
    (ref,) = engine.started
    assert ref.removed and not ref.in_dir.exists() and not ref.out_dir.exists()


def test_a_grader_failure_mid_batch_removes_both_containers(tmp_path: Path,
                                                            problem: Problem) -> None:
    engine = _engine()
    setup = _sandbox(engine, timed=True)
    batch = _batch(tmp_path, problem, setup, problem.shapes[:1])
    ahead = Standby(setup, _batch(tmp_path, problem, setup, problem.shapes[2:]))

    with pytest.raises(RuntimeError, match="a bug"), run_pair(setup, batch,
                                                             beside=Beside((ahead,))):
        raise RuntimeError("a bug of the grader's, while judging")
    # The batch's own containers are gone; the standby is its owner's (the worker's) to close.
    assert [(c.gated, c.removed) for c in engine.started] == [
        (True, False), (True, False), (False, True), (False, True)]
    ahead.close()
    assert engine.left() == [] and not any(p.exists() for p in _folders(engine))
    assert engine.reap("unit") == 0


def test_a_standby_that_dies_at_its_gate_is_replaced(tmp_path: Path, problem: Problem) -> None:
    def dies_at_gate(c: FakeContainer) -> Steps:
        yield
        return 1

    engine = _engine(ent=[dies_at_gate, entry()])
    setup = _sandbox(engine)
    batch = _batch(tmp_path, problem, setup, problem.shapes[:1])
    ahead = Standby(setup, batch)
    ahead.settle()
    assert not ahead.usable()
    _pair_result, results = _pair(setup, batch, problem, standby=ahead)
    assert results is not None and [r.verdict for r in results] == [Verdict.PASSED]
    # Closed, and the batch ran on containers of its own, started ungated.
    assert ahead.closed and [c.gated for c in engine.started] == [True, True, False, False]
    assert engine.left() == [] and not any(p.exists() for p in _folders(engine))


def test_a_cached_batch_runs_in_its_entry_standby_held_beside_the_next(
        tmp_path: Path, problem: Problem) -> None:
    """A round's later entry (grader/round/refcache.py): the batch's reference was computed
    before, so only its entry container was started ahead (EntryStandby); it runs the batch,
    its timed loops held until the next batch's entry standby is at its gate."""
    engine = _engine()
    setup = _sandbox(engine, timed=True)
    batch = _batch(tmp_path, problem, setup, problem.shapes[:1])
    (tmp_path / "next").mkdir()
    later = _batch(tmp_path / "next", problem, setup, problem.shapes[:1])  # the same cases
    with reference_container(setup, batch) as (ref, ref_dir):
        own = EntryStandby(setup, batch)
        ahead = EntryStandby(setup, later)
        assert [(c.role, c.gated) for c in engine.started[1:]] == [(Role.ENTRY, True)] * 2
        with cached_entry(setup, batch, ref_dir, standby=own, beside=Beside((ahead,))) as ent:
            got = _judge(problem, batch, ref, ent, batch.entry_limits)
        assert [r.verdict for r in got] == [Verdict.PASSED]
        assert len(engine.started) == 3  # no container of its own: the standby's ran it
        ev = engine.events
        assert ev.count("entry: at the gate") == 2
        last_gate = len(ev) - 1 - ev[::-1].index("entry: at the gate")
        assert last_gate < ev.index("entry: timed")  # held while the next one imported
        assert "entry: traced" in ev
        assert ahead.usable() and [p.name for p in ahead.ent_in.iterdir()] == [CODE]
        with cached_entry(setup, later, ref_dir, standby=ahead, beside=None) as ent:
            got = _judge(problem, later, ref, ent, later.entry_limits)
        assert [r.verdict for r in got] == [Verdict.PASSED]
        assert len(engine.started) == 3
    assert engine.left() == [] and not any(p.exists() for p in _folders(engine))


def test_a_cached_batch_whose_outputs_need_larger_caps_starts_afresh(
        tmp_path: Path, problem: Problem) -> None:
    """An entry standby started under the counted caps is not used when the cached outputs
    call for larger ones: the batch runs in a container of its own, under those."""
    engine = _engine()
    setup = _sandbox(engine)
    batch = _batch(tmp_path, problem, setup, problem.shapes[:1], entry_limits=Limits(
        output_bytes=4096))
    with reference_container(setup, batch) as (ref, ref_dir):
        standby = EntryStandby(setup, batch)
        needed = plan.entry_limits(batch.entry_limits, ref_dir, batch.cases)
        assert needed.output_bytes > batch.entry_limits.output_bytes
        with cached_entry(setup, replace(batch, entry_limits=needed), ref_dir, standby=standby,
                          beside=None) as ent:
            got = _judge(problem, batch, ref, ent, needed)
    assert [r.verdict for r in got] == [Verdict.PASSED]
    first, fresh = engine.of(Role.ENTRY)
    assert first.gated and first.removed and not fresh.gated
    assert fresh.spec.limits == needed and standby.closed
    assert engine.left() == [] and not any(p.exists() for p in _folders(engine))


def test_the_wall_clock_starts_when_the_harness_is_set_up(tmp_path: Path, problem: Problem
                                                          ) -> None:
    """Issue 34: --timeout counted the container's start and the cold `import torch`, so an
    honest smoke kernel was `timeout` at --timeout 3. The entry's harness arms its clock once
    set up (before any entry code); until then the set-up is allowed on top (Limits.setup_s),
    from then on only the limit. The same limits time out an entry that hangs once armed."""
    shapes = problem.shapes[:1]
    limits = Limits(wall_s=0.5, setup_s=30.0)

    def graded(script: Script) -> tuple[ShapeResult, FakeEngine]:
        engine = _engine(ent=script)
        setup = _sandbox(engine)
        batch = _batch(tmp_path, problem, setup, shapes, entry_limits=plan.entry_limits_from_count(
            limits, problem, shapes, {shapes[0].id: 2}))
        _pair_result, results = _pair(setup, batch, problem)
        assert results is not None
        return results[0], engine

    slow, engine = graded(entry(set_up_s=1.0))  # set-up twice the limit: not the entry's
    assert slow.verdict is Verdict.PASSED, slow.detail
    hung, engine = graded(entry(set_up_s=1.0, hangs=True))
    assert hung.verdict is Verdict.TIMEOUT
    ent = engine.of(Role.ENTRY)[0]
    assert ent.poll() is not None and ent.poll().wall_s < 5.0  # killed at its limit after arming


def test_timed_loops_wait_for_the_judging_before(tmp_path: Path, problem: Problem) -> None:
    """Issue 32: the batch before is judged on the host beside this batch's warm-up and traced
    calls, never beside a timed loop: both timed loops wait for its judging (Beside.after)."""
    engine = _engine()
    setup = _sandbox(engine, timed=True)
    batch = _batch(tmp_path, problem, setup, problem.shapes[:1])
    judging: Future[None] = Future()

    def judge_once_traced() -> None:  # the judging ends only after the entry has traced
        while "entry: traced" not in engine.events:
            time.sleep(0.001)
        time.sleep(0.05)
        engine.events.append("judged")
        judging.set_result(None)

    judge = threading.Thread(target=judge_once_traced, daemon=True)
    judge.start()
    _pair_result, results = _pair(setup, batch, problem, beside=Beside(after=(judging,)))
    judge.join(timeout=30)
    ev = engine.events
    assert ev.index("entry: traced") < ev.index("judged") < ev.index("entry: timed")
    assert ev.index("judged") < ev.index("reference: go")
    assert results is not None and [r.verdict for r in results] == [Verdict.PASSED]
    assert engine.left() == []


def test_a_cached_batch_without_a_standby_starts_beside_the_next_ones(
        tmp_path: Path, problem: Problem) -> None:
    """Issue 32: a cached batch with no standby of its own (a later entry's first batch)
    starts its container at once, beside the next batches' standbys' set-up; only its timed
    loops wait for them (it used to wait for their set-up before starting its own)."""
    release = threading.Event()
    inner = entry()

    def slow_to_its_gate(c: FakeContainer) -> Steps:  # its set-up ends only once released
        while not release.is_set():
            yield
        yield from inner(c)

    engine = _engine(ent=[slow_to_its_gate, entry()])
    setup = _sandbox(engine, timed=True)
    batch = _batch(tmp_path, problem, setup, problem.shapes[:1])
    (tmp_path / "next").mkdir()
    later = _batch(tmp_path / "next", problem, setup, problem.shapes[:1])

    def release_once_traced() -> None:
        while "entry: traced" not in engine.events:
            time.sleep(0.001)
        release.set()

    watcher = threading.Thread(target=release_once_traced, daemon=True)
    with reference_container(setup, batch) as (ref, ref_dir):
        ahead = EntryStandby(setup, later)
        watcher.start()
        with cached_entry(setup, batch, ref_dir, standby=None, beside=Beside((ahead,))) as ent:
            got = _judge(problem, batch, ref, ent, batch.entry_limits)
        watcher.join(timeout=30)
        assert [r.verdict for r in got] == [Verdict.PASSED]
        ev = engine.events
        # Its own container imported and traced while the standby was still setting up, and
        # its timed loops waited until the standby was at its gate.
        assert ev.index("entry: imported") < ev.index("entry: traced") < ev.index(
            "entry: at the gate") < ev.index("entry: timed")
        assert ahead.usable()
        ahead.close()
    assert engine.left() == [] and not any(p.exists() for p in _folders(engine))


def test_an_entry_that_cannot_pass_is_timed_on_the_references_budget(
        tmp_path: Path, problem: Problem) -> None:
    """A problem whose static findings already keep every shape from `passed` (here: a file
    with no Triton kernel, FB005) has its entry's loops timed on the reference's budget; a
    native one on the knobs' own. The budget travels in the batch, to either protocol."""
    detector = Detector(policy=load_policy("triton"))
    root = Path(__file__).resolve().parents[2] / "examples"
    fallback = detector.static((root / "torch-fallback/kernels/vector_add.py").read_text(),
                               "kernels/vector_add.py")
    native = detector.static((root / "triton/kernels/vector_add.py").read_text(),
                             "kernels/vector_add.py")
    knobs = TimingKnobs()
    assert entry_budget(knobs, fallback) == knobs.reference_budget_s < knobs.budget_s
    assert entry_budget(knobs, native) is None
    assert entry_budget(None, fallback) is None  # no timed loop at all (the CPU)
    engine = _engine(ent=[entry(), entry()])
    setup = _sandbox(engine, timed=True)
    capped_batch = _batch(tmp_path, problem, setup, problem.shapes[:1],
                          timing_budget_s=entry_budget(TIMED, fallback))
    with run_pair(setup, capped_batch):
        ref, first = engine.of(Role.REFERENCE)[0], engine.of(Role.ENTRY)[0]
        assert first.job()["budget_s"] == TIMED.reference_budget_s
        assert ref.job()["budget_s"] == TIMED.reference_budget_s  # the reference's own, as ever
    with reference_container(setup, capped_batch) as (_ref, ref_dir):
        with entry_container(setup, _batch(tmp_path, problem, setup, problem.shapes[:1]),
                             ref_dir):
            assert engine.of(Role.ENTRY)[1].job()["budget_s"] == TIMED.budget_s
