"""The command line: parse, build a config, call one function, report errors once."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from grader import __version__
from grader.cli.options import (
    formats_option,
    gpu_list,
    grading_options,
    settings_options,
    suites_option,
    with_options,
)
from grader.cli.progress import LOG_FORMATS
from grader.errors import GraderError
from grader.report.render import FORMATS

if TYPE_CHECKING:
    from grader.verdicts import Verdict



ANY_FAILURE = "any-failure"  # --fail-on's shorthand: every verdict but passed (issue 34)


def _verdict_set(value: str) -> frozenset[Verdict]:
    from grader.verdicts import Verdict

    names = [v.strip() for v in value.split(",") if v.strip()]
    if ANY_FAILURE in names:
        return frozenset(Verdict) - {Verdict.PASSED}
    try:
        return frozenset(Verdict(n) for n in names)
    except ValueError:
        raise click.BadParameter(
            f"{value!r}: expected verdicts among {', '.join(v.value for v in Verdict)}, or "
            f"{ANY_FAILURE}") from None


def _gate(fail_on: frozenset[Verdict], require: frozenset[Verdict]) -> frozenset[Verdict]:
    """--fail-on's verdicts, and with --require every verdict it does not name."""
    from grader.verdicts import Verdict

    return fail_on | (frozenset(Verdict) - require if require else frozenset())


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="grader")
@click.option("--debug", is_flag=True, help="Show tracebacks for grader errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Grade GPU-kernel submissions in hardened containers, against trusted references."""
    ctx.obj = {"debug": debug}


@cli.command()
@click.argument("bundle", metavar="BUNDLE|FOLDER|KERNEL.py", type=click.Path(path_type=Path))
@click.option("-o", "--out", "out_dir", type=click.Path(path_type=Path), default=Path("reports"),
              show_default=True, help="Folder for the reports. A folder holding another "
              "submission's reports is refused (see --force); an earlier run's report files "
              "there are removed first.")
@click.option("--suite", "suite", default=None, metavar="ID|DIR",
              help="The suite, by id or folder: one KERNEL.py's (with --problem ID); a "
              "BUNDLE's or FOLDER's names its own, and --suite DIR says where it is.")
@click.option("--force", is_flag=True,
              help="Replace another submission's reports in -o.")
@click.option("--keep-checkpoint", is_flag=True,
              help="Keep -o/.checkpoint after a run that completed (it goes by default; it "
              "stays after a failure, and while a problem is infra_error, for --resume).")
@suites_option
@with_options(settings_options)
@click.option("--format", "formats", default="json,html", show_default=True, callback=lambda c,
              p, v: formats_option(v), help=f"Comma-separated, of: {', '.join(FORMATS)}.")
@click.option("--public", is_flag=True,
              help="Reports meant for publication (a CI summary): html, md and junit leave "
              "the entry's output out but for compile and runtime errors; report.json keeps it.")
@click.option("--fail-on", default="", callback=lambda c, p, v: _verdict_set(v),
              help="Exit 3 when any shape gets one of these verdicts (e.g. fallback,incorrect; "
              f"{ANY_FAILURE}: any verdict but passed).")
@click.option("--require", default="", callback=lambda c, p, v: _verdict_set(v),
              help="Exit 3 when any shape gets a verdict other than these (--require passed: "
              "the same as --fail-on any-failure).")
@click.option("-k", "keywords", multiple=True, metavar="TEXT",
              help="Grade only the shapes whose PROBLEM/SHAPE contains TEXT (repeat: any of "
              "them), as pytest's -k; a problem left no shape is not graded.")
@click.option("--last-failed", "--lf", "rerun_failed", is_flag=True,
              help="Grade again only the shapes that did not pass in -o's report.json, from "
              "the run before (all of them when none failed or there is none).")
@click.option("--seed-secret", default=None, help="Hex secret to reproduce a run's inputs.")
@click.option("--resume", is_flag=True,
              help="Finish the interrupted run checkpointed in -o: the same bundle and options; "
              "problems already graded are kept, infra errors are graded again.")
@click.option("--gpu", "gpus", type=click.IntRange(0, 63), multiple=True, default=[0],
              show_default=True, help="GPU to grade on; repeat for one worker per GPU.")
@click.option("--gpus", "gpu_list", callback=gpu_list, default=None, metavar="N,N,...",
              help="GPUs to grade on, comma-separated (0,1,2): the same as repeating --gpu.")
@click.option("--jobs", type=click.IntRange(1, 64), default=1, show_default=True,
              help="--device cpu: problems graded at once.")
@click.option("--sequential", is_flag=True,
              help="Start each problem's entry container only once its reference has exited "
              "(default: side by side, the entry importing while the reference computes).")
@click.option("--start-ahead", type=click.Choice(["auto", "on", "off"]), default="auto",
              show_default=True, help="Start each batch's containers while the one before "
              "runs (its cold imports made by then); auto: on hosts with 4 cores a worker.")
@click.option("--ahead-depth", type=click.IntRange(1, 4), default=2, show_default=True,
              help="Batches whose containers are started ahead at once: the wait for their "
              "set-up falls on one batch in this many.")
@click.option("--serve", is_flag=True,
              help="Run the entry's batches as workers of one serving container (a fresh "
              "process each, forked from one that has made the cold imports) instead of a "
              "container each (docs/architecture.md).")
@click.option("--time-beside", type=click.Choice(["auto", "on", "off"]), default="auto",
              show_default=True,
              help="Let timed loops run while the next batches' containers set up and the "
              "batch before is judged (off: they wait for both); auto: on hosts with 8 cores "
              "a worker (bench/beside_noise.py measures the difference).")
@click.option("--practice", is_flag=True,
              help="Practice: grade the public shapes only, with full diagnostics (errors, "
              "findings, fraction of roofline per shape); nothing hidden in any output.")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON summary on stdout (schema: `grader schema run`); the "
              "human lines go to stderr.")
@click.option("-q", "--quiet", is_flag=True,
              help="No progress lines (human ones show only when stderr is a terminal).")
@click.option("--log-format", type=click.Choice(LOG_FORMATS), default="human",
              show_default=True, help="Progress on stderr: human (only on a terminal) or "
              "json (one object per line: event, problem, stage, elapsed_s, eta_s, ts).")
def run(bundle: Path, out_dir: Path, suite_roots: tuple[Path, ...], policy: str, device: str,
        shapes: str, problems: tuple[str, ...], seeds: int | None, timeout: float | None,
        formats: tuple[str, ...], public: bool, fail_on: frozenset[Verdict],
        seed_secret: str | None,
        runtime: str, python: str | None, cuda_base: str | None, hardware: str,
        gpus: tuple[int, ...], gpu_list: tuple[int, ...] | None, jobs: int, quiet: bool,
        log_format: str, resume: bool, sequential: bool, start_ahead: str,
        ahead_depth: int, serve: bool, time_beside: str, suite: str | None,
        force: bool, keep_checkpoint: bool,
        practice: bool, as_json: bool, require: frozenset[Verdict],
        keywords: tuple[str, ...], rerun_failed: bool) -> None:
    """Grade a submission and write reports: BUNDLE (a tar), a FOLDER (submission.toml and
    kernels/, packed on the fly), or one KERNEL.py with --problem ID --suite SUITE."""
    from grader.cli.progress import for_cli
    from grader.grading.config import Presentation, RunOptions, Scheduling
    from grader.grading.runner import failed_summary, grade_bundle

    try:  # each stage refuses options that contradict each other (a UsageError)
        scheduling = Scheduling(gpus=tuple(dict.fromkeys(gpu_list or gpus)), jobs=jobs,
                                overlap=not sequential, start_ahead=start_ahead,
                                ahead_depth=ahead_depth, serve=serve,
                                time_beside=time_beside)
        grading = grading_options(
            bundle=bundle, out_dir=out_dir, suite_roots=suite_roots, seed_secret=seed_secret,
            policy=policy, device=device, runtime=runtime, python=python, cuda_base=cuda_base,
            hardware=hardware, shapes=shapes, problems=problems, seeds=seeds, timeout=timeout,
            scheduling=scheduling, resume=resume, keywords=keywords)
        show = Presentation(formats=formats, public=public, fail_on=_gate(fail_on, require),
                            quiet=quiet, log_format=log_format, json=as_json,
                            practice=practice, force=force, keep_checkpoint=keep_checkpoint)
        cfg = RunOptions(grading=grading, presentation=show, suite=suite)
    except GraderError as exc:
        if as_json:  # one summary object on stdout, also when the run fails
            click.echo(failed_summary(exc, practice=practice))
        raise
    if rerun_failed:
        from grader.grading.last_failed import last_failed

        cfg, said = last_failed(cfg)
        click.echo(said, err=True)
    grade_bundle(cfg, for_cli(log_format, quiet=quiet, json_out=as_json))


@cli.command()
@click.argument("name", type=click.Choice(["check", "bundle-check", "run"]))
def schema(name: str) -> None:
    """Print the JSON schema of `grader NAME --json`'s output (docs/formats.md)."""
    import json

    from grader.report.summaries import schema as json_schema

    click.echo(json.dumps(json_schema(name), indent=2))


@cli.command()
@click.argument("report_json", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--format", "formats", default="html", show_default=True,
              callback=lambda c, p, v: formats_option(v), help="Formats to write.")
@click.option("-o", "--out", "out_dir", type=click.Path(path_type=Path), default=None,
              help="Folder to write into (default: beside REPORT_JSON).")
@click.option("--public", is_flag=True,
              help="For publication: html, md and junit without the entry's output but for "
              "compile and runtime errors (json stays the full record).")
def report(report_json: Path, formats: tuple[str, ...], out_dir: Path | None, public: bool
           ) -> None:
    """Re-render a report.json into other formats."""
    from grader.report.render import load_report, write_reports

    rep = load_report(report_json)
    for fmt, path in write_reports(rep, out_dir or report_json.parent, list(formats),
                                   public=public).items():
        click.echo(f"{fmt}: {path}")


def main() -> None:
    from grader.cli import imports as cli_import
    from grader.cli import scoring as cli_scoring
    from grader.cli import suite as cli_suite
    from grader.cli import tools as cli_tools

    cli_tools.register(cli)
    cli_scoring.register(cli)
    cli_import.register(cli)
    cli_suite.register(cli)
    from grader.cli import round as cli_round  # grader round, grader round verify

    cli_round.register(cli)
    debug = "--debug" in sys.argv[1:]
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except GraderError as exc:
        if debug:
            raise
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except Exception as exc:  # a grader bug: say so plainly, trace only when asked
        if debug:
            raise
        click.echo(f"internal error: {type(exc).__name__}: {exc}\n  hint: re-run with --debug "
                   "and report it", err=True)
        sys.exit(GraderError.exit_code)
