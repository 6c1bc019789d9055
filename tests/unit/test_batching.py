"""batching.py: shapes packed into container runs by their inputs' size, and the caps and
memory each run gets, against the real llm-inference suite and files of known sizes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grader.harness.protocol import CASES_FILE, RESULT_FILE
from grader.model.runs import Case
from grader.paths import PROBLEM_BUNDLES
from grader.run import plan as batching
from grader.sandbox.spec import Limits
from grader.suite.load import load_suite

LLM = load_suite(PROBLEM_BUNDLES / "llm-inference")
GIB = 1 << 30


def _problem(pid: str):  # type: ignore[no-untyped-def]
    return LLM.problems[pid].problem


def test_shape_bytes_is_the_problems_own_count() -> None:
    p = _problem("rms_norm")
    shape = next(s for s in p.shapes if s.id == "llama3_1_8b_prefill")
    # bytes = "2*(2*tokens*hidden + hidden)" at tokens = hidden = 4096
    assert batching.shape_bytes(p, shape) == 2 * (2 * 4096 * 4096 + 4096)


def test_every_shape_in_order_exactly_once_within_budget() -> None:
    p = _problem("softmax")  # no output count: its traffic count holds its outputs
    per_shape = {s.id: 5 for s in p.shapes}
    budget = 2 * GIB
    parts = batching.batches(p, list(p.shapes), per_shape, budget)
    assert [s.id for part in parts for s in part] == [s.id for s in p.shapes]
    assert len(parts) > 1
    for part in parts:
        total = sum(batching.shape_bytes(p, s) * 5 for s in part)
        assert len(part) == 1 or total <= budget


def test_batches_are_sized_by_their_outputs_not_by_inputs_drawn_where_used() -> None:
    """fused_moe's traffic is its experts' weights (tens of GiB over its cases), which each
    container draws for itself one case at a time: what its batches hold as files is its
    outputs, a few MiB. So it is one batch, where its traffic would have made four."""
    p = _problem("fused_moe")
    per_shape = {s.id: 2 for s in p.shapes}
    weights = sum(batching.shape_bytes(p, s) * 2 for s in p.shapes)
    assert weights > 16 * GIB
    assert batching.batches(p, list(p.shapes), per_shape, 8 * GIB) == [list(p.shapes)]
    for s in p.shapes:
        assert batching.shape_file_bytes(p, s) == 2 * s.params["T"] * s.params["H"]
    # Where a problem counts no outputs apart, its traffic stands for them.
    gemm = _problem("gemm_bf16")
    assert all(batching.shape_file_bytes(gemm, s) == batching.shape_bytes(gemm, s)
               for s in gemm.shapes)


def test_small_problems_stay_one_run() -> None:
    p = _problem("rms_norm")
    per_shape = {s.id: 5 for s in p.shapes}
    assert len(batching.batches(p, list(p.shapes), per_shape, 8 * GIB)) == 1


def test_a_shape_over_the_budget_is_a_batch_of_its_own() -> None:
    p = _problem("gemm_bf16")
    per_shape = {s.id: 5 for s in p.shapes}
    parts = batching.batches(p, list(p.shapes), per_shape, 1)
    assert [len(part) for part in parts] == [1] * len(p.shapes)


def test_reference_cap_doubles_the_count_and_never_shrinks() -> None:
    p = _problem("gemm_bf16")
    base = Limits(output_bytes=4 * GIB, memory_bytes=64 * GIB)
    big = [s for s in p.shapes if batching.shape_bytes(p, s) > 400 << 20]
    assert big
    lim = batching.reference_limits(base, p, big[:1], {big[0].id: 5})
    counted = batching.shape_bytes(p, big[0]) * 5
    assert lim.output_bytes == 2 * counted + batching.REFERENCE_SLACK
    assert lim.memory_bytes == 64 * GIB + lim.output_bytes  # tmpfs pages are charged
    smoke = [s for s in p.shapes if s.smoke]
    small = batching.reference_limits(base, p, smoke, {s.id: 5 for s in smoke})
    assert (small.output_bytes, small.memory_bytes) == (4 * GIB, 68 * GIB)
    # Half the host's free memory when that is more: inputs read in part are not counted.
    roomy = batching.reference_limits(base, p, smoke, {s.id: 5 for s in smoke}, 100 * GIB)
    assert roomy.output_bytes == 50 * GIB


@pytest.mark.parametrize("name", [RESULT_FILE, CASES_FILE])
def test_entry_cap_is_what_the_reference_wrote(tmp_path: Path, name: str) -> None:
    """The outputs' cap from the expected outputs' files; the memory from the largest case's
    inputs as the reference's case records say (its result, or while it times, its cases)."""
    (tmp_path / "a.0.ref").write_bytes(b"x" * (300 << 20))
    (tmp_path / "a.t0.ref").write_bytes(b"x" * (300 << 20))
    (tmp_path / "other.0.ref").write_bytes(b"x" * (1 << 20))  # not this batch's
    (tmp_path / name).write_text(json.dumps({"cases": {
        "a.0": {"ok": True, "input_bytes": 10 << 20},
        "a.t0": {"ok": True, "input_bytes": 50 << 20},
        "other.0": {"ok": True, "input_bytes": 900 << 20}}}))  # not this batch's
    base = Limits(output_bytes=256 << 20, memory_bytes=4 * GIB)
    lim = batching.entry_limits(base, tmp_path, _cases("a.0", "a.t0", "missing.0"))
    assert lim.output_bytes == (600 << 20) + batching.ENTRY_SLACK + 3 * batching.PER_CASE_SLACK
    assert lim.memory_bytes == 4 * GIB + lim.output_bytes + 2 * (50 << 20)
    # A checked timed call the reference has not computed yet (model/timed.py) counts its
    # samples' room.
    lim = batching.entry_limits(base, tmp_path, _cases("a.0", "a.t0", "a.t9"))
    assert lim.output_bytes == ((600 << 20) + batching.TIMED_CASE_SLACK + batching.ENTRY_SLACK
                                + 3 * batching.PER_CASE_SLACK)
    # Small outputs keep the configured cap: a flood still stops there.
    assert batching.entry_limits(base, tmp_path, _cases("missing.0")).output_bytes == 256 << 20


def _cases(*ids: str) -> list[Case]:
    """Cases of these ids (".t" in a checked timed call's) on some shape."""
    shape = next(iter(LLM.problems.values())).problem.shapes[0]
    return [Case(id=cid, shape=shape, seed=0, timing=".t" in cid) for cid in ids]


def test_entry_memory_without_case_records_is_the_outputs_alone(tmp_path: Path) -> None:
    (tmp_path / "a.0.ref").write_bytes(b"x" * (300 << 20))
    base = Limits(output_bytes=256 << 20, memory_bytes=4 * GIB)
    lim = batching.entry_limits(base, tmp_path, _cases("a.0"))
    assert lim.memory_bytes == 4 * GIB + lim.output_bytes


def test_no_count_means_zero_and_the_sequential_path() -> None:
    """A problem without a byte count (imported ones may lack it) counts 0: its batches go one
    container after the other (grade_batch), with caps from what the reference wrote."""
    demo = load_suite(PROBLEM_BUNDLES / "demo").problems["vector_add"].problem
    shape = next(s for s in demo.shapes if s.smoke)
    assert batching.counted_bytes(demo, [shape], {shape.id: 2}) > 0
    bare = demo.model_copy(update={"bytes": None})
    assert batching.shape_bytes(bare, shape) == 0
    assert batching.counted_bytes(bare, [shape], {shape.id: 2}) == 0


def _returned_bytes(sp, shape) -> int:  # type: ignore[no-untyped-def]
    """What one call of the real reference returns for `shape`: computed on the CPU for a smoke
    shape, sized on `meta` for the others (-1 where the reference needs real values)."""
    from grader.scoring.derive import derive

    try:
        return derive(sp.directory, shape.id, device="cpu" if shape.smoke else "meta").bytes_written
    except Exception:  # a data-dependent reference (routing, lengths) does not run on meta
        assert not shape.smoke, f"{sp.id}/{shape.id}: the reference fails on the CPU"
        return -1


@pytest.mark.parametrize("pid", ["reshape_and_cache", "rms_norm", "moe_align_sort",
                                 "top_k_top_p_filter", "silu_and_mul"])
def test_the_counted_entry_cap_holds_what_the_reference_returns(pid: str) -> None:
    """Before the reference has run, the entry's output cap comes from the problem's count. A
    problem whose outputs outgrow its traffic count (reshape_and_cache returns both caches
    whole and counts the slots written) says so with `output_bytes`; without it the honest
    entry overflowed the cap and ran a second time (docs/benchmarks.md)."""
    sp = LLM.problems[pid]
    base = Limits(output_bytes=0, memory_bytes=0)
    sized = 0
    for shape in sp.problem.shapes:
        returned = _returned_bytes(sp, shape)
        if returned < 0:
            continue
        sized += 1
        cap = batching.entry_limits_from_count(base, sp.problem, [shape], {shape.id: 3})
        assert cap.output_bytes >= 3 * returned + batching.ENTRY_SLACK, shape.id
    assert sized >= 2


def test_output_bytes_counts_returned_buffers_not_traffic() -> None:
    p = _problem("reshape_and_cache")
    shape = next(s for s in p.shapes if s.id == "llama3_1_70b_decode")
    # two bf16 caches of num_blocks * block_size * kv_heads * head_dim = 8192 * 16 * 8 * 128
    assert batching.shape_output_bytes(p, shape) == 2 * 2 * 8192 * 16 * 8 * 128
    assert batching.shape_bytes(p, shape) < batching.shape_output_bytes(p, shape) // 100
    assert batching.shape_output_bytes(_problem("rms_norm"), shape) == 0


def test_a_shapes_own_output_count_comes_first() -> None:
    """An imported shape's `output_bytes` (its reference's outputs, counted on `meta`) takes
    the place of the problem's expression and of its traffic: imported problems whose traffic
    is mostly inputs batch by what they return."""
    p = _problem("fused_moe")
    shape = p.shapes[0].model_copy(update={"output_bytes": 1234.0})
    assert batching.shape_output_bytes(p, shape) == batching.shape_file_bytes(p, shape) == 1234
    softmax = _problem("softmax")  # no expression: the shape's count still stands
    big = [s.model_copy(update={"output_bytes": 1.0}) for s in softmax.shapes]
    assert batching.batches(softmax, big, {s.id: 5 for s in big}, 1 << 20) == [big]
    assert len(batching.batches(softmax, list(softmax.shapes), {s.id: 5 for s in big},
                                1 << 20)) == len(big)
