"""Write a SuiteDraft as a suite of ours: files, derived roofline numbers, checks, all or nothing.

The suite is assembled in a fresh folder beside OUT, loaded back with `grader.suite.load.load_suite`
(the loader `grader run` uses), and only then renamed to OUT: a failed import leaves nothing.
Shapes the source gives no FLOPs or bytes for are derived by running the reference once, as
`grader roofline derive` does (on `meta` by default: nothing is computed, so large shapes cost
nothing). That runs the source's code on this host: importers are for sources you trust as you
trust a reference.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any

from grader.errors import ProblemError, UsageError
from grader.formats.expr import evaluate
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


@dataclass(frozen=True)
class _Counted:
    """One run of the reference for one shape: its FLOPs, its bytes read and written, and the
    bytes of its outputs alone."""

    flops: int
    bytes: int
    output_bytes: int


class _Counter:
    """Each shape's reference run, counted once per device (grader.scoring.derive.count): the
    upstream check, the derivation and the output sizes share it."""

    def __init__(self, init_params: list[str], ref: ModuleType) -> None:
        from grader.scoring.derive import OpBudget

        self.init_params, self.ref = init_params, ref
        self._zero_ops = OpBudget()  # the problem's, for counts on meta with zero values
        self._runs: dict[tuple[str, str], _Counted | Exception] = {}

    def _init(self, s: ShapeDraft) -> dict[str, Any]:
        """The constructor arguments of the problem's `Model` at `s`."""
        return {k: s.params[k] for k in self.init_params if k in s.params}

    def output_bytes(self, s: ShapeDraft, device: str, traffic: float | None) -> int | None:
        """What one call of `s` returns: counted on `device`, else (on meta) with every value
        the reference reads zero (derive.output_bytes_on_meta), kept only where it is more
        than the shape's `traffic` count: a guess from zeros may only split batches, never
        merge them (Atrex-Bench's fp8_blockscale_fused_moe, counted so at 0.1 GiB a seed
        against 20.7 of traffic, would go from five batches to one, and a reference that
        fails past a host's limits costs its whole batch). None where nothing counts it: the
        count is a hint for batching, and without it the shape's traffic stands."""
        from grader.scoring.derive import output_bytes_on_meta

        with contextlib.suppress(Exception):  # the source's code
            return self.run(s, device).output_bytes
        if device != "meta":
            return None
        try:
            got = output_bytes_on_meta(self.ref, dict(s.params), self._init(s),
                                       budget=self._zero_ops)
        except Exception:  # the source's code, or past the count's bounds
            return None
        return got if traffic is None or got > traffic else None

    def run(self, s: ShapeDraft, device: str) -> _Counted:
        """The count of `s` on `device`; raises what the source's reference raised."""
        key = (s.id, device)
        if key not in self._runs:
            from grader.scoring.derive import count

            try:
                flops, read, written, _ = count(self.ref, dict(s.params), self._init(s),
                                                device=device)
                self._runs[key] = _Counted(flops=flops, bytes=read + written,
                                           output_bytes=written)
            except Exception as exc:  # the source's code: the caller says which shape
                self._runs[key] = exc
        got = self._runs[key]
        if isinstance(got, Exception):
            raise got
        return got


def _derive(draft: ProblemDraft, counter: _Counter, device: str) -> ProblemDraft:
    """Fill in the shapes' missing FLOPs and bytes by running the reference once each (a smoke
    shape, small, on the CPU where `device` cannot run it), and each shape's output bytes
    where a run counts them (none is run on the CPU for them alone: a production shape may
    not fit the host; on meta, a reference that reads values reads zeros)."""
    shapes = []
    for s in draft.shapes:
        if s.needs_work(draft):
            # meta first (nothing computed); then the CPU, for references that read values
            # (.item(), nonzero) which meta cannot give
            tries = [device, *(["cpu"] if device != "cpu" else [])]
            failed: list[str] = []
            for where in tries:
                try:
                    got = counter.run(s, where)
                    break
                except Exception as exc:  # the source's code: say which problem and shape
                    failed.append(f"on {where} failed: {type(exc).__name__}: "
                                  f"{str(exc)[:300]}")
            else:
                raise ProblemError(
                    f"{draft.origin}: deriving FLOPs and bytes of shape {s.id} "
                    + "; ".join(failed), hint="give the numbers in the source") from None
            s = replace(s, flops=s.flops if s.flops is not None or draft.flops_expr
                        else got.flops,
                        bytes=s.bytes if s.bytes is not None or draft.bytes_expr else got.bytes,
                        output_bytes=got.output_bytes)
        elif s.output_bytes is None:
            s = replace(s, output_bytes=counter.output_bytes(s, device, _traffic(draft, s)))
        shapes.append(s)
    return replace(draft, shapes=shapes)


def _traffic(draft: ProblemDraft, s: ShapeDraft) -> float | None:
    """The bytes one call of `s` moves by the source's count (the shape's, else the problem's
    expression); None where it has none."""
    if s.bytes is not None or draft.bytes_expr is None:
        return s.bytes
    try:
        return evaluate(draft.bytes_expr, s.params)
    except (ProblemError, ValueError, OverflowError):
        return None


def _beside_upstream(draft: ProblemDraft, counter: _Counter, device: str) -> list[str]:
    """Where the source's own numbers (used as given) differ from our derivation by more
    than UPSTREAM_RTOL: both, in a note per shape, so that a reader sees the difference."""
    notes: list[str] = []
    for s in draft.shapes:
        if s.flops is None and s.bytes is None:
            continue
        try:
            got = counter.run(s, device)
        except Exception as exc:
            return [*notes, f"upstream roofline numbers not checked: deriving shape {s.id} on "
                    f"{device} failed ({type(exc).__name__})"]
        diffs = [f"{what} {given:.6g} (derived {n})"
                 for what, given, n in (("flops", s.flops, got.flops),
                                        ("bytes", s.bytes, got.bytes))
                 if given is not None and not math.isclose(given, n, rel_tol=UPSTREAM_RTOL)]
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
    counter = _Counter(draft.init_params, ref)
    draft = replace(draft, notes=[*draft.notes, *_beside_upstream(draft, counter, device)])
    draft = with_smoke(draft, ref, {s.id for s in draft.shapes})
    filled = _derive(draft, counter, device)
    derived = [f"{draft.id}/{a.id}" for a, b in zip(draft.shapes, filled.shapes, strict=True)
               if (a.flops, a.bytes) != (b.flops, b.bytes)]
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
