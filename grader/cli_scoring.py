"""The scoring commands: hardware profiles, roofline derivation, leaderboards."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click


@click.group()
def hardware() -> None:
    """Hardware profiles: peak FLOP/s per dtype and bandwidth, each with its source."""


@hardware.command("list")
def hardware_list() -> None:
    """List the profiles."""
    from grader.scoring.hardware import list_hardware

    for p in list_hardware():
        perf = "" if p.is_performance else "  (not a performance profile)"
        click.echo(f"{p.name:<16} {p.vendor:<7} {p.description[:70]}{perf}")


@hardware.command("show")
@click.argument("name")
def hardware_show(name: str) -> None:
    """Print profile NAME with the source of every number."""
    from grader.scoring.hardware import hardware_text, load_hardware

    click.echo(hardware_text(load_hardware(name)), nl=False)


@click.group()
def roofline() -> None:
    """Roofline numbers of problems."""


@roofline.command("derive")
@click.argument("problem_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--shape", "shapes", multiple=True, help="Only these shapes (default: all).")
@click.option("--rtol", type=float, default=0.01, show_default=True)
@click.option("--device", default="meta", show_default=True,
              help="Where to run the reference: meta (instant, any size) or cpu.")
def roofline_derive(problem_dir: Path, shapes: tuple[str, ...], rtol: float, device: str) -> None:
    """Count the reference's FLOPs and unique bytes and check problem.toml's expressions."""
    from grader.scoring.derive import check

    rows = check(problem_dir, shapes=list(shapes) or None, rtol=rtol, device=device)
    click.echo(f"{'shape':<28} {'flops expr':>14} {'derived':>14} {'bytes expr':>14} "
               f"{'derived':>14}  ok")
    for r in rows:
        click.echo(f"{r.shape:<28} {r.expr_flops:>14.4g} {r.derived_flops:>14.4g} "
                   f"{r.expr_bytes:>14.4g} {r.derived_bytes:>14.4g}  {'yes' if r.ok else 'NO'}")
    if not all(r.ok for r in rows):
        sys.exit(1)


@click.command()
@click.argument("reports", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--allow-mixed", is_flag=True,
              help="Rank reports from different suites, weights, policies or hardware anyway.")
@click.option("--json", "as_json", is_flag=True, help="Print the leaderboard as JSON.")
def leaderboard(reports: tuple[Path, ...], allow_mixed: bool, as_json: bool) -> None:
    """Rank graded reports by S_agg, with a column per problem."""
    from grader.errors import UsageError
    from grader.report.render import load_report
    from grader.scoring.leaderboard import Scored
    from grader.scoring.leaderboard import leaderboard as rank

    entries = []
    for path in reports:
        rep = load_report(path)
        if rep.scores is None:
            raise UsageError(f"{path}: has no scores", hint="re-grade it with this version")
        entries.append(Scored.from_card(rep.scores, submission=rep.submission.name,
                                        suite=rep.suite.id, policy=rep.environment.policy,
                                        hardware=rep.environment.hardware))
    board = rank(entries, allow_mixed=allow_mixed)
    if as_json:
        click.echo(json.dumps(board.model_dump(), indent=2))
        return
    click.echo(f"{'#':>3} {'submission':<28} {'S_agg':>7} " +
               " ".join(f"{p[:10]:>10}" for p in board.problems))
    for row in board.rows:
        cells = " ".join(f"{'-' if v is None else f'{v:.3f}':>10}"
                         for v in (row.problems.get(p) for p in board.problems))
        s = "-" if row.s_agg is None else f"{row.s_agg:.3f}"
        click.echo(f"{row.rank:>3} {row.submission[:28]:<28} {s:>7} {cells}")


def register(cli: click.Group) -> None:
    for cmd in (hardware, roofline, leaderboard):
        cli.add_command(cmd)
