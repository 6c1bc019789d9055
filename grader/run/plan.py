"""How one problem's cases are split into container runs, and the limits each run gets.

Each container draws a case's inputs from its seed where it runs it (issue 32); outputs cross
as files: the reference writes its expected outputs into a capped host tmpfs and the entry
writes its outputs into a capped tmpfs of its own, while each holds a batch's inputs in
memory. At production shapes a problem's inputs reach tens of GiB (llm-inference's
fused_moe: about 55 GiB over its cases, DeepSeek-V3's expert weights; on the H200,
2026-12-01, gemm_bf16's reference filled its fixed 4 GiB cap and attention_prefill's honest
outputs filled the entry's fixed 256 MiB one). So:
- a problem is graded in batches of shapes whose inputs fit a budget (a shape larger than the
  budget is a batch of its own), each batch a reference run and an entry run;
- the reference's output cap is sized from the problem's own byte count (its `bytes`
  expression: what one call reads and writes) and from the host's free memory, with room to
  spare: the reference is trusted;
- the entry's output cap is what the reference actually wrote as outputs for the same cases,
  plus a little for its JSON (or, side by side with the reference, before it has written
  anything: the counted bytes of inputs and outputs): an honest entry fits, a flood still
  stops at the cap;
- the memory limits grow by what the caps can hold (tmpfs pages are charged to the writer's
  memory cgroup) and, for the entry, by twice its largest input (on the CPU a loaded input is a
  copy of its file; a load to a GPU goes through a 64 MiB host buffer: room to spare there).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

from grader.errors import ProblemError
from grader.formats.expr import evaluate, work
from grader.formats.problem import Problem, Shape
from grader.harness.protocol import CASES_FILE, EXPECTED, RESULT_FILE, case_file
from grader.model.evidence import read_result
from grader.model.runs import Case
from grader.sandbox.spec import Limits

MIB = 1 << 20
REFERENCE_SLACK = 64 * MIB  # JSON, headers, module problems' state
ENTRY_SLACK = 16 * MIB  # ready.json and result.json (capped at 4 MiB each by evidence.py)
PER_CASE_SLACK = 64 << 10  # a tensor file's header and alignment
# A checked timed call's file: its outputs' samples (harness/fresh.py: SAMPLE elements and the
# shape of each output), headers included.
TIMED_CASE_SLACK = 256 << 10


def shape_bytes(problem: Problem, shape: Shape) -> int:
    """Bytes one call of `shape` reads and writes, by the problem's own count (0 when it has
    none: imported problems may lack expressions, and then only the fixed caps apply)."""
    try:
        return max(int(work(problem, shape)[1]), 0)
    except (ProblemError, ValueError, OverflowError):
        return 0


def shape_output_bytes(problem: Problem, shape: Shape) -> int:
    """Bytes one call of `shape` returns, where the shape (an importer's count) or the problem
    (`output_bytes`) counts them apart from its traffic; else 0, and its traffic count stands
    for them."""
    if shape.output_bytes is not None:
        return int(shape.output_bytes)
    if problem.output_bytes is None:
        return 0
    try:
        return max(int(evaluate(problem.output_bytes, shape.params)), 0)
    except (ProblemError, ValueError, OverflowError):
        return 0


def shape_file_bytes(problem: Problem, shape: Shape) -> int:
    """Bytes one case of `shape` leaves as files for the host: its outputs, by `output_bytes`
    where the problem counts them apart, else by its traffic count, which holds them. Its
    inputs are drawn where they are used, one case at a time (issue 32): they travel nowhere
    and add up nowhere."""
    return shape_output_bytes(problem, shape) or shape_bytes(problem, shape)


def batches(problem: Problem, shapes: list[Shape], cases_per_shape: dict[str, int],
            budget_bytes: int) -> list[list[Shape]]:
    """Consecutive shapes, packed in order while their cases' files (shape_file_bytes) fit
    `budget_bytes`: each side's folder holds a batch's outputs until it is judged."""
    out: list[list[Shape]] = []
    used = 0
    for shape in shapes:
        size = shape_file_bytes(problem, shape) * cases_per_shape.get(shape.id, 0)
        if out and used + size <= budget_bytes:
            out[-1].append(shape)
            used += size
        else:
            out.append([shape])
            used = size
    return out


def reference_limits(base: Limits, problem: Problem, shapes: list[Shape],
                     cases_per_shape: dict[str, int], host_available: int = 0) -> Limits:
    """The reference's limits for a batch: twice the counted bytes, the configured cap, or
    half the host memory available now (`host_available`), whichever is largest. The count
    undercounts inputs a call reads only in part: embedding's table, of which a call reads a
    few rows (1-2 GB a case; on the H200, 2026-12-01, a count-sized cap failed every case), or
    a paged cache's unused slots. The reference is trusted: the cap only guards the host."""
    counted = _summed(problem, shapes, cases_per_shape)
    output = max(base.output_bytes, 2 * counted + REFERENCE_SLACK, host_available // 2)
    return replace(base, output_bytes=output, memory_bytes=base.memory_bytes + output)


def _summed(problem: Problem, shapes: list[Shape], cases_per_shape: dict[str, int],
            per_call: Callable[[Problem, Shape], int] = shape_bytes) -> int:
    """`per_call` (a shape's count: its traffic by default) over the batch's cases."""
    return sum(per_call(problem, s) * cases_per_shape.get(s.id, 0) for s in shapes)


def counted_bytes(problem: Problem, shapes: list[Shape], cases_per_shape: dict[str, int]) -> int:
    """What a batch's cases read and write, by the problem's count (0 unless every shape has
    one)."""
    if not all(shape_bytes(problem, s) for s in shapes):
        return 0
    return _summed(problem, shapes, cases_per_shape)


def entry_limits_from_count(base: Limits, problem: Problem, shapes: list[Shape],
                            cases_per_shape: dict[str, int], timed: int = 0) -> Limits:
    """The entry's limits for a batch before the reference has run (run.pair.run_pair):
    from the problem's count of bytes, inputs and outputs together, so that an honest entry
    fits; a little looser than entry_limits, still bounded by the problem's own size.
    `cases_per_shape`: the correctness cases; `timed`: the batch's checked timed calls."""
    counted = (counted_bytes(problem, shapes, cases_per_shape)
               + _summed(problem, shapes, cases_per_shape, shape_output_bytes))
    largest = max((shape_bytes(problem, s) for s in shapes), default=0)
    output = max(base.output_bytes,
                 counted + ENTRY_SLACK + TIMED_CASE_SLACK * timed
                 + PER_CASE_SLACK * sum(cases_per_shape.get(s.id, 0) for s in shapes))
    return replace(base, output_bytes=output, memory_bytes=base.memory_bytes + output + 2 * largest)


def entry_limits(base: Limits, ref_dir: Path, cases: list[Case],
                 missing: Mapping[str, int] | None = None) -> Limits:
    """The entry's limits for a batch, from what the reference wrote for its cases: the
    expected outputs' files (a checked timed call's samples where it has none yet; `missing`:
    the bytes of those a round's light keep left out, by case), and the bytes of the largest
    case's inputs as its case record says (the entry draws the same inputs where it runs
    them)."""
    outputs = 0
    for c in cases:
        ref = ref_dir / case_file(c.id, EXPECTED)
        if ref.is_file():
            outputs += ref.stat().st_size
        elif missing and c.id in missing:
            outputs += missing[c.id]
        elif c.timing:  # computed only once a loop reaches it (model/timed.py)
            outputs += TIMED_CASE_SLACK
    case_ids = [c.id for c in cases]
    output = max(base.output_bytes, outputs + ENTRY_SLACK + PER_CASE_SLACK * len(case_ids))
    return replace(base, output_bytes=output,
                   memory_bytes=base.memory_bytes + output + 2 * _largest_input(ref_dir,
                                                                                case_ids))


def _largest_input(ref_dir: Path, case_ids: list[str]) -> int:
    """The most bytes one of `case_ids`'s inputs hold, by the reference's case records (its
    result, or while it still times, its cases file); 0 where it has none."""
    for name in (RESULT_FILE, CASES_FILE):
        result = read_result(ref_dir / name) if (ref_dir / name).is_file() else None
        if result is not None:
            return max((r.input_bytes or 0 for cid, r in result.cases.items()
                        if cid in case_ids), default=0)
    return 0
