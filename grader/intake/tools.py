"""Participants' side of bundles: pack a folder, check a bundle before uploading it.

`check_bundle` runs what the grader will run first, without Docker or a GPU: the intake
(the same code and limits as `grader run`), the static analysis, and a look at the layout
and the suite. `render_check` turns the result into the lines `grader bundle check` prints.
"""

from __future__ import annotations

import io
import os
import shutil
import stat
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from grader.errors import (
    BundleTooLarge,
    FindingsGate,
    GraderError,
    KernelSourceError,
    ManifestError,
    UnsafeMember,
    UsageError,
)
from grader.intake.bundle import MANIFEST, IntakeLimits, Submission, open_bundle
from grader.intake.kernel_check import kernel_problem
from grader.model.findings import Finding, Severity

if TYPE_CHECKING:
    from grader.suite.load import Suite

# Findings of these severities decide a verdict other than `passed` (see docs/detection.md).
BLOCKING: frozenset[Severity] = frozenset(
    {Severity.FALLBACK, Severity.VIOLATION, Severity.TAMPERING})


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    info.mtime = 0  # reproducible bundles: the same folder gives the same bytes
    tar.addfile(info, io.BytesIO(data))


def _regular(path: Path, *, directory: bool = False) -> None:
    """Refuse links and special files: in CI the folder is an untrusted pull request, and a
    link (kernels/x.py -> ~/.ssh/id_rsa) would pack a file of the runner into the bundle,
    where the entry could print it into the report; a FIFO would hang the packing."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    ok = stat.S_ISDIR(mode) if directory else stat.S_ISREG(mode)
    if not ok:
        kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
        raise UnsafeMember(f"{path}: {kind}; a bundle holds only regular files under "
                           "kernels/", hint="replace it with a plain copy of the file")


def create_bundle(directory: Path, output: Path) -> Submission:
    """Pack the manifest and the kernels, then read the result back through intake.

    The tar is written beside `output` and renamed into place only once intake accepts it,
    so a refused folder never leaves a bundle behind that looks ready to upload.
    """
    manifest = directory / MANIFEST
    if not manifest.is_file():
        raise UsageError(f"{manifest}: missing; a submission folder holds {MANIFEST} and "
                         "kernels/*.py", hint="see docs/formats.md (Submission bundle)")
    kernels = sorted((directory / "kernels").glob("*.py"))
    for path in [directory / "kernels", manifest, *kernels]:
        _regular(path, directory=path.name == "kernels")
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=".bundle-", suffix=".tar", dir=output.parent)
    except OSError as exc:
        raise UsageError(f"{output}: cannot write the bundle: {exc.strerror or exc}",
                         hint="choose a writable -o path") from None
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w",
                                                      format=tarfile.PAX_FORMAT) as tar:
            _add(tar, MANIFEST, manifest.read_bytes())
            for k in kernels:
                _add(tar, f"kernels/{k.name}", k.read_bytes())
        with tempfile.TemporaryDirectory() as work:
            # Errors name the folder the participant packed, never our temp file (issue 23).
            sub = open_bundle(tmp, Path(work) / "check", shown_as=directory)
        tmp.replace(output)
        output.chmod(0o644)  # mkstemp's 0600 would keep a CI upload step from reading it
        return sub
    finally:
        tmp.unlink(missing_ok=True)


def static_check(source: Path, policy_name: str) -> dict[str, list[Finding]]:
    """`grader check`: the findings of a bundle's kernels, of a submission folder's (packed as
    `bundle create` packs it, through the same intake) or of one kernel file, named as given
    (issue 34: a .py and a folder were refused where `grader run` takes all three)."""
    if source.is_dir():
        with tempfile.TemporaryDirectory(prefix="grader-check-") as work:
            bundle = Path(work) / "bundle.tar"
            create_bundle(source, bundle)
            return check_bundle(bundle, policy_name, suite_roots=None).findings
    if source.suffix == ".py" and source.is_file():
        from grader.detect.policy import load_policy
        from grader.detect.static import analyze

        limit = IntakeLimits().max_member_bytes
        if source.stat().st_size > limit:
            raise BundleTooLarge(f"{source}: {source.stat().st_size} bytes, more than a "
                                 f"bundle's member may hold ({limit})",
                                 hint="a kernel file is source code: keep data out of it")
        text = source.read_bytes().decode("utf-8", "replace")
        return {str(source): analyze(text, str(source), load_policy(policy_name))}
    return check_bundle(source, policy_name, suite_roots=None).findings


@dataclass(frozen=True, kw_only=True)
class KernelFile:
    problem: str
    file: str
    size: int
    lines: int


@dataclass(frozen=True, kw_only=True)
class BundleCheck:
    """What `grader bundle check` found; the bundle itself was accepted by intake."""

    bundle: Path
    name: str
    suite: str
    dsl: str
    compressed_bytes: int
    members: int
    unpacked_bytes: int
    largest_member: int
    limits: IntakeLimits
    kernels: list[KernelFile]
    findings: dict[str, list[Finding]]
    unused_files: list[str] = field(default_factory=list)  # in kernels/, named by no problem
    suite_found: bool = False
    missing: list[str] = field(default_factory=list)  # suite problems without a kernel
    ignored: list[str] = field(default_factory=list)  # kernels for problems not in the suite
    # Kernel files the harness could not import or find the entry point in (kernel_check).
    kernel_errors: list[str] = field(default_factory=list)
    suite_problems: list[str] = field(default_factory=list)  # when the suite was found

    @property
    def blocking(self) -> list[tuple[str, Finding]]:
        return [(f, x) for f, items in self.findings.items() for x in items
                if x.severity in BLOCKING]


def check_bundle(bundle: Path, policy_name: str,
                 suite_roots: list[Path] | None) -> BundleCheck:
    """Intake, layout and static analysis of `bundle`; suite coverage if `suite_roots`.

    A refused bundle raises its BundleError (exit codes 10-15), exactly as `grader run` would.
    """
    from grader.detect.policy import load_policy
    from grader.detect.static import analyze

    pol = load_policy(policy_name)
    limits = IntakeLimits()
    tmp = Path(tempfile.mkdtemp(prefix="grader-check-"))
    try:
        sub = open_bundle(bundle, tmp / "b", limits)
        files = {p.relative_to(sub.root).as_posix(): p.stat().st_size
                 for p in sub.root.rglob("*") if p.is_file()}
        sources = sub.kernel_sources()
        entries = sub.manifest.problems
        kernels = [KernelFile(problem=pid, file=e.file, size=files[e.file],
                              lines=len(sources[pid].splitlines()))
                   for pid, e in entries.items()]
        findings = {entries[pid].file: analyze(src, entries[pid].file, pol)
                    for pid, src in sources.items()}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    named = {e.file for e in entries.values()} | {MANIFEST}
    info = sub.manifest.submission
    suite = _find(info.suite, suite_roots)
    found, missing, ignored = _coverage(suite, list(entries))
    errors = [err for pid, src in sources.items()
              if (err := kernel_problem(src, entries[pid].file, _entry_names(suite, pid)))]
    return BundleCheck(
        bundle=bundle, name=info.name, suite=info.suite, dsl=info.dsl,
        compressed_bytes=bundle.stat().st_size, members=len(files),
        unpacked_bytes=sum(files.values()), largest_member=max(files.values(), default=0),
        limits=limits, kernels=kernels, findings=findings,
        unused_files=sorted(set(files) - named), suite_found=found, missing=missing,
        ignored=ignored, kernel_errors=errors,
        suite_problems=list(suite.problems) if suite else [])


def _find(suite_name: str, roots: list[Path] | None) -> Suite | None:
    from grader.suite.load import find_suite

    if roots is None:
        return None
    try:
        return find_suite(suite_name, roots)
    except GraderError:  # participants may not have the suite; coverage is a courtesy
        return None


def _entry_names(suite: Suite | None, problem: str) -> tuple[str, ...]:
    """What the harness looks up in `problem`'s kernel; without the suite, any entry point
    the grader knows (a function problem's kernel(), a module problem's default classes)."""
    if suite is not None and problem in suite.problems:
        return suite.problems[problem].problem.entry_names()
    from grader.formats.problem import DEFAULT_ENTRY_CLASSES

    return ("kernel", *DEFAULT_ENTRY_CLASSES)


def _coverage(suite: Suite | None, problems: list[str]) -> tuple[bool, list[str], list[str]]:
    if suite is None:
        return False, [], []
    return (True, [p for p in suite.problems if p not in problems],
            sorted(set(problems) - set(suite.problems)))


def _size(n: int) -> str:
    if n < 10_000:
        return f"{n} B"
    return f"{n / 1024:.0f} KiB" if n < 1 << 20 else f"{n / (1 << 20):.1f} MiB"


def render_check(c: BundleCheck) -> list[str]:
    """The lines `grader bundle check` prints (pure, for tests)."""
    lim = c.limits
    out = [f"bundle: {c.bundle} ({_size(c.compressed_bytes)})",
           f"submission: {c.name!r} for suite {c.suite}, dsl {c.dsl}",
           f"layout: {c.members} file(s) of at most {lim.max_members}; "
           f"{_size(c.unpacked_bytes)} unpacked of at most {_size(lim.max_total_bytes)}; "
           f"largest {_size(c.largest_member)} of at most {_size(lim.max_member_bytes)}"]
    for k in c.kernels:
        out.append(f"  {k.problem:<24} {k.file:<40} {k.lines:>5} lines {_size(k.size):>8}")
    for name in c.unused_files:
        out.append(f"  note: {name} is named by no problem in {MANIFEST}; it is shipped but "
                   "never graded on its own")
    if c.suite_found:
        if c.missing:
            out.append(f"suite {c.suite}: no kernel for {', '.join(c.missing)} (graded "
                       "`missing`)")
        if c.ignored:
            out.append(f"suite {c.suite}: has no problem {', '.join(c.ignored)} (choose among "
                       f"{', '.join(c.suite_problems)})")
        if not c.missing and not c.ignored:
            out.append(f"suite {c.suite}: every problem has a kernel")
    else:
        out.append(f"suite {c.suite}: not found here; problem coverage not checked")
    out += [f"error: {e}" for e in c.kernel_errors]
    total = 0
    for fname, items in c.findings.items():
        for f in items:
            total += 1
            out.append(f"{fname}:{f.line or 0}: {f.severity.value:<9} {f.rule} {f.message}")
    if c.kernel_errors:  # issue 34: "0 blocking" above a refusal read as a pass
        out.append(f"static analysis: {total} finding(s); refused all the same: "
                   f"{len(c.kernel_errors)} kernel file(s) would not import (error: above)")
    else:
        out.append(f"static analysis: {total} finding(s), {len(c.blocking)} blocking "
                   f"({'/'.join(sorted(s.value for s in BLOCKING))})")
    return out


def gate(c: BundleCheck) -> None:
    """Raise what `grader run` would otherwise only show as verdicts: a kernel file that
    cannot be imported (KernelSourceError), a problem the suite lacks (ManifestError), a
    blocking static finding (FindingsGate)."""
    if c.kernel_errors:
        more = f" (and {len(c.kernel_errors) - 1} more above)" if len(c.kernel_errors) > 1 else ""
        raise KernelSourceError(
            f"{c.bundle}: {c.kernel_errors[0]}{more}; the grader would grade it compile_error",
            hint="fix the file (python -c 'import ast,sys; ast.parse(open(sys.argv[1]).read())' "
            "FILE shows a syntax error) and define the entry point the problem's spec names "
            "(kernel(...) for a function problem)")
    if c.ignored:
        raise ManifestError(
            f"{c.bundle}:{MANIFEST}: problem(s) {', '.join(c.ignored)} not in suite {c.suite}; "
            "the grader would ignore those kernels",
            hint="rename the [problems.ID] tables to the suite's problem ids (the suite's "
            "README.md lists them), or set [submission].suite to the right suite")
    if not c.blocking:
        return
    fname, first = c.blocking[0]
    raise FindingsGate(
        f"{c.bundle}: {len(c.blocking)} static finding(s) would keep kernels from `passed`, "
        f"first {fname}:{first.line or 0} {first.rule} ({first.severity.value}): "
        f"{first.message}",
        hint="rewrite that code in the submission's DSL (docs/detection.md explains each "
        "rule); the grader would grade those shapes fallback, policy_violation or tampering")
