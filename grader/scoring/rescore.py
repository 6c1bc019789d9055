"""`grader rescore`: new weights (or another hardware profile) over saved raw results.

Nothing is re-run. The report's verdicts and median times are kept as they are (verdicts are
the run's judgement; re-scoring only re-weighs); rooflines are recomputed from the *suite's*
problems (never read from the report: they are hidden data), and the score card is rebuilt
with the new weights. A time under the new roofline is not re-judged here: the card flags it
`over_roofline` and lists it among the tampering candidates.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from grader.errors import ProblemError, UsageError
from grader.formats._base import load_toml
from grader.formats.problem import Weights
from grader.model.results import Report
from grader.model.scores import ScoreOptions
from grader.scoring.from_report import score_inputs
from grader.scoring.hardware import HardwareProfile
from grader.scoring.scores import score
from grader.suite.load import Suite, load_suite

_SUITE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def report_suite(report: Report, roots: Sequence[Path]) -> Suite:
    """The suite a report was graded with, by its id under `roots`. The id comes from a file
    that may have been edited, so it is only ever a folder name, never a path."""
    sid = report.suite.id
    if not _SUITE_ID.fullmatch(sid) or sid.strip(".") == "":
        raise UsageError(f"the report names suite {sid!r}, which is not a suite id")
    for root in roots:
        if (root / sid / "suite.toml").is_file():
            return load_suite(root / sid)
    raise UsageError(f"suite {sid!r} of the report not found",
                     hint=f"looked in {', '.join(str(r) for r in roots)}; pass --suites DIR")


def load_weights(path: Path, suite: Suite) -> Weights:
    """A weights.toml checked against the suite: every problem and shape it names exists."""
    weights = load_toml(path, Weights, ProblemError)
    for i, w in enumerate(weights.weights):
        where = f"{path}: field weights.{i}"
        if w.problem not in suite.problems:
            raise ProblemError(f"{where}.problem: {w.problem!r} is not a problem of suite "
                               f"{suite.id}")
        shape_ids = {s.id for s in suite.problems[w.problem].problem.shapes}
        if w.shape is not None and w.shape not in shape_ids:
            raise ProblemError(f"{where}.shape: {w.shape!r} is not a shape of {w.problem}",
                               hint=f"expected one of {sorted(shape_ids)}")
    return weights


def rescore(report: Report, suite: Suite, profile: HardwareProfile,
            weights: Weights | None = None) -> Report:
    """`report` with a new score card (and its suite and hardware fields updated to match)."""
    if report.suite.id != suite.id or report.suite.version != suite.info.version:
        raise UsageError(
            f"the report was graded with suite {report.suite.id} {report.suite.version}, "
            f"this is {suite.id} {suite.info.version}",
            hint="re-score against the suite version it was graded with (--suites DIR)")
    if profile.is_performance != report.environment.is_performance:
        # CPU-interpreter wall-clock against a GPU's ceilings would pass for performance; GPU
        # times against the nominal CPU profile give meaningless S far above 1.
        run = "a performance run" if report.environment.is_performance else "not a performance run"
        raise UsageError(
            f"the report's timings come from {report.environment.device} ({run}); profile "
            f"{profile.name} is {'' if profile.is_performance else 'not '}a performance profile",
            hint="re-score GPU reports against a GPU profile and CPU-interpreter reports "
                 "against cpu-interpreter")
    weights = weights or suite.weights
    reference_s = {(p.id, s.id): s.reference_timing.median_us * 1e-6
                   for p in report.problems for s in p.shapes if s.reference_timing}
    inputs = score_inputs(report, {pid: b.problem for pid, b in suite.problems.items()},
                          profile, reference_s=reference_s)
    old = report.scores.options if report.scores else ScoreOptions()
    options = old.model_copy(update={"include_smoke": not profile.is_performance})
    agent = report.submission.agent
    card = score(inputs, weights, options=options,
                 agent_tokens=agent.output_tokens if agent else None,
                 agent_wall_s=agent.wall_s if agent else None)
    note = (f"re-scored from saved results (nothing re-run): weights {weights.version}, "
            f"hardware {profile.name}")
    card = card.model_copy(update={"notes": [*card.notes, note]})
    return report.model_copy(update={
        "scores": card,
        "suite": report.suite.model_copy(update={"weights_version": weights.version}),
        "environment": report.environment.model_copy(update={"hardware": profile.name}),
    })
