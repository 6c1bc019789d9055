"""Write a SuiteDraft as a suite of ours: files, derived roofline numbers, checks, all or nothing.

The suite is assembled in a fresh folder beside OUT, loaded back with `grader.suite.load_suite`
(the loader `grader run` uses), and only then renamed to OUT: a failed import leaves nothing.
Shapes the source gives no FLOPs or bytes for are derived by running the reference once, as
`grader roofline derive` does (on `meta` by default: nothing is computed, so large shapes cost
nothing). That runs the source's code on this host: importers are for sources you trust as you
trust a reference.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from grader.errors import GraderError, ProblemError, UsageError
from grader.formats._base import parse_toml
from grader.formats.problem import Problem, SuiteFile, SuiteInfo, Weights
from grader.importers.common import ProblemDraft, SuiteDraft
from grader.importers.render import problem_toml, suite_toml, weights_toml
from grader.init_problem import PROBLEM_ID
from grader.suite import Suite, load_suite


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


def _derive(draft: ProblemDraft, directory: Path, device: str) -> ProblemDraft:
    """Fill in the shapes' missing FLOPs and bytes by running the reference once each."""
    from grader.scoring.derive import count, load_reference

    todo = [s for s in draft.shapes if s.needs_work(draft)]
    if not todo:
        return draft
    ref = load_reference(directory, "module")
    shapes = []
    for s in draft.shapes:
        if s in todo:
            init = {k: s.params[k] for k in draft.init_params if k in s.params}
            try:
                flops, read, written, _ = count(ref, dict(s.params), init, device=device)
            except Exception as exc:  # the source's code: say which problem and shape
                raise ProblemError(
                    f"{draft.origin}: deriving FLOPs and bytes of shape {s.id} on {device} "
                    f"failed: {type(exc).__name__}: {str(exc)[:300]}",
                    hint="give the numbers in the source, or try --derive-device cpu") from None
            s = replace(s, flops=s.flops if s.flops is not None or draft.flops_expr else flops,
                        bytes=s.bytes if s.bytes is not None or draft.bytes_expr
                        else read + written)
        shapes.append(s)
    return replace(draft, shapes=shapes)


def _write_problem(draft: ProblemDraft, root: Path, device: str, kind: str
                   ) -> tuple[Problem, list[str]]:
    directory = root / draft.id
    directory.mkdir()
    for name, data in draft.files.items():
        (directory / name).write_bytes(data)
    filled = _derive(draft, directory, device)
    derived = [f"{draft.id}/{a.id}" for a, b in zip(draft.shapes, filled.shapes, strict=True)
               if a != b]
    if derived:
        filled = replace(filled, notes=[*filled.notes, "flops/bytes derived (grader roofline "
                                        f"derive, on {device}) for shapes "
                                        + ", ".join(d.split("/", 1)[1] for d in derived)])
    problem = filled.to_problem()
    text = problem_toml(problem, f"Imported by `grader import {kind}` from {draft.origin}.\n"
                        "Re-import rather than edit; docs/import.md says what each field "
                        "came from.")
    path = directory / "problem.toml"
    if parse_toml(text, Problem, str(path), GraderError) != problem:
        raise GraderError(f"{path}: the rendered TOML does not read back as written",
                          hint="an importer bug: report it with --debug")
    path.write_text(text, encoding="utf-8")
    return problem, derived


def write_suite(draft: SuiteDraft, opts: ImportOptions) -> ImportResult:
    _check_out(opts.out)
    if not draft.problems:
        raise ProblemError(f"{draft.source}: no problem could be imported",
                           hint="; ".join(draft.skipped[:3]) or None)
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
                skipped.append(f"{p.origin}: {exc.message}")
                continue
            problems.append(p.id)
            derived += d
        if not problems:
            raise ProblemError(f"{draft.source}: no problem could be imported",
                               hint="; ".join(skipped[:3]))
        info = SuiteInfo(id=opts.out.name, version=opts.version, problems=problems,
                         description=draft.description, seeds_per_shape=opts.seeds_per_shape,
                         timeout_s=opts.timeout_s)
        weights = Weights(version=opts.version, source=draft.weights_source,
                          weights=[w for w in draft.weights if w.problem in problems])
        header = f"Imported by `grader import {draft.kind}` from {draft.source}."
        text = suite_toml(info, header)
        if parse_toml(text, SuiteFile, "suite.toml", GraderError).suite != info:
            raise GraderError("suite.toml: the rendered TOML does not read back as written")
        (staging / "suite.toml").write_text(text, encoding="utf-8")
        text = weights_toml(weights, header)
        if parse_toml(text, Weights, "weights.toml", GraderError) != weights:
            raise GraderError("weights.toml: the rendered TOML does not read back as written")
        (staging / "weights.toml").write_text(text, encoding="utf-8")
        load_suite(staging)  # what `grader run` will do: refuse here rather than there
        if opts.out.exists():
            opts.out.rmdir()  # empty (checked); replaced by the finished suite
        os.replace(staging, opts.out)
    finally:
        shutil.rmtree(parent, ignore_errors=True)
    return ImportResult(suite=load_suite(opts.out), derived=derived, notes=draft.notes,
                        skipped=skipped)
