"""`grader import atrex|kernelbench DIR -o OUT`: another benchmark as a suite of ours."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from grader.importers import ImportResult


def _options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed([
        click.argument("source", type=click.Path(path_type=Path)),
        click.option("-o", "--out", type=click.Path(file_okay=False, path_type=Path),
                     required=True, help="The suite folder to create (its name is the suite "
                     "id); must not exist, or be empty."),
        click.option("--suite-version", default="0.1.0", show_default=True,
                     help="Version of the suite and of its weights."),
        click.option("--seeds", type=click.IntRange(1, 32), default=2, show_default=True,
                     help="Input sets per shape (suite.toml seeds_per_shape)."),
        click.option("--timeout", type=click.FloatRange(1, 7200), default=300.0,
                     show_default=True, help="Wall-clock limit of each entry container, s."),
        click.option("--derive-device", type=click.Choice(["meta", "cpu"]), default="meta",
                     show_default=True, help="Where FLOPs and bytes the source does not give "
                     "are derived (the reference runs once per shape; meta computes nothing)."),
        click.option("--skip-bad", is_flag=True, help="Leave out (and list) problems that "
                     "cannot be imported, instead of stopping at the first."),
    ]):
        fn = option(fn)
    return fn


def _run(kind: str, source: Path, out: Path, suite_version: str, seeds: int, timeout: float,
         derive_device: str, skip_bad: bool) -> None:
    from grader.importers import ImportOptions, import_suite

    result = import_suite(kind, source, ImportOptions(
        out=out, version=suite_version, seeds_per_shape=seeds, timeout_s=timeout,
        derive_device=derive_device, skip_bad=skip_bad))
    for line in summary(result, out):
        click.echo(line)


def summary(result: ImportResult, out: Path) -> list[str]:
    suite = result.suite
    shapes = sum(len(b.problem.shapes) for b in suite.problems.values())
    lines = [f"imported {len(suite.problems)} problem(s), {shapes} shape(s) into {out} "
             f"(suite {suite.id})"]
    lines += [f"  {pid}: {len(b.problem.shapes)} shape(s), "
              f"{sum(s.smoke for s in b.problem.shapes)} smoke"
              for pid, b in suite.problems.items()]
    if result.derived:
        lines.append(f"derived flops/bytes: {', '.join(result.derived)}")
    lines += [f"note: {n}" for n in result.notes]
    lines += [f"skipped: {s}" for s in result.skipped]
    lines.append(f"next: grader run BUNDLE --suites {out.parent} (submission.toml: suite = "
                 f'"{suite.id}"; add --shapes all on a CPU for shapes not marked smoke)')
    return lines


@click.group("import")
def import_group() -> None:
    """Make a suite of ours from another benchmark's problems (docs/import.md)."""


@import_group.command("atrex")
@_options
def import_atrex(source: Path, out: Path, suite_version: str, seeds: int, timeout: float,
                 derive_device: str, skip_bad: bool) -> None:
    """SOURCE: an Atrex-Bench root (one folder per operator: reference.py, input.py,
    shapes.json, optional metadata.json and roofline.json; operator_importance.json)."""
    _run("atrex", source, out, suite_version, seeds, timeout, derive_device, skip_bad)


@import_group.command("kernelbench")
@_options
def import_kernelbench(source: Path, out: Path, suite_version: str, seeds: int,
                       timeout: float, derive_device: str, skip_bad: bool) -> None:
    """SOURCE: KernelBench problem files (<level>/<n>_<Name>.py), a folder of them or one."""
    _run("kernelbench", source, out, suite_version, seeds, timeout, derive_device, skip_bad)


def register(cli: click.Group) -> None:
    cli.add_command(import_group)
