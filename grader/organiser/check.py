"""`grader suite check SUITE`: is the suite itself sound, before any entry is graded against it
(issue 23: a reference that failed made every entry `infra_error`).

For each problem of the suite (or those named):
- its reference.py parses (runner.check_references);
- its `flops` and `bytes` expressions evaluate for every shape, to finite numbers (bytes > 0);
- its reference runs on every selected shape, in containers: the same problem image and
  sandbox as grading (the CPU interpreter here, or a GPU), twice with the same seeds;
  determinism: both runs draw bit-equal inputs (their digests: an entry draws its own from
  the seed, issue 32) and give bit-equal outputs; tolerance: where the outputs differ, the
  second run is within the problem's tolerance of the first (a reference that cannot match
  itself cannot grade an entry);
and once for the suite: the release kit builds (nothing hidden in it).

A reference at fault (it raised, or does not match itself within its tolerance) is
`reference_error`, the suite's verdict, never `infra_error`; a run stopped from outside
(timeout, memory, disk) is `infra_error`. The command exits 21 (ReferenceFailed) when a
reference is at fault, 20 (ProblemError) for an expression or the kit, 30 (InfraError) when
only the machinery failed.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from grader.errors import GraderError, InfraError, ProblemError, ReferenceFailed
from grader.formats.problem import Shape
from grader.harness.protocol import EXPECTED
from grader.suite.load import Suite, SuiteProblem
from grader.verdicts import Verdict

if TYPE_CHECKING:
    from grader.grading.progress import Progress
    from grader.model.runs import Case, Evidence
    from grader.run.jobs import WorkerSetup
    from grader.sandbox.spec import Limits


@dataclass(frozen=True, kw_only=True)
class ShapeCheck:
    problem: str
    shape: str
    verdict: Verdict  # passed, reference_error or infra_error
    detail: str
    excerpt: str | None = None


@dataclass(kw_only=True)
class SuiteCheck:
    suite: str
    shapes: list[ShapeCheck] = field(default_factory=list)
    roofline: list[str] = field(default_factory=list)  # "problem/shape: why"
    # Why `grader release` would refuse the kit (release_kit.release); None: it ships.
    kit: GraderError | None = None
    kit_bytes: int = 0
    warnings: list[str] = field(default_factory=list)  # lint.warnings: TODOs, unlisted folders
    references: dict[str, str] = field(default_factory=dict)  # problem -> its reference.py

    @property
    def ok(self) -> bool:
        return (not self.roofline and self.kit is None
                and all(s.verdict is Verdict.PASSED for s in self.shapes))

    def error(self) -> GraderError | None:
        """The error the command exits with, or None when the suite is sound."""
        bad = sorted({s.problem for s in self.shapes if s.verdict is Verdict.REFERENCE_ERROR})
        if bad:
            where = [self.references.get(p, f"{p}/reference.py") for p in bad]
            return ReferenceFailed(
                f"suite {self.suite}: the reference of {', '.join(bad)} is at fault "
                f"(reference_error above): {', '.join(where)}",
                hint="fix each reference.py named; `grader roofline derive PROBLEM_DIR "
                "--device cpu` runs one outside containers")
        if isinstance(self.kit, ReferenceFailed):  # release's self-check: the suite's fault
            return self.kit
        if self.roofline or self.kit:
            what = self.roofline[:3] + ([f"release kit: {self.kit.message}"] if self.kit
                                        else [])
            return ProblemError(f"suite {self.suite}: " + "; ".join(what),
                                hint="fix problem.toml's flops/bytes expressions, or the text "
                                "the kit would leak")
        if any(s.verdict is Verdict.INFRA_ERROR for s in self.shapes):
            return InfraError(f"suite {self.suite}: some reference runs were stopped from "
                              "outside their code (infra_error above)",
                              hint="free memory or disk, or raise --timeout, and check again")
        return None


def roofline_errors(sp: SuiteProblem) -> list[str]:
    """`problem/shape: why` for each shape whose FLOP or byte count does not evaluate."""
    from grader.formats.expr import evaluate, work

    out = []
    for shape in sp.problem.shapes:
        try:
            flops, nbytes = work(sp.problem, shape)
            if sp.problem.output_bytes is not None:
                evaluate(sp.problem.output_bytes, shape.params)
        except (ProblemError, ValueError, ArithmeticError, TypeError) as exc:
            out.append(f"{sp.id}/{shape.id}: {getattr(exc, 'message', exc)}")
            continue
        if not (math.isfinite(flops) and flops >= 0 and math.isfinite(nbytes) and nbytes > 0):
            out.append(f"{sp.id}/{shape.id}: flops={flops:g}, bytes={nbytes:g} (need "
                       "finite flops >= 0 and bytes > 0)")
    return out


def kit_error(suite: Suite, *, run: bool = True) -> tuple[GraderError | None, int]:
    """Why `grader release` would refuse the kit (None when it would ship it), and its size:
    release's own path (release_kit.release), its self-check included (`run`: as release
    runs it, each reference once on the CPU; False: imports only, as --no-run-check)."""
    from grader.organiser.release_kit import release

    try:
        return None, len(release(suite, run=run)[1])
    except GraderError as exc:
        return exc, 0


def _bits_equal(a: Any, b: Any) -> bool:
    """The same values, bit for bit (NaNs included), through lists, tuples and dicts."""
    import torch

    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        return bool(torch.equal(a.contiguous().reshape(-1).view(torch.uint8),
                                b.contiguous().reshape(-1).view(torch.uint8)))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_bits_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_bits_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b) or (a != a and b != b)


@dataclass(frozen=True, kw_only=True)
class Runner:
    """Runs a problem's reference in containers (the grading's images and sandbox)."""

    sandbox: WorkerSetup
    limits: Limits  # the reference's base limits
    runtime_tag: str
    suite_id: str
    seeds: int
    secret: bytes
    budget_bytes: int = 8 << 30

    def batches(self, sp: SuiteProblem, shapes: list[Shape]) -> Iterator[list[Case]]:
        """The cases of `shapes` in batches whose inputs fit the budget (run/plan.py)."""
        from grader.grading.seeds import per_shape, problem_cases
        from grader.run import plan

        cases = problem_cases(self.secret, sp, shapes, self.seeds, None)
        for part in plan.batches(sp.problem, shapes, per_shape(cases, shapes),
                                 self.budget_bytes):
            ids = {s.id for s in part}
            yield [c for c in cases if c.shape.id in ids]

    def check(self, sp: SuiteProblem, shapes: list[Shape], progress: Progress
              ) -> list[ShapeCheck]:
        from grader.images import ensure, problem_plan

        progress(f"{sp.id}: image", problem=sp.id, stage="image")
        image = ensure(self.sandbox.engine, problem_plan(self.runtime_tag, self.suite_id,
                                                         sp)).tag
        out: list[ShapeCheck] = []
        for cases in self.batches(sp, shapes):
            progress(f"{sp.id}: reference, twice ({len(cases)} cases)", problem=sp.id,
                     stage="reference")
            out += self._batch(sp, image, cases)
        return out

    def _batch(self, sp: SuiteProblem, image: str, cases: list[Case]) -> list[ShapeCheck]:
        from grader.judge.problem import reference_failure
        from grader.run import plan
        from grader.run.sequential import reference_run

        shapes = list({c.shape.id: c.shape for c in cases}.values())
        per_shape = {s.id: self.seeds for s in shapes}
        limits = plan.reference_limits(self.limits, sp.problem, shapes, per_shape)
        setup, problem = self.sandbox, sp.problem
        with reference_run(setup, image, cases, limits, problem, digests=True) as (
                first, _), reference_run(setup, image, cases, limits, problem,
                                         digests=True) as (second, _):
            for run in (first, second):
                failure = reference_failure(run, cases)
                if failure is not None:
                    verdict, detail, excerpt = failure
                    return [ShapeCheck(problem=sp.id, shape=s.id, verdict=verdict,
                                       detail=detail, excerpt=excerpt) for s in shapes]
            return [self._compare(sp, s, [c for c in cases if c.shape.id == s.id], first,
                                  second, limits.output_bytes) for s in shapes]

    @staticmethod
    def _compare(sp: SuiteProblem, shape: Shape, cases: list[Case], first: Evidence,
                 second: Evidence, max_bytes: int) -> ShapeCheck:
        from grader.judge.outputs import compare

        notes = []
        for case in cases:
            drawn = [_input_digest(run, case.id) for run in (first, second)]
            if drawn[0] is None or drawn[0] != drawn[1]:
                # The entry draws its inputs itself from the seed (issue 32): unless the recipe
                # draws the same bits every time, it computes on other values than the
                # reference's expected outputs were made from.
                return ShapeCheck(
                    problem=sp.id, shape=shape.id, verdict=Verdict.REFERENCE_ERROR,
                    detail=f"case {case.id}: two runs of make_inputs with the same seed drew "
                    "different inputs (entries draw their own from the seed: the recipe must "
                    "be deterministic bit for bit)" if drawn[0] is not None else
                    f"case {case.id}: the reference's record has no digest of its inputs")
            a = first.out.load_tensors(case.id, EXPECTED, max_bytes)
            b = second.out.load_tensors(case.id, EXPECTED, max_bytes)
            if isinstance(a, str) or isinstance(b, str):
                return ShapeCheck(problem=sp.id, shape=shape.id,
                                  verdict=Verdict.REFERENCE_ERROR,
                                  detail=f"case {case.id}: {a if isinstance(a, str) else b}")
            if _bits_equal(a, b):
                continue
            outcome = compare(a, b, sp.problem)
            if not outcome.ok:
                return ShapeCheck(
                    problem=sp.id, shape=shape.id, verdict=Verdict.REFERENCE_ERROR,
                    detail=f"case {case.id}: two runs with the same seed gave outputs "
                    f"beyond the problem's tolerance: {outcome.detail}")
            notes.append("outputs differ within the tolerance")
        detail = (f"deterministic: {len(cases)} seed(s) gave bit-equal inputs and outputs "
                  "twice" if not notes else "not bit-for-bit deterministic, "
                  f"{sorted(set(notes))[0]}: acceptable, but entries are compared to one run")
        return ShapeCheck(problem=sp.id, shape=shape.id, verdict=Verdict.PASSED,
                          detail=detail)


def _input_digest(run: Evidence, case_id: str) -> str | None:
    result = run.out.result
    record = result.cases.get(case_id) if result is not None else None
    return record.input_digest if record is not None else None


def select(sp: SuiteProblem, shapes: str) -> list[Shape]:
    every = list(sp.problem.shapes)
    if shapes == "smoke":
        return [s for s in every if s.smoke]
    if shapes == "scored":
        return [s for s in every if not s.smoke]
    return every


def check_suite(suite: Suite, *, problems: tuple[str, ...] = (), shapes: str = "all",
                make_runner: Callable[[str], Runner], progress: Progress,
                run_kit_check: bool = True) -> SuiteCheck:
    """Every check above, each problem's steps reported through `progress` (the one progress
    type, issue 33; the command line's sink shows them); `make_runner(session)` gives the
    Runner (its sandbox's session); `run_kit_check`: release's self-check runs each
    reference on the CPU (False: for references that need a GPU, as `grader release
    --no-run-check`)."""
    from grader.grading.runner import check_references
    from grader.sandbox.runs import owned_run
    from grader.suite.lint import warnings

    todo = [b for pid, b in suite.problems.items() if not problems or pid in problems]
    check_references(suite, [b.id for b in todo])
    result = SuiteCheck(suite=suite.id, references={
        b.id: str(b.directory / "reference.py") for b in todo})
    for sp in todo:
        result.roofline += roofline_errors(sp)
    result.kit, result.kit_bytes = kit_error(suite, run=run_kit_check)
    result.warnings = warnings(suite)
    session = uuid.uuid4().hex[:12]
    with owned_run(session):
        runner = make_runner(session)
        try:
            for sp in todo:
                result.shapes += runner.check(sp, select(sp, shapes), progress)
        finally:
            runner.sandbox.engine.reap(session)
    return result
