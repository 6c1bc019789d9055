"""`grader run FOLDER` and `grader run kernel.py --problem ID --suite S`: what participants and
agents have at hand, packed on the fly through the same `bundle create` and intake as a tar
(issue 23: `grader run FOLDER` said "no such file"). Where the suite is found is the run
config's (suite/roots.py), whichever of the three is graded."""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from grader.errors import UsageError
from grader.intake.bundle import MANIFEST, Submission
from grader.suite.roots import suite_id
from grader.suite.scaffold import PROBLEM_ID


def _manifest(name: str, suite: str, problem: str) -> str:
    # The ids match PROBLEM_ID (no quote, no backslash); the name is made to.
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:120] or "kernel"
    return (f'[submission]\nname = "{name}"\nsuite = "{suite}"\n\n'
            f'[problems."{problem}"]\nfile = "kernels/{problem}.py"\n')


def same_suite(sub: Submission, suite: str | None, shown_as: Path) -> None:
    """--suite beside a bundle or a folder (which name their suite themselves) says where
    that suite is; one that names another suite is refused rather than graded elsewhere.
    Checked on the submission the run opens once (issue 33), not on an opening of its own."""
    if suite is None:
        return
    named = sub.manifest.submission.suite
    if named != suite_id(suite):
        raise UsageError(f"--suite {suite}: {shown_as} is a submission for suite {named!r}, "
                         f"not {suite_id(suite)!r}",
                         hint=f"leave --suite out, or pass suite {named!r} (its id or folder)")


@contextmanager
def packed(source: Path, *, problems: tuple[str, ...], suite: str | None) -> Iterator[Path]:
    """`source` as a bundle for the time of the block: a tar as it is, a submission folder
    packed, one kernel file packed with a manifest naming `problems[0]` of `suite` (an id or
    a suite's folder; beside a tar or a folder, the suite they name is checked by `same_suite`
    once the run has opened the bundle)."""
    if not source.is_dir() and source.suffix != ".py":  # a tar (intake says if it is not)
        yield source
        return
    if not source.exists():
        raise UsageError(f"{source}: no such file or folder",
                         hint="pass a bundle (.tar), a submission folder (submission.toml and "
                         "kernels/), or one kernel file with --problem ID --suite SUITE")
    from grader.intake.tools import create_bundle

    work = Path(tempfile.mkdtemp(prefix="grader-pack-"))
    try:
        if source.is_dir():
            create_bundle(source, work / "bundle.tar")
            yield work / "bundle.tar"
            return
        if len(problems) != 1 or suite is None:
            raise UsageError(f"{source}: one kernel file needs --problem ID (one) and "
                             "--suite SUITE", hint=f"e.g. grader run {source} --problem "
                             "vector_add --suite demo")
        problem, sid = problems[0], suite_id(suite)
        if not PROBLEM_ID.fullmatch(problem) or not PROBLEM_ID.fullmatch(sid):
            raise UsageError(f"--problem {problem!r} / --suite {sid!r}: not a valid id",
                             hint="use the ids the suite's problem.toml files give")
        folder = work / "submission"
        (folder / "kernels").mkdir(parents=True)
        (folder / MANIFEST).write_text(_manifest(source.stem, sid, problem), encoding="utf-8")
        shutil.copyfile(source, folder / "kernels" / f"{problem}.py")
        create_bundle(folder, work / "bundle.tar")
        yield work / "bundle.tar"
    finally:
        shutil.rmtree(work, ignore_errors=True)
