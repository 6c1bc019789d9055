"""`grader round`: grade many bundles against one suite (`grader round BUNDLE...`), and
check a finished round (`grader round verify ROUND_DIR`)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from grader.cli.options import settings_options, suites_option, with_options
from grader.cli.progress import LOG_FORMATS, for_cli

if TYPE_CHECKING:
    from grader.round.model import Board
    from grader.round.request import RoundPresentation, RoundRequest


class _DefaultGrade(click.Group):
    """`grader round BUNDLE...` means `grader round grade BUNDLE...`: any first word that is
    not a subcommand (nor --help) is the start of the grading command's arguments."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["grade", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_DefaultGrade)
def round_() -> None:
    """Competition rounds: many bundles, one suite, one secret, references computed once.

    `grader round BUNDLE_OR_DIR... -o ROUND_DIR` grades (the `grade` subcommand; the suite is
    the round folder's, --suite's, or the one every entry names);
    `grader round commit --suite S -o ROUND_DIR` publishes a round's commitment before it;
    `grader round prepare -o ROUND_DIR` computes its references before the entries;
    `grader round verify ROUND_DIR` checks a round folder (docs/rounds.md)."""


_SHARED = [  # the options of `grade` that `commit` commits to (and a round must match)
    click.option("--suite", default=None, metavar="ID|DIR",
                 help="The suite every entry is graded against, by id or folder (default: "
                 "the round folder's, else the one every entry's submission.toml names)."),
    click.option("-o", "--out", "out_dir", type=click.Path(path_type=Path), required=True,
                 help="The round folder (docs/rounds.md lists what it holds)."),
    suites_option,
    *settings_options,
    click.option("--seed-secret", default=None, help="Hex secret (default: a fresh one; "
                 "a committed round's is its seed.secret)."),
    click.option("--gpus", default="0", show_default=True, metavar="N,N,...",
                 help="GPUs of this host: the first entry on all, the rest one per GPU."),
    click.option("--jobs", type=click.IntRange(1, 64), default=1, show_default=True,
                 help="--device cpu: problems of an entry graded at once."),
    click.option("--no-shared-references", is_flag=True,
                 help="Run every entry's references itself (as `grader run` does)."),
    click.option("-q", "--quiet", is_flag=True),
    click.option("--log-format", type=click.Choice(LOG_FORMATS), default="human",
                 show_default=True),
]


def _staged(*, paths: tuple[Path, ...] = (), resume: bool = False, ray: str | None = None,
            formats: str = "json", suite: str | None, out_dir: Path, gpus: str, jobs: int,
            no_shared_references: bool, start_ahead: str = "auto", ahead_depth: int = 2,
            serve: bool = False, time_beside: str = "auto", quiet: bool = False,
            log_format: str = "human", **grading: Any
            ) -> tuple[RoundRequest, RoundPresentation]:
    """The command line, staged (issue 33): what the round grades and commits to, and how
    its outcome is shown."""
    from grader.cli.options import formats_option, gpu_list, grading_options
    from grader.grading.config import Scheduling
    from grader.round.request import RoundPresentation, RoundRequest

    gpus_ = gpu_list(click.get_current_context(), None, gpus) or (0,)  # type: ignore[arg-type]
    scheduling = Scheduling(gpus=gpus_, jobs=jobs, start_ahead=start_ahead,
                            ahead_depth=ahead_depth, serve=serve,
                            time_beside=time_beside, ray=ray)
    # Every entry's grading: its bundle and output folder are set per entry (round/request.py).
    run = grading_options(bundle=Path("-"), out_dir=out_dir, scheduling=scheduling, **grading)
    req = RoundRequest(paths=paths, suite=suite, out_dir=out_dir, run=run, resume=resume,
                       shared_references=not no_shared_references)
    return req, RoundPresentation(formats=formats_option(formats), quiet=quiet,
                                  log_format=log_format)


@round_.command("grade")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@with_options(_SHARED)
@click.option("--resume", is_flag=True, help="Finish the round in -o (its own entries; the "
              "graded ones are kept, infra errors graded again).")
@click.option("--format", "formats", default="json,html", show_default=True,
              help="Each entry's report formats (json always).")
@click.option("--start-ahead", type=click.Choice(["auto", "on", "off"]), default="auto",
              show_default=True, help="Start each batch's containers while the one before "
              "runs (a later entry's, whose references the round has, its entry's alone); "
              "auto: on hosts with 4 cores a worker.")
@click.option("--ahead-depth", type=click.IntRange(1, 4), default=2, show_default=True,
              help="With --start-ahead: how many batches' containers are started ahead at "
              "once (as `grader run --ahead-depth`).")
@click.option("--serve", is_flag=True,
              help="Run each entry's batches as workers of one serving container instead of "
              "a container each (as `grader run --serve`).")
@click.option("--time-beside", type=click.Choice(["auto", "on", "off"]), default="auto",
              show_default=True,
              help="Let timed loops run beside the next batches' set-up and the judging "
              "before them (as `grader run --time-beside`).")
@click.option("--ray", "ray", default=None, metavar="auto|ADDRESS",
              help="Grade on a Ray cluster (pip install 'grader[ray]'): one task per entry "
              "on a node with the `grader_docker` resource.")
def grade(**options: Any) -> None:
    """Grade BUNDLE_OR_DIR... (bundles, submission folders, or folders of them) into a round
    folder, then write its leaderboard (json, md, html). A folder where `grader round commit`
    was run grades under its commitment, or not at all."""
    from grader.round.conduct import run_round

    req, show = _staged(**options)
    board = run_round(req, show, for_cli(show.log_format, quiet=show.quiet))
    for line in board_lines(board):
        click.echo(line)
    click.echo(f"each entry's report: {options['out_dir'] / 'entries'}/ENTRY/report.json "
               "(re-grade one, once the secret is out: grader verify REPORT --secret HEX)")


def board_lines(board: Board) -> list[str]:
    """The round's terminal summary: a line per entry with its verdicts, not only its
    status (issue 34: an honest and a cheating entry both read `S_agg 0.000 ... graded`),
    and which shapes were graded."""
    out = []
    for row in board.rows:
        s = "-" if row.s_agg is None else f"{row.s_agg:.3f}"
        rank = "-" if row.rank is None else str(row.rank)
        if row.status == "graded":
            verdicts = ", ".join(f"{n} {v.value}" for v, n in row.verdicts.items()) or "-"
            what = f"{row.correct_shapes}/{row.shapes} correct: {verdicts} ({row.graded})"
        else:
            what = f"{row.status}: {row.error or ''}"
        out.append(f"{rank:>3} {row.entry:<32} S_agg {s:>7}  {what}")
    return out


@round_.command("commit")
@with_options(_SHARED)
def commit(**options: Any) -> None:
    """Before a round: draw its secret (-o/seed.secret, private until the round ends) and
    write -o/commitment.json, to publish: the secret's sha256, the suite's content hash, the
    settings and the images (built if missing). `grader round ... -o` the same folder with
    the same options then grades under it, and refuses anything else."""
    from grader.round.conduct import commit_round

    # The commitment holds the request's settings alone; the presentation shows the progress.
    req, show = _staged(**options)
    c, sha = commit_round(req, for_cli(show.log_format, quiet=show.quiet))
    click.echo(f"commitment: {req.out_dir / 'commitment.json'} (sha256 {sha}): publish it")
    click.echo(f"secret: {req.out_dir / 'seed.secret'} (keep it private until the round ends)")
    for role, image in c.images.items():
        click.echo(f"image {role}: {image.tag} {image.id}")


@round_.command("prepare")
@with_options(_SHARED)
def prepare(**options: Any) -> None:
    """After `grader round commit`, before the entries: compute every reference the round's
    entries will be graded on, and keep it in the round folder (as far as the disk's room
    allows), so that the round's first entry grades as fast as every later one. Takes the
    options the round was committed with; run it again to finish one that stopped."""
    from grader.round.conduct import prepare_round

    req, show = _staged(**options)
    prepared = prepare_round(req, for_cli(show.log_format, quiet=show.quiet))
    counts = Counter(b.status for b in prepared.batches)
    click.echo(f"references: {', '.join(f'{n} {s}' for s, n in counts.items()) or 'none'} "
               f"in {prepared.wall_s:.1f} s ({req.out_dir / 'prepared.json'})")
    for b in prepared.batches:
        if b.status in ("not kept", "failed"):
            click.echo(f"  {b.problem}: {b.status}: {b.detail}")


@round_.command("verify")
@click.argument("round_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@suites_option
@click.option("--secret", default=None, help="The round's secret (hex), once revealed.")
@click.option("--commitment", "commitment_file", default=None,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The commitment as published before the round (default: the folder's).")
def verify(round_dir: Path, suite_roots: tuple[Path, ...], secret: str | None,
           commitment_file: Path | None) -> None:
    """Check ROUND_DIR: bundles, reports and the secret against the manifest, and the
    leaderboard against the one recomputed from the reports (exit 6 on a mismatch)."""
    from grader.errors import UsageError
    from grader.round.verify import require, verify_round

    if secret is not None:
        try:
            bytes.fromhex(secret)
        except ValueError:
            raise UsageError("--secret: not hexadecimal") from None
    got = verify_round(round_dir, suite_roots=suite_roots,
                       secret_hex=secret, commitment_file=commitment_file)
    for line in got.ok:
        click.echo(f"ok        {line}")
    for line in got.unchecked:
        click.echo(f"unchecked {line}")
    for line in got.wrong:
        click.echo(f"WRONG     {line}")
    require(got)


@click.command("verify")
@click.argument("report", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--secret", required=True, help="The secret the report was graded under (hex), "
              "once revealed: checked against the report's seed commitment first.")
@click.option("--bundle", type=click.Path(exists=True, path_type=Path), default=None,
              help="The bundle (or submission folder) the report graded (default: the "
              "round's copy, when REPORT is a round's entries/NAME/report.json; a bundle "
              "holding that copy's files is accepted, and the copy is graded).")
@suites_option
@click.option("--runtime", type=click.Choice(["cpu", "cuda", "host"]), default=None,
              help="Default: the round's; cpu for a CPU report, host for a GPU one.")
@click.option("--python", default=None, help="Interpreter in the container (cuda, host).")
@click.option("--cuda-base", default=None, help="Base image of the CUDA runtime.")
@click.option("--gpus", default="0", show_default=True, metavar="N,N,...")
@click.option("--timeout", type=click.FloatRange(1, 7200), default=None,
              help="Wall-clock limit of each entry container (default: the round's).")
@click.option("--noise-scale", type=click.FloatRange(0, 100), default=1.0, show_default=True,
              help="On the same kind of GPU: a median reproduces within this many times the "
              "larger inter-quartile range of the two gradings.")
@click.option("-o", "--out", "keep", type=click.Path(path_type=Path), default=None,
              help="Keep the re-grade's report.json in this folder.")
@click.option("-q", "--quiet", is_flag=True)
@click.option("--log-format", type=click.Choice(LOG_FORMATS), default="human",
              show_default=True)
def verify_report_cmd(report: Path, secret: str, bundle: Path | None,
                      suite_roots: tuple[Path, ...], runtime: str | None, python: str | None,
                      cuda_base: str | None, gpus: str, timeout: float | None,
                      noise_scale: float, keep: Path | None, quiet: bool,
                      log_format: str) -> None:
    """Grade REPORT's bundle again under its revealed secret and confirm that every verdict
    reproduces and, on the same kind of GPU, every timing and score within the report's
    noise (exit 6 on a mismatch; a secret that is not the report's is refused, exit 2)."""
    from grader.cli.options import gpu_list
    from grader.errors import RoundMismatch
    from grader.round.reproduce import VerifyRequest, verify_report

    req = VerifyRequest(report=report, secret_hex=secret, bundle=bundle,
                        suite_roots=suite_roots, runtime=runtime, python=python,
                        cuda_base=cuda_base, timeout=timeout, noise_scale=noise_scale,
                        keep=keep,
                        gpus=gpu_list(click.get_current_context(), None, gpus) or (0,))  # type: ignore[arg-type]
    old, new, got = verify_report(req, for_cli(log_format, quiet=quiet))
    click.echo(f"{old.submission.name}: the secret matches the report's seed commitment; "
               f"graded again on {new.environment.device}")
    click.echo(f"compared: {got.timings}")
    for line in got.lines:
        click.echo(f"{line.status:<9} {line.where}: {line.text}")
    for note in got.notes:
        click.echo(note)
    bad = got.mismatches
    if bad:
        raise RoundMismatch(f"{len(bad)} of {len(got.lines)} result(s) do not reproduce: "
                            + ", ".join(ln.where for ln in bad[:5])
                            + (" ..." if len(bad) > 5 else ""))
    click.echo(f"reproduced: {len(got.lines)} problem and shape result(s)")


def register(cli: click.Group) -> None:
    cli.add_command(round_, name="round")
    cli.add_command(verify_report_cmd, name="verify")
