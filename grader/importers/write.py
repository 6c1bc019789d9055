"""Write a SuiteDraft as a suite of ours: files, derived roofline numbers, checks, all or nothing.

The suite is assembled in a fresh folder beside OUT, loaded back with `grader.suite.load.load_suite`
(the loader `grader run` uses), and only then renamed to OUT: a failed import leaves nothing.
Shapes the source gives no FLOPs or bytes for are derived by running the reference once, as
`grader roofline derive` does (on `meta` by default: nothing is computed, so large shapes cost
nothing). That runs the source's code on this host: importers are for sources you trust as you
trust a reference.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType

from grader.errors import ProblemError, UsageError
from grader.formats.problem import Problem, SuiteInfo, Weights
from grader.formats.writer import problem_toml, suite_toml, weights_toml
from grader.importers.common import ProblemDraft, ShapeDraft, SuiteDraft, reason
from grader.importers.smoke import with_smoke
from grader.suite.load import Suite, load_suite
from grader.suite.scaffold import PROBLEM_ID

UPSTREAM_RTOL = 0.1  # a source's own roofline numbers beside ours: a difference worth a note


@dataclass(frozen=True, kw_only=True)
class ImportOptions:
    out: Path
    version: str = "0.1.0"
    seeds_per_shape: int = 2
    timeout_s: float = 300.0
    derive_device: str = "meta"  # where shapes without numbers are derived: meta or cpu
    skip_bad: bool = False  # skip a problem that cannot be imported instead of failing


@dataclass(frozen=True, kw_only=True)
class ImportResult:
    suite: Suite
    derived: list[str]  # "<problem>/<shape>" whose numbers were derived
    notes: list[str]
    skipped: list[str]


def _check_out(out: Path) -> None:
    if not PROBLEM_ID.fullmatch(out.name) or out.name in (".", ".."):
        raise UsageError(f"-o {out}: the folder's name is the suite id and {out.name!r} is not "
                         "a valid one", hint="use letters, digits, `_`, `.` and `-`")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"-o {out}: already exists and is not an empty folder; import never "
                         "overwrites", hint="choose a new folder, or remove this one first")
    if not out.parent.is_dir():
        raise UsageError(f"-o {out}: {out.parent} is not a folder")


def _count(draft: ProblemDraft, ref: ModuleType, s: ShapeDraft, device: str
           ) -> tuple[int, int]:
    from grader.scoring.derive import count

    init = {k: s.params[k] for k in draft.init_params if k in s.params}
    flops, read, written, _ = count(ref, dict(s.params), init, device=device)
    return flops, read + written


def _derive(draft: ProblemDraft, ref: ModuleType, device: str) -> ProblemDraft:
    """Fill in the shapes' missing FLOPs and bytes by running the reference once each (a smoke
    shape, small, on the CPU where `device` cannot run it)."""
    shapes = []
    for s in draft.shapes:
        if s.needs_work(draft):
            # meta first (nothing computed); then the CPU, for references that read values
            # (.item(), nonzero) which meta cannot give
            tries = [device, *(["cpu"] if device != "cpu" else [])]
            failed: list[str] = []
            for where in tries:
                try:
                    flops, nbytes = _count(draft, ref, s, where)
                    break
                except Exception as exc:  # the source's code: say which problem and shape
                    failed.append(f"on {where} failed: {type(exc).__name__}: "
                                  f"{str(exc)[:300]}")
            else:
                raise ProblemError(
                    f"{draft.origin}: deriving FLOPs and bytes of shape {s.id} "
                    + "; ".join(failed), hint="give the numbers in the source") from None
            s = replace(s, flops=s.flops if s.flops is not None or draft.flops_expr else flops,
                        bytes=s.bytes if s.bytes is not None or draft.bytes_expr else nbytes)
        shapes.append(s)
    return replace(draft, shapes=shapes)


def _beside_upstream(draft: ProblemDraft, ref: ModuleType, device: str) -> list[str]:
    """Where the source's own numbers (used as given) differ from our derivation by more
    than UPSTREAM_RTOL: both, in a note per shape, so that a reader sees the difference."""
    notes: list[str] = []
    for s in draft.shapes:
        if s.flops is None and s.bytes is None:
            continue
        try:
            flops, nbytes = _count(draft, ref, s, device)
        except Exception as exc:
            return [*notes, f"upstream roofline numbers not checked: deriving shape {s.id} on "
                    f"{device} failed ({type(exc).__name__})"]
        diffs = [f"{what} {given:.6g} (derived {got})"
                 for what, given, got in (("flops", s.flops, flops), ("bytes", s.bytes, nbytes))
                 if given is not None and not math.isclose(given, got, rel_tol=UPSTREAM_RTOL)]
        if diffs:
            notes.append(f"shape {s.id}: upstream {'; '.join(diffs)}: upstream used")
    return notes


def _write_problem(draft: ProblemDraft, root: Path, device: str, kind: str
                   ) -> tuple[Problem, list[str]]:
    from grader.scoring.derive import load_reference

    directory = root / draft.id
    directory.mkdir()
    for name, data in draft.files.items():
        (directory / name).write_bytes(data)
    ref = load_reference(directory, "module")
    draft = replace(draft, notes=[*draft.notes, *_beside_upstream(draft, ref, device)])
    draft = with_smoke(draft, ref, {s.id for s in draft.shapes})
    filled = _derive(draft, ref, device)
    derived = [f"{draft.id}/{a.id}" for a, b in zip(draft.shapes, filled.shapes, strict=True)
               if a != b]
    if derived:
        filled = replace(filled, notes=[*filled.notes, "flops/bytes derived (grader roofline "
                                        f"derive, on {device}, else the CPU) for shapes "
                                        + ", ".join(d.split("/", 1)[1] for d in derived)])
    problem = filled.to_problem()
    text = problem_toml(problem, f"Imported by `grader import {kind}` from {draft.origin}.\n"
                        "Re-import rather than edit; docs/import.md says what each field "
                        "came from.")
    (directory / "problem.toml").write_text(text, encoding="utf-8")
    return problem, derived


def write_suite(draft: SuiteDraft, opts: ImportOptions) -> ImportResult:
    _check_out(opts.out)
    if not draft.problems:
        raise ProblemError(f"{draft.source}: no problem could be imported" + "".join(
            f"\n  {r}" for r in draft.skipped[:100]))
    parent = Path(tempfile.mkdtemp(prefix=f".{opts.out.name}.import-", dir=opts.out.parent))
    try:
        staging = parent / opts.out.name
        staging.mkdir()
        problems: list[str] = []
        derived: list[str] = []
        skipped = list(draft.skipped)
        for p in draft.problems:
            try:
                _, d = _write_problem(p, staging, opts.derive_device, draft.kind)
            except ProblemError as exc:
                if not opts.skip_bad:
                    raise
                shutil.rmtree(staging / p.id, ignore_errors=True)
                skipped.append(reason(p.origin, exc.message))
                continue
            problems.append(p.id)
            derived += d
        if not problems:  # every reason, one a line: none is left unsaid
            raise ProblemError(f"{draft.source}: no problem could be imported:\n"
                               + "\n".join(f"  {r}" for r in skipped[:100]))
        info = SuiteInfo(id=opts.out.name, version=opts.version, problems=problems,
                         description=draft.description, seeds_per_shape=opts.seeds_per_shape,
                         timeout_s=opts.timeout_s)
        weights = Weights(version=opts.version, source=draft.weights_source,
                          weights=[w for w in draft.weights if w.problem in problems])
        header = f"Imported by `grader import {draft.kind}` from {draft.source}."
        # The writer reads every text back with the format models before it returns it.
        (staging / "suite.toml").write_text(suite_toml(info, header), encoding="utf-8")
        (staging / "weights.toml").write_text(weights_toml(weights, header), encoding="utf-8")
        load_suite(staging)  # what `grader run` will do: refuse here rather than there
        if opts.out.exists():
            opts.out.rmdir()  # empty (checked); replaced by the finished suite
        os.replace(staging, opts.out)
    finally:
        shutil.rmtree(parent, ignore_errors=True)
    return ImportResult(suite=load_suite(opts.out), derived=derived, notes=draft.notes,
                        skipped=skipped)
