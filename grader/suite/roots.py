"""Where suites are looked for, the same way in every command (issue 34: a suite in a folder
of one's own was found by `round commit --suite DIR` and by no command after it).

A suite is named by its id (a bundle's submission.toml, a report, a round's manifest) or by
its folder. Ids are looked up, in order, under:

  1. the parent of a suite folder given by --suite (it is that suite's home);
  2. each --suites folder: a folder of suites, or one suite's own folder (its parent counts);
  3. each folder of $GRADER_SUITES (os.pathsep-separated, as PATH), read the same way;
  4. the checkout's problem_bundles/.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from grader.paths import PROBLEM_BUNDLES

ENV = "GRADER_SUITES"


def _as_root(path: Path) -> Path:
    """A folder of suites; one suite's own folder (it holds suite.toml) stands for its
    parent, so that `--suites my-suite` and `--suites .` (its parent) both work."""
    return path.resolve().parent if (path / "suite.toml").is_file() else path


def env_roots() -> tuple[Path, ...]:
    raw = os.environ.get(ENV, "")
    return tuple(Path(p) for p in raw.split(os.pathsep) if p.strip())


def suite_folder(suite: str | None) -> Path | None:
    """`suite` when it names a suite's folder (one with suite.toml), resolved; else None (an
    id, or nothing)."""
    if suite is None or not (Path(suite) / "suite.toml").is_file():
        return None
    return Path(suite).resolve()


def suite_roots(given: Iterable[Path] = (), *, suite: str | None = None) -> tuple[Path, ...]:
    """The folders a suite id is looked up under, in order (the module's docstring), without
    repeats."""
    home = suite_folder(suite)
    roots = [*((home.parent,) if home else ()), *(_as_root(p) for p in given),
             *(_as_root(p) for p in env_roots()), PROBLEM_BUNDLES]
    return tuple(dict.fromkeys(roots))


def suite_id(suite: str) -> str:
    """The id that `suite` (an id or a suite's folder) names."""
    home = suite_folder(suite)
    return home.name if home else suite
