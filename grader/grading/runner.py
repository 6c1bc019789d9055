"""From the command line's words to a graded, reported run."""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace
from pathlib import Path

from grader.errors import GraderError, ReferenceFailed, VerdictGate
from grader.grading import outdir
from grader.grading.checkpoint import host_fs
from grader.grading.config import GradingOptions, RunOptions
from grader.grading.factory import build_grader
from grader.grading.practice import practice_view
from grader.grading.progress import Progress
from grader.intake.bundle import Submission
from grader.intake.packing import packed, same_suite
from grader.model.results import Report
from grader.report.entry_paths import with_entry_paths
from grader.report.failures import error_lines, failure_lines
from grader.report.not_graded import write_not_graded
from grader.report.public import public_view
from grader.report.render import write_reports
from grader.report.summaries import ErrorInfo, RunSummary, run_summary
from grader.scoring.hardware import load_hardware
from grader.suite.load import Suite
from grader.verdicts import Verdict


def plural(n: int, word: str) -> str:
    """"1 shape", "2 shapes" (issue 34: "1 shapes in 1 problems")."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def summary_line(rep: Report) -> str:
    s = rep.summary
    counts = ", ".join(f"{n} {v}" for v, n in sorted(s.verdicts.items()))
    return (f"{rep.submission.name}: {plural(s.shapes, 'shape')} in "
            f"{plural(s.problems, 'problem')} ({s.coverage}): {counts}; correct "
            f"{s.correctness_rate:.0%}, in {rep.submission.dsl} {s.dsl_adoption_rate:.0%}")


def planned_problems(cfg: GradingOptions, suite: Suite) -> list[str]:
    """The problems the run will grade, in order, for the progress counts and ETA."""
    chosen = cfg.settings.problems
    return [p for p in suite.problems if not chosen or p in chosen]


def check_references(suite: Suite, problems: list[str]) -> None:
    """Refuse, before any container starts, a reference.py that does not even parse: the
    suite's fault, not the entry's nor the machinery's (issue 23)."""
    for pid in problems:
        path = suite.problems[pid].directory / "reference.py"
        try:
            ast.parse(path.read_bytes(), filename=str(path))
        except (SyntaxError, ValueError) as exc:
            line = getattr(exc, "lineno", None)
            raise ReferenceFailed(f"{path}{f':{line}' if line else ''}: the suite's reference "
                                  f"does not parse: {getattr(exc, 'msg', exc)}",
                                  hint="fix the suite's reference.py (the organiser's file), "
                                  "then check it with `grader roofline derive "
                                  f"{path.parent} --device cpu`") from None


def failed_references(rep: Report, suite: Suite | None) -> ReferenceFailed | None:
    """The problems whose reference raised (judge.reference_failure): graded reference_error,
    the suite is at fault, so the run exits ReferenceFailed naming each reference.py."""
    bad = [p.id for p in rep.problems
           if any(s.verdict is Verdict.REFERENCE_ERROR for s in p.shapes)]
    if not bad:
        return None
    where = [str(suite.problems[p].directory / "reference.py")
             if suite is not None and p in suite.problems else f"{p}/reference.py" for p in bad]
    return ReferenceFailed(
        f"the suite's reference failed for {', '.join(bad)}: {', '.join(where)} (its shapes are "
        "reported reference_error: the entry is not at fault)",
        hint="the reports hold the reference's error excerpt; fix the reference.py, check it "
        "with `grader suite check SUITE`, then grade again")


def _unknown_problems(sub: Submission, suite: Suite, progress: Progress) -> None:
    """Say so when the bundle has kernels for problems the suite lacks: run grades only the
    suite's problems (issue 23, item 10: they were ignored silently)."""
    extra = [p for p in sub.manifest.problems if p not in suite.problems]
    if extra:
        progress.say(f"warning: not in suite {suite.id}, not graded: {', '.join(extra)} "
                     f"(its problems: {', '.join(suite.problems)})", "note")


@dataclass(frozen=True, kw_only=True)
class Reported:
    """A graded run whose reports are written: the report, their paths, and the error the
    run exits with once it has said so."""

    report: Report
    paths: dict[str, Path]
    error: GraderError | None  # ReferenceFailed or VerdictGate, raised once reported


def grade_bundle(opts: RunOptions, progress: Progress | None = None) -> Report:
    """Grade `opts.grading.bundle`: a tar, or a folder or one kernel file packed on the fly.
    What the user reads (progress, the summary, the reports' paths; with --json, one summary
    object, also when the run fails) goes through `progress` (the command line's prints it)."""
    progress = progress if progress is not None else Progress()
    g, show = opts.grading, opts.presentation
    # One kernel file: the texts name it as given, not the path the packing gives it.
    shown_as = str(g.bundle) if g.bundle.suffix == ".py" else None
    try:
        with packed(g.bundle, problems=g.settings.problems, suite=opts.suite) as bundle:
            graded = _grade(replace(opts, grading=replace(g, bundle=bundle)), progress,
                            shown_as=shown_as, source=g.bundle)
    except GraderError as exc:
        # Nothing graded: md, html and junit say why, for a CI job's summary and test results
        # (a folder holding a report is left as it is).
        for fmt, path in write_not_graded(ErrorInfo.of(exc), g.out_dir, show.formats).items():
            progress.say(f"{fmt}: {path} (not graded)", "note")
        if show.json:
            progress.say(failed_summary(exc, practice=show.practice), "json")
        raise
    if show.json:
        paths = {fmt: str(p) for fmt, p in graded.paths.items()}
        progress.say(run_summary(graded.report, paths, graded.error, practice=show.practice)
                     .model_dump_json(indent=2), "json")
    if graded.error is not None:
        raise graded.error
    return graded.report


def failed_summary(exc: GraderError, *, practice: bool) -> str:
    """--json: the summary object of a run that failed with `exc`."""
    return RunSummary(ok=False, exit_code=exc.exit_code, error=ErrorInfo.of(exc),
                      practice=practice).model_dump_json(indent=2)


def _grade(opts: RunOptions, progress: Progress, *, shown_as: str | None,
           source: Path) -> Reported:
    """Grade `opts.grading.bundle` (packed from `source`), opened once in the run's work
    folder: the suite's checks, the output folder's key and the grading all take that one
    opened submission (issue 33)."""
    cfg, show = opts.grading, opts.presentation
    grader = build_grader(cfg, progress)
    with grader.workspace() as work:
        sub, suite = grader.open(work)
        same_suite(sub, opts.suite, source)
        check_references(suite, planned_problems(cfg, suite))
        _unknown_problems(sub, suite, progress)
        outdir.prepare(cfg.out_dir, sub.sha256, resume=cfg.resume, force=show.force)
        if progress.shown:
            workers = len(cfg.scheduling.slots(cfg.settings.device))
            progress.plan(planned_problems(cfg, suite), workers=workers)
        try:
            rep = with_entry_paths(grader.grade(sub, suite), shown_as)
        except BaseException:
            progress.close()  # a live bar gives the terminal back before the error is shown
            raise
    if show.practice:
        rep = practice_view(rep, suite, load_hardware(rep.environment.hardware))
    progress.finish()
    # The secret behind the report's seed commitment (for the organiser, to reproduce inputs)
    # is already in out_dir/seed.secret: the checkpoint wrote it before grading began.
    with host_fs(f"cannot write the reports into {cfg.out_dir}",
                 hint="every graded problem is kept in the checkpoint: free space, then run "
                 "the same command with --resume to write the reports"):
        paths = write_reports(rep, cfg.out_dir, list(show.formats), public=show.public)
    progress.say(summary_line(rep))
    # What did not pass, where in the entry's file and why (issue 34: only report.json said).
    lines = (diagnostics(rep) if show.practice
             else failure_lines(public_view(rep) if show.public else rep))
    for line in lines:
        progress.say(line)
    for fmt, path in paths.items():
        progress.say(f"{fmt}: {path}")
    outdir.finish(cfg.out_dir, rep, keep_checkpoint=show.keep_checkpoint)
    error: GraderError | None = failed_references(rep, suite)
    if error is None:
        try:
            gate_failure(rep, show.fail_on, cfg.out_dir)
        except VerdictGate as exc:
            error = exc
    return Reported(report=rep, paths=paths, error=error)


def diagnostics(rep: Report) -> list[str]:
    """A practice run's lines per shape: verdict, fraction of roofline, detail, where in the
    entry's file and the error's last line (the reports hold the whole excerpt)."""
    fraction = {(s.problem, s.shape): s.s for s in (rep.scores.shapes if rep.scores else [])
                if s.measured_s is not None}
    out = []
    for p in rep.problems:
        if not p.shapes:
            out.append(f"  {p.id}: {p.verdict}: {p.detail}")
        for s in p.shapes:
            f = fraction.get((p.id, s.id))
            roof = f"{f:.1%} of roofline" if f is not None else "not timed"
            out.append(f"  {p.id}/{s.id}: {s.verdict} ({roof}): {s.detail}")
            out += error_lines(s, p.kernel_file)
    return out


def gate_failure(rep: Report, fail_on: frozenset[Verdict], out_dir: Path) -> None:
    """Raise VerdictGate when a shape got a verdict named in --fail-on (the CI gate)."""
    hits = [(p.id, s.id, s.verdict) for p in rep.problems for s in p.shapes
            if s.verdict in fail_on]
    # A problem graded on no shape has its verdict (missing) and no shape to carry it.
    hits += [(p.id, "-", p.verdict) for p in rep.problems
             if not p.shapes and p.verdict in fail_on]
    if not hits:
        return
    counts = {v: sum(1 for *_, hv in hits if hv == v) for v in sorted({h[2] for h in hits})}
    first = ", ".join(f"{pid}/{sid}: {v}" for pid, sid, v in hits[:3])
    more = f" and {len(hits) - 3} more" if len(hits) > 3 else ""
    raise VerdictGate(
        f"--fail-on: {len(hits)} shape(s) got a gated verdict "
        f"({', '.join(f'{v} x{n}' for v, n in counts.items())}): {first}{more}",
        hint=f"grading finished and the reports are in {out_dir}; read report.md or "
        "report.html for each shape's evidence, fix the kernels, or narrow --fail-on")
