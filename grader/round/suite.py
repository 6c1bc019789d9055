"""Which suite a round grades against, found the same way by every command that reads the
round (issue 34: `grader round A.tar B.tar` after `round commit --suite DIR` failed every
entry, and `round verify`, `grader verify` needed `--suites PARENT` again).

In order: --suite (an id or a folder); the folder the round recorded when it was committed
or started (ROUND_DIR/suite.path); the id its commitment or manifest names, under the suite
roots (suite/roots.py); the one suite the entries' own submission.toml files name.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from grader.errors import GraderError, UsageError
from grader.formats._base import load_toml
from grader.formats.submission import Manifest as SubmissionManifest
from grader.intake.bundle import MANIFEST, open_bundle
from grader.round.entries import find_entries
from grader.round.store import RoundDir
from grader.suite.load import Suite, find_suite, load_suite
from grader.suite.roots import suite_roots


def of_round(rd: RoundDir, suite_id: str, roots: tuple[Path, ...]) -> Suite:
    """The suite `suite_id` of round `rd`: the folder it recorded when that still holds the
    suite, else found by id under `roots`."""
    folder = rd.suite_folder()
    if folder is not None and folder.name == suite_id:
        return load_suite(folder)
    return find_suite(suite_id, list(suite_roots(roots)))


def _named(source: Path) -> str | None:
    """The suite an entry's submission.toml names; None when it cannot be read (the entry is
    refused with the reason when it is staged)."""
    try:
        if source.is_dir():
            return load_toml(source / MANIFEST, SubmissionManifest, UsageError).submission.suite
        with tempfile.TemporaryDirectory(prefix="grader-round-") as tmp:
            return open_bundle(source, Path(tmp) / "b").manifest.submission.suite
    except (GraderError, OSError):
        return None


def entries_suite(paths: tuple[Path, ...]) -> str:
    """The one suite the entries at `paths` name (every bundle names its suite)."""
    named = sorted({s for f in find_entries(list(paths)) if (s := _named(f.source))})
    if len(named) != 1:
        raise UsageError("which suite? " + (f"the entries name {len(named)}: {', '.join(named)}"
                                            if named else "no entry's submission.toml reads"),
                         hint="pass --suite ID|DIR")
    return named[0]


def round_suite(rd: RoundDir, given: str | None, roots: tuple[Path, ...],
                paths: tuple[Path, ...]) -> Suite:
    """The suite a round (being committed, started or resumed) grades against."""
    if given is not None:
        return find_suite(given, list(suite_roots(roots, suite=given)))
    recorded = rd.load_commitment() or (rd.load_manifest() if rd.manifest_file.is_file()
                                        else None)
    if recorded is not None:
        return of_round(rd, recorded.suite.id, roots)
    if not paths:
        raise UsageError("which suite? pass --suite ID|DIR, or the entries (each names its "
                         "suite)")
    return find_suite(entries_suite(paths), list(suite_roots(roots)))
