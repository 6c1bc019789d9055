"""`grader round`: grade many bundles against one suite (`grader round BUNDLE...`), and
check a finished round (`grader round verify ROUND_DIR`)."""

from __future__ import annotations

from pathlib import Path

import click

from grader.run.progress import LOG_FORMATS


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

    `grader round BUNDLE_OR_DIR... --suite S -o ROUND_DIR` grades (the `grade` subcommand);
    `grader round verify ROUND_DIR` checks a round folder (docs/rounds.md)."""


@round_.command("grade")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--suite", required=True, help="The suite every entry is graded against.")
@click.option("-o", "--out", "out_dir", type=click.Path(path_type=Path), required=True,
              help="The round folder (docs/rounds.md lists what it holds).")
@click.option("--suites", "suite_roots", multiple=True, type=click.Path(path_type=Path),
              help="Folder(s) holding suites (default: the checkout's problem_bundles/).")
@click.option("--resume", is_flag=True, help="Finish the round in -o (its own entries; the "
              "graded ones are kept, infra errors graded again).")
@click.option("--policy", default="triton", show_default=True)
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
@click.option("--runtime", type=click.Choice(["cpu", "cuda", "host"]), default="cpu",
              show_default=True)
@click.option("--python", default=None, help="Interpreter in the container (cuda, host).")
@click.option("--cuda-base", default=None, help="Base image of the CUDA runtime.")
@click.option("--hardware", default="auto", show_default=True)
@click.option("--shapes", type=click.Choice(["auto", "all", "smoke", "scored"]),
              default="auto", show_default=True)
@click.option("--problem", "problems", multiple=True, help="Grade only these problems.")
@click.option("--seeds", type=click.IntRange(1, 32), default=None)
@click.option("--timeout", type=click.FloatRange(1, 7200), default=None,
              help="Wall-clock limit of each entry container, seconds.")
@click.option("--seed-secret", default=None, help="Hex secret (default: a fresh one).")
@click.option("--gpus", default="0", show_default=True, metavar="N,N,...",
              help="GPUs of this host: the first entry on all, the rest one per GPU.")
@click.option("--jobs", type=click.IntRange(1, 64), default=1, show_default=True,
              help="--device cpu: problems of an entry graded at once.")
@click.option("--format", "formats", default="json,html", show_default=True,
              help="Each entry's report formats (json always).")
@click.option("--no-shared-references", is_flag=True,
              help="Run every entry's references itself (as `grader run` does).")
@click.option("--ray", "ray", default=None, metavar="auto|ADDRESS",
              help="Grade on a Ray cluster (pip install 'grader[ray]'): one task per entry "
              "on a node with the `grader_docker` resource.")
@click.option("-q", "--quiet", is_flag=True)
@click.option("--log-format", type=click.Choice(LOG_FORMATS), default="human",
              show_default=True)
def grade(paths: tuple[Path, ...], suite: str, out_dir: Path, suite_roots: tuple[Path, ...],
          resume: bool, policy: str, device: str, runtime: str, python: str | None,
          cuda_base: str | None, hardware: str, shapes: str, problems: tuple[str, ...],
          seeds: int | None, timeout: float | None, seed_secret: str | None, gpus: str,
          jobs: int, formats: str, no_shared_references: bool, ray: str | None, quiet: bool,
          log_format: str) -> None:
    """Grade BUNDLE_OR_DIR... (bundles, submission folders, or folders of them) into a round
    folder, then write its leaderboard (json, md, html)."""
    from grader.cli.main import _formats, _gpu_list
    from grader.round.run import RoundRequest, run_round
    from grader.run.progress import Progress
    from grader.run.runner import RunRequest, to_config

    gpu_list = _gpu_list(click.get_current_context(), None, gpus) or (0,)  # type: ignore[arg-type]
    run = RunRequest(bundle=Path("-"), out_dir=out_dir, suite_roots=suite_roots, policy=policy,
                     device=device, shapes=shapes, problems=problems, seeds=seeds,
                     timeout=timeout, seed_secret=seed_secret, runtime=runtime, python=python,
                     cuda_base=cuda_base, hardware=hardware, gpus=gpu_list, jobs=jobs,
                     quiet=True)
    to_config(run)  # the options' own checks (--seed-secret, --device cuda --runtime cpu)
    req = RoundRequest(paths=paths, suite=suite, out_dir=out_dir, run=run, resume=resume,
                       shared_references=not no_shared_references, ray=ray,
                       formats=_formats(formats))
    board = run_round(req, Progress.for_cli(log_format, quiet=quiet))
    for row in board.rows:
        s = "-" if row.s_agg is None else f"{row.s_agg:.3f}"
        rank = "-" if row.rank is None else str(row.rank)
        click.echo(f"{rank:>3} {row.entry:<32} S_agg {s:>7}  {row.correct_shapes}/{row.shapes}"
                   f" correct  {row.status}")


@round_.command("verify")
@click.argument("round_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--suites", "suite_roots", multiple=True, type=click.Path(path_type=Path),
              help="Folder(s) holding the suite, to check its content hash.")
@click.option("--secret", default=None, help="The round's secret (hex), once revealed.")
def verify(round_dir: Path, suite_roots: tuple[Path, ...], secret: str | None) -> None:
    """Check ROUND_DIR: bundles, reports and the secret against the manifest, and the
    leaderboard against the one recomputed from the reports (exit 6 on a mismatch)."""
    from grader.errors import UsageError
    from grader.paths import PROBLEM_BUNDLES
    from grader.round.verify import require, verify_round

    if secret is not None:
        try:
            bytes.fromhex(secret)
        except ValueError:
            raise UsageError("--secret: not hexadecimal") from None
    got = verify_round(round_dir, suite_roots=list(suite_roots or (PROBLEM_BUNDLES,)),
                       secret_hex=secret)
    for line in got.ok:
        click.echo(f"ok        {line}")
    for line in got.unchecked:
        click.echo(f"unchecked {line}")
    for line in got.wrong:
        click.echo(f"WRONG     {line}")
    require(got)


def register(cli: click.Group) -> None:
    cli.add_command(round_, name="round")
