"""One entry of a round graded: `grader run`'s machinery (grade.Grader), under the round's
secret and settings, with the round's references. Used by the local round and by each Ray
task (round/on_ray.py), so that both grade an entry the same way.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

from grader.errors import GraderError, ProblemError, UsageError
from grader.grading.checkpoint import CHECKPOINT_DIR
from grader.grading.config import GradingOptions
from grader.grading.factory import build_grader
from grader.grading.progress import Progress
from grader.model.results import Report
from grader.round.model import Outcome, RefUse
from grader.round.refcache import ReferenceCache


@dataclass(frozen=True, kw_only=True)
class EntryResult:
    """One entry of a round graded (or not): its report and its outcome for the round."""

    report: Report | None  # None: the grading failed (outcome.error says why)
    outcome: Outcome


def grade_entry(name: str, req: GradingOptions, cache_root: Path | None, progress: Progress,
                node: str | None = None) -> EntryResult:
    """Grade `req.bundle` into `req.out_dir` (its checkpoint; reports are the caller's to
    write). A checkpoint already there from an interrupted attempt is resumed: the problems
    it finished are kept. A failure of the grader (the engine, a full disk) is a `failed`
    outcome, graded again when the round resumes; it never stops the other entries. An
    error of the round's options or suite (UsageError, ProblemError) is raised: it is the
    same for every entry, and never the host's failure (issue 34: an unfound suite was
    "2 entries not graded (the grader's failure)", exit 30, "hint: fix the host")."""
    cache = ReferenceCache(cache_root, name) if cache_root is not None else None
    t0 = time.monotonic()
    resume = (req.out_dir / CHECKPOINT_DIR / "run.json").is_file()
    try:
        try:
            rep = run_grader(replace(req, resume=resume), cache, progress)
        except UsageError:
            if not resume:
                raise
            rep = run_grader(replace(req, resume=False), cache, progress)  # another run's: afresh
    except (UsageError, ProblemError):
        raise
    except Exception as exc:  # the grader's failure (or bug), never the round's end
        error = (exc.message if isinstance(exc, GraderError)
                 else f"grader bug: {type(exc).__name__}: {exc}")
        return EntryResult(report=None, outcome=Outcome(
            name=name, status="failed", error=error, references=_uses(cache),
            wall_s=time.monotonic() - t0, node=node))
    return EntryResult(report=rep, outcome=Outcome(
        name=name, status="graded", references=_uses(cache), wall_s=time.monotonic() - t0,
        node=node))


def run_grader(cfg: GradingOptions, cache: ReferenceCache | None, progress: Progress
               ) -> Report:
    """`grader run`'s grading of `cfg.bundle` (its checkpoint in `cfg.out_dir`), with the
    round's references when `cache` is given; the report, written nowhere."""
    grader = build_grader(cfg, progress)
    grader.references = cache
    return grader.open_and_grade()


def _uses(cache: ReferenceCache | None) -> list[RefUse]:
    if cache is None:
        return []
    return [RefUse(problem=u.problem, key=u.key, cases=u.cases, computed=u.computed)
            for u in cache.uses]
