"""Fresh inputs for every timed call and checked timed outputs (issue 31), without a GPU: the
host's plan (model/timed.py), the samples both containers take (harness/fresh.py), the harness's
timed loop driven by a stand-in clock on the real demo recipe, and the judge of the checked
calls. The GPU path is tests/gpu/test_hostile_gpu.py's replay cases."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from grader.formats.problem import Problem, Shape
from grader.harness import tensors
from grader.harness.fresh import SAMPLE, load_recipe, make, sample, timed_loop
from grader.harness.protocol import GO_FILE
from grader.harness.timing import time_kernel
from grader.judge.problem import judge_problem
from grader.model import timed
from grader.model.evidence import CaseRecord, OutDir, ResultFile, TimingRecord
from grader.model.runs import Case, Evidence, computed, computed_first, reached_uncomputed
from grader.paths import REPO
from grader.run.jobs import TimingKnobs, timed_plans
from grader.verdicts import Verdict
from tests.unit.test_judge import READY, NoDetection, _exit

VECTOR_ADD = REPO / "problem_bundles" / "demo" / "vector_add"
KNOBS = TimingKnobs(min_samples=4, max_samples=40)


def _checked(n: int, base: int = 1000) -> list[tuple[str, int]]:
    return [(f"s.t{k}", base + k) for k in range(n)]


def _plan(key: bytes = b"entry-a", knobs: TimingKnobs = KNOBS) -> timed.TimedPlan:
    return timed.plan(_checked(knobs.checked_per_shape), key, min_samples=knobs.min_samples,
                      max_samples=knobs.max_samples)


def test_no_timed_call_repeats_a_seed_and_the_checks_are_spread() -> None:
    plan = _plan()
    seeds = [seed for seed, _cid in plan.calls] + [plan.last[0], plan.warm]
    assert len(seeds) == len(set(seeds)) == KNOBS.max_samples + 2
    checked_at = [i for i, (_seed, cid) in enumerate(plan.calls) if cid is not None]
    # CHECKS_FIRST of the first min_samples, then one in every CHECK_EVERY.
    assert sum(1 for i in checked_at if i < KNOBS.min_samples) == timed.CHECKS_FIRST
    for start in range(KNOBS.min_samples, KNOBS.max_samples, timed.CHECK_EVERY):
        assert sum(1 for i in checked_at if start <= i < start + timed.CHECK_EVERY) == 1
    assert plan.last[1] not in {cid for _s, cid in plan.calls}
    # Every seed fits a 31-bit recipe seed (numpy, torch and random all take it).
    assert all(0 <= s < 2**31 for s in seeds)


def test_each_entry_gets_its_own_order_of_the_same_pool() -> None:
    a, b = _plan(b"entry-a"), _plan(b"entry-b")
    assert a.calls != b.calls
    assert sorted(a.calls, key=str) == sorted(b.calls, key=str)  # one pool: references once
    assert a.warm == b.warm and a.last == b.last


def test_the_checked_calls_of_a_loop_are_those_it_reached_and_the_last() -> None:
    plan = _plan()
    reached = plan.checked(6)
    assert reached[-1] == plan.last[1]
    assert reached[:-1] == [cid for _s, cid in plan.calls[:5] if cid is not None]
    assert plan.checked(0) == []
    # A loop of min_samples calls checks CHECKS_FIRST of them (those fall in its first
    # min_samples - 1 calls or are the one the closing call replaces) and its last.
    assert len(plan.checked(KNOBS.min_samples + 1)) == timed.CHECKS_FIRST + 1


def test_every_entry_reaches_the_checked_cases_in_one_order() -> None:
    """The k-th checked call of every entry's loop is the shape's k-th checked case, so a
    loop of n calls reaches a prefix of them and the last; with the production knobs a loop
    of up to 58 calls (120 of 125 shapes on the H200) reaches none but the eager ones that
    the reference computes before any entry runs (model/timed.py), and one of max_samples
    reaches the rest."""
    knobs = TimingKnobs()
    checked = _checked(knobs.checked_per_shape)
    eager = {cid for cid, _seed in timed.eager(checked)}
    assert len(checked) == 36 and len(eager) == timed.CHECKS_FIRST + timed.EAGER_BLOCKS + 1
    reach = knobs.min_samples + timed.EAGER_BLOCKS * timed.CHECK_EVERY
    for key in (b"entry-a", b"entry-b", b"entry-c", b"entry-d"):
        plan = _plan(key, knobs)
        assert [cid for _s, cid in plan.calls if cid is not None] == [c for c, _ in checked[:-1]]
        for n in range(1, reach + 1):
            assert set(plan.checked(n)) <= eager, (key, n)
        # (all but the last block's, where that one fell on the call the closing call takes)
        assert len(set(plan.checked(knobs.max_samples))) >= len(checked) - 1
    # A short plan's checked cases are all eager.
    assert timed.eager(_checked(KNOBS.checked_per_shape)) == _checked(KNOBS.checked_per_shape)


def test_the_reference_computes_the_correctness_and_eager_checked_cases_first() -> None:
    knobs = TimingKnobs(min_samples=4, max_samples=100)
    cases = [Case(id="s.0", shape=SHAPE, seed=1),
             *[Case(id=f"s.t{k}", shape=SHAPE, seed=1000 + k, timing=True)
               for k in range(knobs.checked_per_shape)]]
    ids = [c.id for c in computed_first(cases)]
    assert ids == ["s.0", *[f"s.t{k}" for k in range(7)], f"s.t{knobs.checked_per_shape - 1}"]
    assert computed_first(cases[:1]) == cases[:1]


def test_a_plan_needs_the_checked_cases_it_counts() -> None:
    with pytest.raises(ValueError, match="checked cases"):
        timed.plan(_checked(3), b"k", min_samples=4, max_samples=40)


def test_samples_are_the_same_on_both_sides_and_whole_for_small_outputs() -> None:
    big, small = torch.randn(3, SAMPLE), torch.randn(17)
    a = sample((big, small), 7)
    assert [t.tolist() for t in a] == [t.tolist() for t in sample((big.clone(), small), 7)]
    assert a[0].tolist() == [3, SAMPLE] and a[1].dtype == big.dtype and a[1].numel() == SAMPLE
    assert torch.equal(a[3], small)  # whole
    assert not torch.equal(sample((big,), 8)[1], a[1])  # another call, other positions
    with pytest.raises(TypeError, match=r"plain torch\.Tensor"):
        sample((big.numpy(),), 7)  # type: ignore[arg-type]


class _Clock:
    """Times nothing: calls as the GPU's Clock does (no copy of inputs made for the call)."""

    flush_bytes = 0

    def __init__(self) -> None:
        self.inputs: list[list[float]] = []

    def internal(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def call(self, fn: Any, values: tuple[Any, ...], label: str, *, copy: bool = True
             ) -> tuple[Any, float, float]:
        assert not copy  # drawn for this call alone
        self.inputs.append(values[0][:4].tolist())
        return fn(*values), 10.0, 11.0


def test_the_timed_loop_draws_every_call_afresh_and_samples_every_output() -> None:
    recipe = load_recipe(VECTOR_ADD / "reference.py")
    plan = _plan()
    spec = {**plan.as_job(), "params": {"n": 5000}}
    knobs = {"rse_target": 0.01, "budget_s": 60.0, "min_samples": 4, "max_samples": 40}
    kept: list[tuple[int, str | None, list[Any]]] = []
    clock = _Clock()
    raw, labels = timed_loop(clock, recipe.reference, recipe, "cpu", spec, knobs, "time:s",
                             lambda seed, cid, out: kept.append((seed, cid, sample((out,), seed))))
    # Constant samples: the loop stops at min_samples, then makes its closing call.
    assert len(raw["device_us"]) == len(labels) == len(kept) == 5
    assert len({str(x) for x in clock.inputs}) == 5  # never the same values twice
    assert [k[0] for k in kept] == [s for s, _c in plan.calls[:4]] + [plan.last[0]]
    assert kept[-1][1] == plan.last[1]
    # What the reference computes for a checked seed is what the entry's call sampled.
    seed, _cid, got = kept[-1]
    expected = sample((recipe.reference(*make(recipe, seed, "cpu", {"n": 5000})),), seed)
    assert all(torch.equal(g, e) for g, e in zip(got, expected, strict=True))


PROBLEM = Problem(id="add", operator="add", dtypes=["float32"], flops="n", bytes="12*n",
                  shapes=[Shape(id="s", params={"n": 5000}, phase="decode")])
SHAPE = PROBLEM.shapes[0]


def _graded(tmp: Path, compute: Any, *, samples: int = 6, drop: str | None = None,
            knobs: TimingKnobs = KNOBS, topup: bool | None = None,
            wrong: str | None = None) -> Any:
    """Judge one shape whose timed loop ran `samples` calls by its plan, each computed by
    `compute(x, y)`; `drop`: a checked case whose output file the entry left out; `wrong`:
    one it computed wrong. `topup`: None, the reference computed every checked case; else
    only those it computes first (model.runs.computed_first), and with True the rest in a
    top-up run (as grading.worker runs the ones a loop reached). Returns the result, the
    plan and the cases the loop reached beyond the reference's first run."""
    recipe = load_recipe(VECTOR_ADD / "reference.py")
    kernel = tmp / "kernel.py"
    kernel.write_text("def kernel(x, y):\n    return x + y\n")
    checked = [Case(id=f"s.t{k}", shape=SHAPE, seed=1000 + k, timing=True)
               for k in range(knobs.checked_per_shape)]
    cases = [Case(id="s.0", shape=SHAPE, seed=1), *checked]
    plan = timed_plans(knobs, cases, kernel)["s"]
    first = {c.id for c in (cases if topup is None else computed_first(cases))}
    ref = OutDir(result=ResultFile(cases={c.id: CaseRecord(ok=True) for c in cases
                                          if c.id in first}))
    later = OutDir(result=ResultFile(cases={c.id: CaseRecord(ok=True) for c in cases
                                            if c.id not in first}))
    ent = OutDir(ready=READY)
    x, y = make(recipe, 1, "cpu", {"n": 5000})
    for name, value in (("s.0.ref", [x + y]), ("s.0.out", [x + y])):
        tensors.save(tmp / name, value)
    ref.tensor_files[("s.0", "ref")] = tmp / "s.0.ref"
    ent.tensor_files[("s.0", "out")] = tmp / "s.0.out"
    for c in checked:
        inputs = make(recipe, c.seed, "cpu", {"n": 5000})
        tensors.save(tmp / f"{c.id}.ref", sample((inputs[0] + inputs[1],), c.seed))
        (ref if c.id in first else later).tensor_files[(c.id, "ref")] = tmp / f"{c.id}.ref"
    for seed, cid in [*plan.calls[:samples - 1], plan.last]:
        if cid is not None and cid != drop:
            fn = torch.sub if cid == wrong else compute
            tensors.save(tmp / f"{cid}.out",
                         sample((fn(*make(recipe, seed, "cpu", {"n": 5000})),), seed))
            ent.tensor_files[(cid, "out")] = tmp / f"{cid}.out"
    ent.result = ResultFile(cases={"s.0": CaseRecord(ok=True)}, timings={"s": TimingRecord(
        ok=True, device_us=[10.0] * samples, method="cuda-events")})
    reference, entry = Evidence(exit=_exit(), out=ref), Evidence(exit=_exit(), out=ent)
    res = judge_problem(problem=PROBLEM, shapes=[SHAPE], cases=cases, reference=reference,
                        entry=entry, static=[], own_kernels=set(), tracer=NoDetection(),
                        max_output_bytes=1 << 20, plans={"s": plan},
                        topup=Evidence(exit=_exit(), out=later) if topup else None)[0]
    return res, plan, reached_uncomputed(cases, {"s": plan}, entry, computed(ref.result))


def test_checked_timed_calls_that_match_pass(tmp_path: Path) -> None:
    res, _plan, _ = _graded(tmp_path, torch.add)
    assert res.verdict == Verdict.PASSED and res.timing is not None
    assert res.timing.mean_us == res.timing.trimmed_mean_us == 10.0


def test_a_wrong_checked_timed_call_is_incorrect(tmp_path: Path) -> None:
    # Right on every correctness case, wrong on timed calls: as a replay of a kept output.
    res, _plan, _ = _graded(tmp_path, torch.sub)
    assert res.verdict == Verdict.INCORRECT
    assert "timed call's output is wrong or missing" in res.detail


def test_a_checked_timed_call_left_out_is_incorrect(tmp_path: Path) -> None:
    last = f"s.t{KNOBS.checked_per_shape - 1}"  # the plan's closing call is its last case's
    res, plan, _ = _graded(tmp_path, torch.add, drop=last)
    assert plan.last[1] == last
    assert res.verdict == Verdict.INCORRECT and "the last timed call" in res.detail


def test_a_check_the_loop_never_reached_is_not_asked_for(tmp_path: Path) -> None:
    res, plan, _ = _graded(tmp_path, torch.add, samples=3)
    assert len(plan.checked(3)) < len(plan.checked(KNOBS.max_samples))
    assert res.verdict == Verdict.PASSED


LONG = TimingKnobs(min_samples=4, max_samples=100)  # 11 checked cases, 8 computed first


def test_a_loop_that_stays_within_the_first_run_needs_no_top_up(tmp_path: Path) -> None:
    res, _plan, todo = _graded(tmp_path, torch.add, samples=20, knobs=LONG, topup=False)
    assert todo == [] and res.verdict == Verdict.PASSED


def test_a_round_keeps_every_checked_case_of_a_shape_a_long_loop_ran_on(
        tmp_path: Path) -> None:
    """`rest`: where a loop reached a checked case the reference had not computed, every
    other one of its shape too (what a later entry's loop on that shape may reach); none for
    a loop that stayed within what was computed."""
    checked = [Case(id=f"s.t{k}", shape=SHAPE, seed=1000 + k, timing=True)
               for k in range(LONG.checked_per_shape)]
    cases = [Case(id="s.0", shape=SHAPE, seed=1), *checked]
    (tmp_path / "k.py").write_text("def kernel(x, y):\n    return x + y\n")
    plans = timed_plans(LONG, cases, tmp_path / "k.py")
    first = {c.id for c in computed_first(cases)}
    at = next(i for i, (_s, cid) in enumerate(plans["s"].calls) if cid == "s.t7")

    def loop(n: int) -> Evidence:
        return Evidence(exit=_exit(), out=OutDir(result=ResultFile(cases={}, timings={
            "s": TimingRecord(ok=True, device_us=[10.0] * n, method="cuda-events")})))

    assert [c.id for c in reached_uncomputed(cases, plans, loop(at + 2), first)] == ["s.t7"]
    assert [c.id for c in reached_uncomputed(cases, plans, loop(at + 2), first, rest=True)
            ] == ["s.t7", "s.t8", "s.t9"]  # s.t10, the last, is computed first
    assert reached_uncomputed(cases, plans, loop(at), first, rest=True) == []
    assert reached_uncomputed(cases, plans, loop(at + 2), {c.id for c in cases}, rest=True) == []


def test_a_long_loop_is_checked_on_the_top_up_runs_samples(tmp_path: Path) -> None:
    """A loop that ran past what the reference computed first: the checked cases it reached
    beyond are those the worker's top-up computes, and the judge compares them there."""
    res, _plan, todo = _graded(tmp_path, torch.add, samples=LONG.max_samples, knobs=LONG,
                              topup=True)
    assert [c.id for c in todo] == [f"s.t{k}" for k in range(7, LONG.checked_per_shape - 1)]
    assert res.verdict == Verdict.PASSED
    # An entry right wherever the first run checks it and wrong on one later checked call.
    res, _plan, _ = _graded(tmp_path, torch.add, samples=LONG.max_samples, knobs=LONG,
                            topup=True, wrong="s.t9")
    assert res.verdict == Verdict.INCORRECT and "s.t9" in res.detail
    # Without the top-up's run the expected samples are missing: the grader's failure.
    res, _plan, _ = _graded(tmp_path, torch.add, samples=LONG.max_samples, knobs=LONG,
                            topup=False)
    assert res.verdict == Verdict.INFRA_ERROR and "reference" in res.detail


def test_kernels_launched_through_foreign_triton_code_are_never_the_entrys() -> None:
    from grader.judge.problem import _foreign
    from grader.model.evidence import TraceRecord

    out = OutDir(ready=READY, result=ResultFile(
        cases={"s.0": CaseRecord(ok=True, trace=TraceRecord(foreign_triton={"add_kernel": 2}))},
        outside=TraceRecord(foreign_triton={"triton_poi_fused_0": 1})))
    assert _foreign(Evidence(exit=_exit(), out=out)) == {"add_kernel", "triton_poi_fused_0"}


def test_the_loop_stops_on_its_median_not_on_host_stalls() -> None:
    """A 3.9 µs kernel whose samples hold a few host stalls (on the H200, 2026-12-04: IQR
    0.1 µs, mean 65 µs) stops at min_samples: its median is known to well under 1%. A
    spread that does leave the median uncertain (two clock states, half the calls each)
    samples on to the cap."""
    def loop(times: list[float]) -> int:
        it = iter(times)

        class Fixed(_Clock):
            def call(self, fn: Any, values: tuple[Any, ...], label: str, *,
                     copy: bool = True) -> tuple[Any, float, float]:
                return None, next(it), 0.0

        raw, _labels = time_kernel(Fixed(), lambda i: (lambda: None, (), False), "t",
                                   rse_target=0.01, min_samples=10, max_samples=200,
                                   budget_s=60.0)
        return len(raw["device_us"])

    stalls = [900.0 if i % 7 == 3 else 3.9 + 0.05 * (i % 3) for i in range(300)]
    assert loop(stalls) == 10
    two_states = [3.9 if i % 2 else 7.8 for i in range(300)]
    assert loop(two_states) == 200


def test_a_held_reference_computes_the_checked_calls_its_go_brings(tmp_path: Path) -> None:
    """The real reference harness, held after its cases (run.pair): the GO that releases its
    timed loop lists the checked timed calls an entry's long loop reached; it computes their
    samples first, as it computes the job's."""
    from tests.unit.test_module_interface import _harness

    for side in ("reference-in", "reference-out"):
        (tmp_path / side).mkdir()
    job = {"device": "cpu", "hold": True,
           "cases": [{"id": "s.0", "params": {"n": 5000}, "seed": 1}]}
    (tmp_path / "reference-in" / "job.json").write_text(json.dumps(job))
    (tmp_path / "reference-in" / GO_FILE).write_text(json.dumps({"cases": [
        {"id": "s.t9", "params": {"n": 5000}, "seed": 1009, "sampled": True}]}))
    res = _harness(tmp_path, "reference", VECTOR_ADD, tmp_path / "none.py")
    assert res.returncode == 0, res.stderr[-3000:]
    out = tmp_path / "reference-out"
    result = json.loads((out / "result.json").read_text())
    assert result["cases"]["s.0"]["ok"] and result["cases"]["s.t9"]["ok"]
    x, y = make(load_recipe(VECTOR_ADD / "reference.py"), 1009, "cpu", {"n": 5000})
    got, want = tensors.load(out / "s.t9.ref"), sample((x + y,), 1009)
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
