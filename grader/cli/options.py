"""Option values the command groups share, parsed and checked (comma-separated lists)."""

from __future__ import annotations

from pathlib import Path

import click

from grader.report.render import FORMATS

# Every command that looks a suite up by id takes it the same way (grader/suite/roots.py).
suites_option = click.option(
    "--suites", "suite_roots", multiple=True, type=click.Path(path_type=Path),
    help="Folder(s) holding suites, or a suite's own folder; looked in before "
    "$GRADER_SUITES (folders, os.pathsep-separated) and the checkout's problem_bundles/.")


def formats_option(value: str) -> tuple[str, ...]:
    out = tuple(f.strip() for f in value.split(",") if f.strip())
    bad = [f for f in out if f not in FORMATS]
    if bad:
        raise click.BadParameter(f"unknown format {bad[0]!r}; choose from {', '.join(FORMATS)}")
    return out


def gpu_list(_ctx: click.Context, _param: click.Parameter, value: str | None
              ) -> tuple[int, ...] | None:
    """--gpus 0,1,3 -> (0, 1, 3)."""
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    if not items or not all(v.isdigit() and int(v) < 64 for v in items):
        raise click.BadParameter(f"{value!r}: expected GPU indices 0-63, comma-separated")
    return tuple(int(v) for v in items)
