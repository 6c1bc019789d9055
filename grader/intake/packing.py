"""`grader run FOLDER` and `grader run kernel.py --problem ID --suite S`: what participants and
agents have at hand, packed on the fly through the same `bundle create` and intake as a tar
(issue 23: `grader run FOLDER` said "no such file")."""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from grader.errors import UsageError
from grader.intake.bundle import MANIFEST
from grader.suite.scaffold import PROBLEM_ID


@dataclass(frozen=True, kw_only=True)
class Packed:
    bundle: Path  # the tar to grade
    suite_roots: tuple[Path, ...]  # with a --suite folder's parent first, when one was given


def _manifest(name: str, suite: str, problem: str) -> str:
    # The ids match PROBLEM_ID (no quote, no backslash); the name is made to.
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:120] or "kernel"
    return (f'[submission]\nname = "{name}"\nsuite = "{suite}"\n\n'
            f'[problems."{problem}"]\nfile = "kernels/{problem}.py"\n')


@contextmanager
def packed(source: Path, *, problems: tuple[str, ...], suite: str | None,
           suite_roots: tuple[Path, ...]) -> Iterator[Packed]:
    """`source` as a bundle for the time of the block: a tar as it is, a submission folder
    packed, one kernel file packed with a manifest naming `problems[0]` of `suite`."""
    if not source.is_dir() and source.suffix != ".py":  # a tar (intake says if it is not)
        if suite is not None:
            raise UsageError("--suite is for grading one kernel file; a bundle names its suite "
                             "in submission.toml", hint="leave --suite out")
        yield Packed(bundle=source, suite_roots=suite_roots)
        return
    if not source.exists():
        raise UsageError(f"{source}: no such file or folder",
                         hint="pass a bundle (.tar), a submission folder (submission.toml and "
                         "kernels/), or one kernel file with --problem ID --suite SUITE")
    from grader.intake.tools import create_bundle

    work = Path(tempfile.mkdtemp(prefix="grader-pack-"))
    try:
        if source.is_dir():
            if suite is not None:
                raise UsageError("--suite is for grading one kernel file; the folder's "
                                 f"{MANIFEST} names its suite", hint="leave --suite out")
            create_bundle(source, work / "bundle.tar")
            yield Packed(bundle=work / "bundle.tar", suite_roots=suite_roots)
            return
        if len(problems) != 1 or suite is None:
            raise UsageError(f"{source}: one kernel file needs --problem ID (one) and "
                             "--suite SUITE", hint=f"e.g. grader run {source} --problem "
                             "vector_add --suite demo")
        problem, roots, suite_id = problems[0], suite_roots, suite
        suite_path = Path(suite)
        if (suite_path / "suite.toml").is_file():  # a folder: found by its name, first there
            suite_id = suite_path.resolve().name
            roots = (suite_path.resolve().parent, *suite_roots)
        if not PROBLEM_ID.fullmatch(problem) or not PROBLEM_ID.fullmatch(suite_id):
            raise UsageError(f"--problem {problem!r} / --suite {suite_id!r}: not a valid id",
                             hint="use the ids the suite's problem.toml files give")
        folder = work / "submission"
        (folder / "kernels").mkdir(parents=True)
        (folder / MANIFEST).write_text(_manifest(source.stem, suite_id, problem),
                                       encoding="utf-8")
        shutil.copyfile(source, folder / "kernels" / f"{problem}.py")
        create_bundle(folder, work / "bundle.tar")
        yield Packed(bundle=work / "bundle.tar", suite_roots=roots)
    finally:
        shutil.rmtree(work, ignore_errors=True)
