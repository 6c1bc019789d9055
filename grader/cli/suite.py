"""`grader suite check`: the organisers' check of a suite before entries meet it."""

from __future__ import annotations

import secrets
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from grader.cli.options import suites_option

if TYPE_CHECKING:
    from grader.organiser.check import SuiteCheck


@click.group()
def suite() -> None:
    """Check a suite (for organisers)."""


def _lines(result: SuiteCheck) -> list[str]:
    from grader.verdicts import Verdict

    out = [f"{'ok ' if s.verdict is Verdict.PASSED else 'BAD'} {s.problem}/{s.shape}: "
           f"{s.verdict} - {s.detail}" for s in result.shapes]
    for s in result.shapes:
        if s.verdict is not Verdict.PASSED and s.excerpt:
            out.append(f"--- {s.problem}/{s.shape}: the reference's error (its end) ---")
            out += s.excerpt.strip().splitlines()[-12:]
    out += [f"BAD roofline {line}" for line in result.roofline]
    out.append("BAD release kit: grader release would refuse it: " + result.kit.message
               if result.kit else f"ok  release kit: builds ({result.kit_bytes} bytes), "
               "nothing hidden in it, every reference passes release's self-check")
    out += [f"warning: {line}" for line in result.warnings]
    passed = sum(1 for s in result.shapes if s.verdict is Verdict.PASSED)
    out.append(f"suite {result.suite}: {passed}/{len(result.shapes)} shape(s) sound, "
               f"{len(result.roofline)} roofline error(s), kit "
               f"{'refused' if result.kit else 'ok'}")
    return out


@suite.command("check")
@click.argument("suite_name", metavar="SUITE")
@suites_option
@click.option("--problem", "problems", multiple=True, help="Check only these problems.")
@click.option("--shapes", type=click.Choice(["all", "smoke", "scored"]), default="all",
              show_default=True, help="Which shapes to run the references on.")
@click.option("--seeds", type=click.IntRange(1, 8), default=1, show_default=True,
              help="Input sets per shape (each run twice).")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
@click.option("--runtime", type=click.Choice(["cpu", "cuda", "host"]), default="cpu",
              show_default=True, help="As for grader run.")
@click.option("--python", default=None, help="Interpreter in the container (cuda, host).")
@click.option("--timeout", type=click.FloatRange(1, 7200), default=None,
              help="Wall-clock limit of each reference container, seconds (default 600).")
def suite_check(suite_name: str, suite_roots: tuple[Path, ...], problems: tuple[str, ...],
                shapes: str, seeds: int, device: str, runtime: str, python: str | None,
                timeout: float | None) -> None:
    """Run every reference on every shape in containers (twice: determinism, and within its
    own tolerance), evaluate the roofline expressions, build the release kit. Exit 21 when a
    reference is at fault (reference_error), 20 for an expression or the kit, 30 when only
    the machinery failed."""
    from grader.cli.progress import labelled
    from grader.grading.config import GradingOptions
    from grader.grading.factory import reference_sandbox
    from grader.grading.settings import GradingSettings
    from grader.organiser.check import Runner, check_suite
    from grader.sandbox.docker_engine import get_engine
    from grader.sandbox.runtimes import runtime_for
    from grader.suite.load import check_problems, find_suite
    from grader.suite.roots import suite_roots as roots

    found = find_suite(suite_name, list(roots(suite_roots)))
    check_problems(found, problems)
    settings = GradingSettings.model_validate({"device": device, "runtime": runtime})
    cfg = GradingOptions(bundle=Path("-"), out_dir=Path("."), settings=settings, python=python)
    limits = cfg.reference_limits
    if timeout is not None:
        limits = replace(limits, wall_s=timeout)
    engine = get_engine()
    tag = runtime_for(cfg.runtime_config).ensure_image(engine).tag

    def make_runner(session: str) -> Runner:
        return Runner(sandbox=reference_sandbox(cfg, engine, session), limits=limits,
                      runtime_tag=tag, suite_id=found.id, seeds=seeds,
                      secret=secrets.token_bytes(32))

    result = check_suite(found, problems=problems, shapes=shapes, make_runner=make_runner,
                         progress=labelled("suite check"),
                         run_kit_check=device == "cpu")
    for line in _lines(result):
        click.echo(line)
    error = result.error()
    if error is not None:
        raise error


def register(cli: click.Group) -> None:
    cli.add_command(suite)
