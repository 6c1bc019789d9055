"""A round's entries: found among the paths given, named uniquely, staged as bundles.

Each path is a bundle (a tar), a submission folder (with submission.toml: packed the way
`grader bundle create` packs it), or a folder of those. An entry's name is its file's or
folder's name, reduced to characters safe in a folder name; names that collide get `-2`,
`-3`... and the round says so. Each entry's bundle is copied into `ROUND_DIR/bundles/` so
that the round folder holds what was graded, and its sha256 is taken from that copy.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from grader.errors import GraderError, UsageError
from grader.intake.bundle import MANIFEST, open_bundle
from grader.intake.tools import create_bundle

# A bundle's own caps are the intake's (8 MiB unpacked); a file far larger than any bundle
# can be is refused before it is copied.
MAX_BUNDLE_FILE = 64 << 20
NAME_CHARS = re.compile(r"[^A-Za-z0-9._-]+")
MAX_NAME = 64


@dataclass(frozen=True, kw_only=True)
class Found:
    name: str  # unique in the round, safe as a folder name
    source: Path
    renamed_from: str | None = None  # the name it would have had, when that collided


@dataclass(frozen=True, kw_only=True)
class Staged:
    """An entry ready to grade (bundle set) or refused before grading (error set)."""

    name: str
    source: Path
    renamed_from: str | None
    bundle: Path | None = None
    sha256: str | None = None
    declared_name: str | None = None  # [submission] name: the entry's own words
    error: str | None = None


def safe_name(raw: str) -> str:
    name = NAME_CHARS.sub("-", raw).strip(".-")[:MAX_NAME].rstrip(".-")
    return name or "entry"


def _candidates(path: Path) -> list[tuple[str, Path]]:
    if path.is_file():
        return [(path.name.removesuffix(".tar").removesuffix(".tgz").removesuffix(".tar.gz"),
                 path)]
    if path.is_dir() and (path / MANIFEST).is_file():
        return [(path.name, path)]
    if path.is_dir():
        found = [(c.name.removesuffix(".tar"), c) for c in sorted(path.iterdir())
                 if (c.is_file() and c.name.endswith(".tar"))
                 or (c.is_dir() and (c / MANIFEST).is_file())]
        if not found:
            raise UsageError(f"{path}: no bundle (*.tar) or submission folder in it",
                             hint="pass bundles, submission folders, or a folder of them")
        return found
    raise UsageError(f"{path}: no such file or folder")


def find_entries(paths: list[Path]) -> list[Found]:
    """The entries among `paths`, in the order given, each with a unique name."""
    if not paths:
        raise UsageError("no entries", hint="pass bundles, submission folders, or a folder "
                         "of them")
    out: list[Found] = []
    taken: set[str] = set()
    for path in paths:
        for raw, source in _candidates(path):
            base = safe_name(raw)
            name, n = base, 1
            while name.lower() in taken:  # case-folded: folders on some filesystems are
                n += 1
                name = f"{base}-{n}"
            taken.add(name.lower())
            out.append(Found(name=name, source=source,
                             renamed_from=None if name == raw else raw))
    return out


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def stage(found: Found, bundles_dir: Path, suite_id: str) -> Staged:
    """Copy (or pack) the entry's bundle into `bundles_dir` and read it through the intake;
    an entry the intake refuses, or one of another suite, is refused here with the reason
    (it is listed on the leaderboard, unscored): never an error of the round."""
    dest = bundles_dir / f"{found.name}.tar"
    base = {"name": found.name, "source": found.source, "renamed_from": found.renamed_from}
    try:
        if found.source.is_dir():
            create_bundle(found.source, dest)
        else:
            if found.source.stat().st_size > MAX_BUNDLE_FILE:
                raise UsageError(f"larger than {MAX_BUNDLE_FILE >> 20} MiB")
            shutil.copyfile(found.source, dest)
        with tempfile.TemporaryDirectory(prefix="grader-round-") as tmp:
            sub = open_bundle(dest, Path(tmp) / "b")
        declared, suite = sub.manifest.submission.name, sub.manifest.submission.suite
        if suite != suite_id:
            raise UsageError(f"a bundle for suite {suite!r}, not {suite_id!r}")
    except GraderError as exc:
        return Staged(**base, error=exc.message)  # type: ignore[arg-type]
    except OSError as exc:
        return Staged(**base, error=f"cannot read it: {exc.strerror or exc}")  # type: ignore[arg-type]
    return Staged(**base, bundle=dest, sha256=sha256_file(dest),  # type: ignore[arg-type]
                  declared_name=declared)
