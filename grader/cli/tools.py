"""The command groups beside `run`: images, doctor, policy, check, bundle, init."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import click

from grader.cli.options import suites_option
from grader.suite.roots import suite_roots

if TYPE_CHECKING:
    from grader.sandbox.docker_engine import ImageInfo
    from grader.sandbox.runtimes import Runtime


def _runtime(kind: str, cuda_base: str | None) -> Runtime:
    from grader.sandbox.runtimes import runtime_config, runtime_for

    return runtime_for(runtime_config(kind, cuda_base=cuda_base))


@click.group()
def images() -> None:
    """Build, list, render and prune the grader's Docker images."""


@images.command("render")
@click.argument("what", type=click.Choice(["runtime-cpu", "runtime-cuda", "problem"]))
@click.option("--suite", default="demo", show_default=True, help="Suite of the problem.")
@click.option("--problem", "problem_id", default=None, help="Problem id (for `problem`).")
@click.option("--cuda-base", default=None, help="Base image of the CUDA runtime.")
def images_render(what: str, suite: str, problem_id: str | None, cuda_base: str | None) -> None:
    """Print a Dockerfile without building anything."""
    from grader.images import problem_plan
    from grader.suite.load import find_suite

    if what == "problem":
        s = find_suite(suite, list(suite_roots()))
        pid = problem_id or next(iter(s.problems))
        if pid not in s.problems:
            raise click.BadParameter(f"{pid!r} is not a problem of suite {s.id}; choose "
                                     f"one of {', '.join(s.problems)}",
                                     param_hint="--problem")
        runtime = _runtime("cpu", cuda_base).plan(download=False).tag
        plan = problem_plan(runtime, s.id, s.problems[pid])
    else:
        plan = _runtime(what.removeprefix("runtime-"), cuda_base).plan(download=False)
    click.echo(f"# tag: {plan.tag}")
    click.echo(plan.dockerfile, nl=False)


@images.command("build")
@click.option("--suite", "suites", multiple=True, default=["demo"], show_default=True,
              help="Build the problem images of these suites too.")
def images_build(suites: tuple[str, ...]) -> None:
    """Build (or find) the CPU runtime and the problem images; builds only what is missing."""
    from grader.images import ensure, problem_plan
    from grader.sandbox.docker_engine import get_engine
    from grader.suite.load import find_suite

    engine = get_engine()
    runtime = _runtime("cpu", None).ensure_image(engine)
    click.echo(f"{'built' if runtime.built else 'present'}: {runtime.tag}")
    for name in suites:
        suite = find_suite(name, list(suite_roots()))
        for sp in suite.problems.values():
            got = ensure(engine, problem_plan(runtime.tag, suite.id, sp))
            click.echo(f"{'built' if got.built else 'present'}: {got.tag}")


@images.command("list")
def images_list() -> None:
    """List the grader's images (label grader.image)."""
    from grader.sandbox.docker_engine import get_engine

    found = get_engine().images()
    for line in image_lines(found):
        click.echo(line)


def _mb(n: int | None) -> str:
    if n is None:
        return "-"
    return f"{n / 1e6:.1f} MB" if n < 10e6 else f"{n / 1e6:.0f} MB"


def image_lines(found: list[ImageInfo]) -> list[str]:
    """`grader images list`: each image's own size (the layers only it holds: what removing
    it frees) beside its size with the layers it shares (issue 34: every problem image read
    2080 MB, the runtime under them all), then the total on disk."""
    out = [f"{'kind':<13} {'tag':<60} {'own':>9} {'with shared':>12}  created"]
    out += [f"{i.kind:<13} {i.tag:<60} {_mb(i.unique_bytes):>9} {_mb(i.size_bytes):>12}  "
            f"{i.created}" for i in found]
    ids = {i.id: i for i in found}
    if ids and all(i.unique_bytes is not None for i in ids.values()):
        own = sum(i.unique_bytes or 0 for i in ids.values())
        base = max(i.size_bytes - (i.unique_bytes or 0) for i in ids.values())
        out.append(f"{len(ids)} image(s): {_mb(own)} of their own, beside {_mb(base)} of "
                   "layers they share")
    return out


def prune_targets(found: list[ImageInfo], *, everything: bool, repos: set[str] | None,
                  older_than: timedelta | None, now: datetime) -> list[ImageInfo]:
    """The images `grader images prune` removes: problem images (every grader image with
    --all), of the suites' problems when `repos` is given, created before `now - older_than`
    when that is given."""
    out = []
    for img in found:
        if not everything and img.kind != "problem":
            continue
        if repos is not None and img.tag.partition(":")[0] not in repos:
            continue
        if older_than is not None:
            try:
                created = datetime.fromisoformat(img.created).replace(tzinfo=UTC)
            except ValueError:
                continue  # an age it cannot read: kept
            if now - created < older_than:
                continue
        out.append(img)
    return out


@images.command("prune")
@click.option("--all", "everything", is_flag=True, help="Also the root filesystem and runtimes.")
@click.option("--suite", "suites", multiple=True, metavar="ID|DIR",
              help="Only the problem images of this suite (repeat for more).")
@suites_option
@click.option("--older-than", "older_than", type=click.FloatRange(0), default=None,
              metavar="DAYS", help="Only images created more than DAYS days ago.")
@click.option("--dry-run", is_flag=True, help="Say what would be removed; remove nothing.")
def images_prune(everything: bool, suites: tuple[str, ...], suite_roots: tuple[Path, ...],
                 older_than: float | None, dry_run: bool) -> None:
    """Remove problem images (and with --all every grader image) and leftover containers;
    --suite and --older-than narrow what goes."""
    from grader.images import problem_repo
    from grader.sandbox.docker_engine import get_engine
    from grader.suite.load import find_suite
    from grader.suite.roots import suite_roots as roots

    repos = None
    if suites:
        found = [find_suite(s, list(roots(suite_roots, suite=s))) for s in suites]
        repos = {problem_repo(s.id, pid) for s in found for pid in s.problems}
    engine = get_engine()
    gone = 0 if dry_run else engine.reap()
    age = None if older_than is None else timedelta(days=older_than)
    for img in prune_targets(engine.images(), everything=everything, repos=repos,
                             older_than=age, now=datetime.now(UTC)):
        if not dry_run:
            engine.remove_image(img.tag)
        click.echo(f"{'would remove' if dry_run else 'removed'} {img.tag}")
    if not dry_run:
        click.echo(f"removed {gone} leftover container(s)")


@click.command()
@click.option("--reap", is_flag=True,
              help="first remove what graders that died left: containers, mounts, folders")
def doctor(reap: bool) -> None:
    """Check this host: Docker, seccomp, GPU passthrough, output caps, images."""
    from grader.cli.doctor import reap_leftovers, run_checks

    if reap:
        click.echo(f"reaped: {reap_leftovers()}")
    checks = run_checks()
    for c in checks:
        click.echo(f"{'ok ' if c.ok else 'NO '} {c.name:<18} {c.detail}")
        for line in c.lines:
            click.echo(f"{'':23}{line}")
    if not all(c.ok for c in checks if c.name in ("docker",)):
        click.echo("error: no usable Docker engine, so nothing can be graded here\n"
                   "  hint: start dockerd (scripts/setup.sh does) or set DOCKER_HOST", err=True)
        sys.exit(1)


@click.group()
def policy() -> None:
    """Show the policies that say what an entry may call."""


@policy.command("list")
def policy_list() -> None:
    """List the available policies."""
    from grader.detect.policy import list_policies

    for name in list_policies():
        click.echo(name)


@policy.command("show")
@click.argument("name")
def policy_show(name: str) -> None:
    """Print policy NAME (a name under policies/ or a file)."""
    from grader.detect.policy import load_policy, policy_text

    click.echo(policy_text(load_policy(name)), nl=False)


@click.command()
@click.argument("bundle", metavar="BUNDLE|FOLDER|KERNEL.py",
                type=click.Path(exists=True, path_type=Path))
@click.option("--policy", "policy_name", default="triton", show_default=True)
@click.option("--sarif", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the findings as SARIF 2.1.0 to this file.")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON summary on stdout (schema: `grader schema check`).")
def check(bundle: Path, policy_name: str, sarif: Path | None, as_json: bool) -> None:
    """Static analysis only (no Docker, no GPU): print the findings of the kernels of a
    BUNDLE (a tar), a FOLDER (submission.toml and kernels/) or one KERNEL.py."""
    from grader.errors import GraderError
    from grader.intake.tools import BLOCKING, static_check
    from grader.report.summaries import CheckSummary, ErrorInfo, check_summary

    try:
        findings = static_check(bundle, policy_name)
    except GraderError as exc:
        if as_json:
            click.echo(CheckSummary(ok=False, exit_code=exc.exit_code, error=ErrorInfo.of(exc),
                                    bundle=str(bundle)).model_dump_json(indent=2))
        raise
    total = 0
    for fname, items in findings.items():
        for f in items:
            total += 1
            click.echo(f"{fname}:{f.line or 0}: {f.severity.value:<9} {f.rule} {f.message}",
                       err=as_json)
    click.echo(f"{total} finding(s) in {len(findings)} file(s)", err=as_json)
    if sarif is not None:
        from grader import __version__
        from grader.report.sarif import to_sarif

        sarif.write_text(json.dumps(to_sarif(findings, tool_version=__version__), indent=2))
        click.echo(f"sarif: {sarif}", err=as_json)
    if as_json:
        blocking = sum(1 for items in findings.values() for f in items if f.severity in BLOCKING)
        click.echo(check_summary(str(bundle), findings, blocking).model_dump_json(indent=2))


@click.group()
def bundle() -> None:
    """Make and check submission bundles (for participants)."""


@bundle.command("create")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True)
def bundle_create(directory: Path, output: Path) -> None:
    """Pack DIRECTORY (submission.toml + kernels/) into a bundle, validating it first."""
    from grader.intake.tools import create_bundle

    sub = create_bundle(directory, output)
    click.echo(f"{output}: {len(sub.manifest.problems)} kernel(s) for suite "
               f"{sub.manifest.submission.suite}")


@bundle.command("check")
@click.argument("bundle_path", metavar="BUNDLE",
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--policy", "policy_name", default="triton", show_default=True)
@suites_option
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON summary on stdout (schema: `grader schema bundle-check`); "
              "the exit code is the same.")
def bundle_check(bundle_path: Path, policy_name: str, suite_roots: tuple[Path, ...],
                 as_json: bool) -> None:
    """Check BUNDLE before uploading it: intake, layout and size, suite coverage, static
    analysis. Exit 0 when it would be accepted with no blocking finding; 4 when a static
    finding (fallback, violation, tampering) would keep kernels from `passed`; 10-15 when
    intake refuses it (see docs/cli.md)."""
    from grader.errors import GraderError
    from grader.intake.tools import check_bundle, gate, render_check
    from grader.report.summaries import BundleCheckSummary, ErrorInfo, bundle_check_summary
    from grader.suite.roots import suite_roots as roots

    try:
        result = check_bundle(bundle_path, policy_name, list(roots(suite_roots)))
    except GraderError as exc:
        if as_json:
            click.echo(BundleCheckSummary(ok=False, exit_code=exc.exit_code,
                                          error=ErrorInfo.of(exc), bundle=str(bundle_path))
                       .model_dump_json(indent=2))
        raise
    for line in render_check(result):
        click.echo(line, err=as_json)
    try:
        gate(result)
    except GraderError as exc:
        if as_json:
            click.echo(bundle_check_summary(result, exc).model_dump_json(indent=2))
        raise
    click.echo("ok: the grader would accept this bundle", err=as_json)
    if as_json:
        click.echo(bundle_check_summary(result, None).model_dump_json(indent=2))


@click.command("init")
@click.argument("problem_id")
@click.option("--suite", "suite_dir", required=True,
              type=click.Path(file_okay=False, path_type=Path),
              help="The suite folder (problem_bundles/<suite>) to create the problem in.")
def init(problem_id: str, suite_dir: Path) -> None:
    """Scaffold a new problem: SUITE/PROBLEM_ID/problem.toml and reference.py, valid as
    written (one smoke shape), with TODOs to fill; in a new suite also SUITE/suite.toml and
    weights.toml. Refuses to overwrite anything."""
    from grader.suite.scaffold import scaffold

    made = scaffold(problem_id, suite_dir)
    for path in [*made.suite_files, *made.files]:
        click.echo(f"created {path}")
    for step in made.next_steps:
        click.echo(f"next: {step}")


@click.command()
@click.option("--group", "groups", multiple=True, default=["hostile"], show_default=True,
              help="Case groups under tests/cases/ to grade (hostile, fallback, grading; "
              "hostile_gpu needs --device cuda).")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True,
              help="Grade on the CPU interpreter or on GPU 0.")
@click.option("--runtime", type=click.Choice(["cpu", "cuda", "host"]), default=None,
              help="Runtime image kind (default: cpu for --device cpu, host for --device cuda).")
@click.option("--python", "python", default=None,
              help="Interpreter inside the container (default: this one, for --runtime host).")
def selftest(groups: tuple[str, ...], device: str, runtime: str | None,
             python: str | None) -> None:
    """Grade the hostile-entry suite (or other case groups) on this host and print, case by
    case, the verdict expected and the verdict given. Exits 1 if any differs."""
    from grader.cli.selftest import Target, run_selftest
    from grader.sandbox.docker_engine import get_engine
    from grader.sandbox.runtimes import default_runtime

    target = Target(device=device, runtime=runtime or default_runtime(device), python=python)
    results = run_selftest(groups, get_engine(), target)
    for r in results:
        mark = "ok  " if r.ok else ("hole" if r.known_hole else "FAIL")
        got = ", ".join(f"{p}={v}" for p, v in r.got.items())
        want = ", ".join(f"{p}={v}" for p, v in r.expected.items())
        click.echo(f"{mark} {r.case:<52} {got}" + ("" if r.ok else f"   (expected {want})"))
    bad = [r for r in results if not r.ok]
    click.echo(f"{len(results) - len(bad)}/{len(results)} cases as expected")
    if bad:
        sys.exit(1)


def register(cli: click.Group) -> None:
    for cmd in (images, doctor, policy, check, bundle, init, selftest):
        cli.add_command(cmd)
