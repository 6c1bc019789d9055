"""run.pair.run_pair against the real engine: the reference and the entry side by side.

The GPU path holds the reference's timed loop until the entry's container has exited. On a
CPU host that path only runs when asked for: here a sandbox with timing knobs on the CPU, so
that the hold, the release and the held-time accounting are exercised in CI (the timed loops
themselves then fail, as CUDA events need a GPU, and say so in their records).
"""

from __future__ import annotations

import uuid

import pytest

from grader.grading.seeds import derive_seed
from grader.harness.protocol import CASES_FILE, RECIPE_FILE
from grader.images import ensure, problem_plan
from grader.model.runs import Case
from grader.paths import REPO
from grader.run.batch import Batch
from grader.run.jobs import TimingKnobs, WorkerSetup
from grader.run.pair import run_pair
from grader.sandbox.spec import Limits
from grader.suite.load import SuiteProblem, load_suite

pytestmark = pytest.mark.docker
KERNEL = REPO / "examples" / "triton" / "kernels" / "vector_add.py"


# A timed loop of one call and its closing one: two checked cases a shape.
TIMED = TimingKnobs(min_samples=1, max_samples=1, budget_s=0.5, reference_budget_s=0.5)


def _cases() -> tuple[list[Case], SuiteProblem]:
    bundle = load_suite(REPO / "problem_bundles" / "demo").problems["vector_add"]
    shape = next(s for s in bundle.problem.shapes if s.smoke)
    secret = b"pair-test"
    cases = [Case(id=f"{shape.id}.0", shape=shape, seed=derive_seed(secret, "vector_add",
                                                                    shape.id, 0)),
             *(Case(id=f"{shape.id}.t{k}", shape=shape, timing=True,
                    seed=derive_seed(secret, "vector_add", shape.id, 1000 + k))
               for k in range(TIMED.checked_per_shape))]
    return cases, bundle


def test_held_reference_times_only_after_the_entry_exits(engine, runtime) -> None:  # type: ignore[no-untyped-def]
    cases, bundle = _cases()
    image = ensure(engine, problem_plan(runtime.tag, "demo", bundle))
    session = f"test-{uuid.uuid4().hex[:8]}"
    setup = WorkerSetup(engine=engine, session=session, python="/opt/venv/bin/python3",
                        device="cpu", timing=TIMED)
    limits = Limits(wall_s=120.0)
    try:
        batch = Batch(image=image.tag, kernel_file=KERNEL, cases=cases,
                      ref_limits=Limits(wall_s=120.0, memory_bytes=4 << 30),
                      entry_limits=limits, problem=bundle.problem)
        with run_pair(setup, batch) as pair:
            assert pair.entry is not None
            ref, entry = pair.reference, pair.entry
            # The reference wrote its cases, was held while the entry ran, then timed.
            assert (pair.ref_dir / CASES_FILE).is_file()
            assert ref.exit.exit_code == 0 and entry.exit.exit_code == 0, entry.exit.logs
            assert ref.exit.held_s > 0
            assert ref.out.result is not None and entry.out.result is not None
            shape = cases[0].shape.id
            assert set(ref.out.result.timings) == {shape}
            assert set(entry.out.result.timings) == {shape}
            # The entry's correctness case ran on inputs it drew from the case's seed with
            # the recipe placed in its own input tmpfs (jobs.deliver): no input was written
            # by the reference, none copied, nothing of the reference's folder linked.
            assert entry.out.result.cases[cases[0].id].ok
            assert (pair.ref_dir / RECIPE_FILE).is_file()
            assert not [p for p in pair.ref_dir.iterdir() if p.suffix == ".in"]
            assert not (pair.ref_dir / ".entry-in").exists()
            # Held time is neither container's own: walls leave it out.
            assert entry.exit.wall_s >= 0 and ref.exit.wall_s >= 0
    finally:
        engine.reap(session)
    left = engine.client.containers.list(all=True, filters={"label": f"grader.session={session}"})
    assert left == []



def test_entry_whose_outputs_outgrow_the_counted_cap_runs_again_after(engine, runtime  # type: ignore[no-untyped-def]
                                                                      ) -> None:
    """Caps from the problem's count, too small for the outputs the reference then writes
    (as reshape_and_cache's were): the entry is stopped before its job and graded once the
    reference has exited, under caps sized from those outputs."""
    cases, bundle = _cases()
    image = ensure(engine, problem_plan(runtime.tag, "demo", bundle))
    session = f"test-{uuid.uuid4().hex[:8]}"
    setup = WorkerSetup(engine=engine, session=session, python="/opt/venv/bin/python3",
                        device="cpu", timing=TIMED)
    small = Limits(wall_s=120.0, output_bytes=8 << 10)  # below one case's 16 KiB of outputs
    try:
        batch = Batch(image=image.tag, kernel_file=KERNEL, cases=cases,
                      ref_limits=Limits(wall_s=120.0, memory_bytes=4 << 30),
                      entry_limits=small, problem=bundle.problem)
        with run_pair(setup, batch) as pair:
            assert pair.entry is not None
            assert pair.entry_limits.output_bytes > (pair.ref_dir / f"{cases[0].id}.ref"
                                                     ).stat().st_size
            assert pair.entry_limits.memory_bytes > small.memory_bytes
            assert pair.entry.exit.exit_code == 0, pair.entry.exit.logs
            assert pair.entry.out.result is not None
            assert pair.entry.out.result.cases[cases[0].id].ok
            assert pair.reference.out.result is not None
            # The reference was released by the first entry's stop, not held to the second's.
            assert set(pair.reference.out.result.timings) == {cases[0].shape.id}
    finally:
        engine.reap(session)
    assert engine.client.containers.list(all=True,
                                         filters={"label": f"grader.session={session}"}) == []
