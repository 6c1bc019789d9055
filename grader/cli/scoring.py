"""The scoring commands: hardware profiles, roofline derivation, leaderboards, comparisons
across hardware, release kits and re-scoring of saved reports."""

from __future__ import annotations

import json
from pathlib import Path

import click

from grader.cli.options import suites_option


@click.group()
def hardware() -> None:
    """Hardware profiles: peak FLOP/s per dtype and bandwidth, each with its source."""


@hardware.command("list")
def hardware_list() -> None:
    """List the profiles."""
    from grader.scoring.hardware import list_hardware
    from grader.terminal import render, table, width

    rows = [[p.name, p.vendor, p.description + ("" if p.is_performance
                                                else " (not a performance profile)")]
            for p in list_hardware()]
    click.echo(render(table(["profile", "vendor", "description"], rows, left=3),
                      width=width()), nl=False)


@hardware.command("show")
@click.argument("name")
def hardware_show(name: str) -> None:
    """Print profile NAME with the source of every number."""
    from grader.scoring.hardware import hardware_text, load_hardware

    click.echo(hardware_text(load_hardware(name)), nl=False)


@hardware.command("calibrate")
@click.option("--base", default="auto", show_default=True,
              help="Profile to add the measurements to; auto: matched to the GPU's name.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write the profile (default: print it).")
def hardware_calibrate(base: str, output: Path | None) -> None:
    """Measure this GPU's copy bandwidth and bf16 matmul rate; write them as `[measured]`."""
    from grader.errors import UsageError
    from grader.scoring.apply import profile_for_device
    from grader.scoring.calibrate import calibrated_profile, measure

    cal = measure()
    name = profile_for_device(cal.device) if base == "auto" else base
    if name is None:
        raise UsageError(f"no profile matches {cal.device!r}", hint="name one with --base")
    text = calibrated_profile(name, cal)
    click.echo(f"{cal.device}: copy {cal.copy_bytes_per_s / 1e12:.2f} TB/s, bf16 matmul "
               f"{cal.bf16_flops_per_s / 1e12:.0f} TFLOP/s", err=True)
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text)
        click.echo(f"profile: {output}", err=True)


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
    from grader.terminal import render, table, width

    rows = check(problem_dir, shapes=list(shapes) or None, rtol=rtol, device=device)
    cells = [[r.shape, f"{r.expr_flops:.4g}", f"{r.derived_flops:.4g}", f"{r.expr_bytes:.4g}",
              f"{r.derived_bytes:.4g}", "yes" if r.ok else "NO"] for r in rows]
    header = ["shape", "flops expr", "derived", "bytes expr", "derived", "ok"]
    click.echo(render(table(header, cells), width=width()), nl=False)
    bad = [r for r in rows if not r.ok]
    if bad:
        from grader.errors import RooflineMismatch

        first = bad[0]
        raise RooflineMismatch(
            f"{problem_dir / 'problem.toml'}: the flops or bytes expression disagrees with the "
            f"reference's count on {len(bad)} of {len(rows)} shape(s) (rtol {rtol:g}), first "
            f"{first.shape}: flops {first.expr_flops:.4g} written, {first.derived_flops:.4g} "
            f"counted; bytes {first.expr_bytes:.4g} written, {first.derived_bytes:.4g} counted",
            hint="correct the expressions in problem.toml (the table shows each shape's "
            "numbers), or raise --rtol where the count itself is approximate")


def _board_formats(value: str | None) -> tuple[str, ...]:
    names = tuple(f.strip() for f in (value or "").split(",") if f.strip())
    bad = [f for f in names if f not in ("json", "md", "html")]
    if bad:
        raise click.BadParameter(f"unknown format {bad[0]!r}; choose from json, md, html")
    return names


@click.command()
@click.argument("reports", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--allow-mixed", is_flag=True,
              help="Rank reports from different suites, weights, policies or hardware anyway.")
@click.option("--json", "as_json", is_flag=True, help="Print the leaderboard as JSON.")
@click.option("--format", "formats", default=None, metavar="json,md,html",
              callback=lambda c, p, v: _board_formats(v),
              help="Also write the board as leaderboard.{json,md,html} into -o.")
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("."), show_default=True, help="Folder for --format's files.")
def leaderboard(reports: tuple[Path, ...], allow_mixed: bool, as_json: bool,
                formats: tuple[str, ...], out_dir: Path) -> None:
    """Rank graded reports: most shapes passed first, then fewest fallback/violation shapes,
    then S_agg; a column per verdict group and per problem, and one saying which shapes
    were graded (smoke shapes only, on a CPU). Reports from a CPU run carry no timing (every
    S is 0): the board then says so and ranks by verdicts alone."""
    from grader.errors import UsageError
    from grader.report.render import load_report
    from grader.scoring.leaderboard import Scored, leaderboard_text
    from grader.scoring.leaderboard import leaderboard as rank
    from grader.terminal import width

    entries = []
    for path in reports:
        rep = load_report(path)
        if rep.scores is None:
            raise UsageError(f"{path}: has no scores", hint="re-grade it with this version")
        entries.append(Scored.from_report(rep))
    board = rank(entries, allow_mixed=allow_mixed)
    if formats:
        from grader.grading.checkpoint import host_fs
        from grader.report.leaderboard import RENDERERS

        with host_fs(f"cannot write the leaderboard into {out_dir}"):
            out_dir.mkdir(parents=True, exist_ok=True)
            for fmt in formats:
                name, render = RENDERERS[fmt]
                (out_dir / name).write_text(render(board), encoding="utf-8")
                click.echo(f"{fmt}: {out_dir / name}", err=True)
    if as_json:
        click.echo(json.dumps(board.model_dump(mode="json"), indent=2))
        return
    if not board.timed:
        click.echo("warning: " + board.notes[0], err=True)
    click.echo(leaderboard_text(board, width=width()), nl=False)


@click.command()
@click.argument("reports", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--allow-mixed", is_flag=True,
              help="Compare reports that are not one entry scored the same way: different "
              "bundles (two entries: the ratios then compare entries, not machines), suites, "
              "weights versions or policies. The output notes what differs.")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
def compare(reports: tuple[Path, ...], allow_mixed: bool, as_json: bool) -> None:
    """One entry on several machines: S_i per problem on each, and its portability (S_i on a
    report over S_i on the first). Each column names its machine and its submission. Two
    different entries: pass --allow-mixed (see below)."""
    from grader.report.render import load_report
    from grader.scoring.across import compare as run_compare
    from grader.scoring.across import comparison_text
    from grader.terminal import width

    cmp = run_compare([load_report(p) for p in reports], allow_mixed=allow_mixed)
    click.echo(json.dumps(cmp.model_dump(), indent=2) if as_json
               else comparison_text(cmp, width=width()), nl=as_json)


def _suite_roots(suite_roots: tuple[Path, ...]) -> list[Path]:
    from grader.suite.roots import suite_roots as roots

    return list(roots(suite_roots))


@click.command()
@click.argument("suite")
@click.option("-o", "--out", "out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The kit to write, e.g. kit.tar.")
@click.option("--no-run-check", is_flag=True,
              help="Check only that each reference imports (for references that need a GPU); "
              "by default each also runs once on the CPU on its smallest shape.")
@suites_option
def release(suite: str, out: Path, suite_roots: tuple[Path, ...], no_run_check: bool) -> None:
    """Write the kit agents get for SUITE: specs, references, public shapes; nothing hidden.
    Refuses (exit 21) a suite whose reference does not import or fails on its smallest
    shape on the CPU."""
    from grader.organiser.release_kit import release as release_kit
    from grader.suite.lint import warnings
    from grader.suite.load import find_suite

    found = find_suite(suite, _suite_roots(suite_roots))
    checked, kit = release_kit(found, run=not no_run_check)
    click.echo(f"self-check: {checked} reference(s) "
               f"{'imported' if no_run_check else 'imported and run on the CPU'}", err=True)
    for line in warnings(found):  # shipped all the same: a TODO may be meant
        click.echo(f"warning: {line}", err=True)
    out.write_bytes(kit)
    click.echo(f"kit: {out} ({len(kit)} bytes)")


@click.command()
@click.argument("report_json", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--weights", "weights_path", type=click.Path(exists=True, dir_okay=False,
              path_type=Path), default=None, help="A weights.toml (default: the suite's).")
@click.option("--hardware", "hardware_name", default=None,
              help="Hardware profile (default: the report's).")
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="Folder for the new report (default: rescored/ beside it).")
@suites_option
def rescore(report_json: Path, weights_path: Path | None, hardware_name: str | None,
            out_dir: Path | None, suite_roots: tuple[Path, ...]) -> None:
    """Re-score a saved report with new weights or hardware, without re-running anything."""
    from grader.report.render import load_report, write_reports
    from grader.scoring.hardware import load_hardware
    from grader.scoring.rescore import load_weights, report_suite
    from grader.scoring.rescore import rescore as run_rescore

    rep = load_report(report_json)
    suite = report_suite(rep, _suite_roots(suite_roots))
    weights = load_weights(weights_path, suite) if weights_path else None
    profile = load_hardware(hardware_name or rep.environment.hardware)
    new = run_rescore(rep, suite, profile, weights)
    out = out_dir or report_json.parent / "rescored"
    for fmt, path in write_reports(new, out, ["json", "html"]).items():
        click.echo(f"{fmt}: {path}")
    s = new.scores.s_agg if new.scores else None
    click.echo(f"S_agg: {'-' if s is None else f'{s:.4f}'} (weights {new.suite.weights_version}, "
               f"hardware {profile.name})")


def register(cli: click.Group) -> None:
    for cmd in (hardware, roofline, leaderboard, compare, release, rescore):
        cli.add_command(cmd)
