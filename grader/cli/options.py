"""Option values the command groups share, parsed and checked (comma-separated lists)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from grader.report.render import FORMATS

if TYPE_CHECKING:
    from grader.grading.config import GradingOptions, Scheduling

F = TypeVar("F", bound=Callable[..., Any])

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


# The grading settings' options (grading/settings.py), the same in `grader run` and in
# `grader round` (issue 33: the round declared each again); the staged options are built from
# them by grading_options alone.
settings_options = [
    click.option("--policy", default="triton", show_default=True, help="Policy name or file."),
    click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu",
                 show_default=True,
                 help="cpu: Triton's interpreter (no timing claims); cuda: a GPU."),
    click.option("--runtime", type=click.Choice(["cpu", "cuda", "host"]), default="cpu",
                 show_default=True, help="cpu: the debootstrap image; cuda: FROM --cuda-base; "
                 "host: the host's own Python, torch and triton, and only them, bound "
                 "read-only (air-gapped GPU hosts; `grader doctor` lists the binds)."),
    click.option("--python", default=None, help="Interpreter in the container (cuda, host)."),
    click.option("--cuda-base", default=None, help="Base image of the CUDA runtime."),
    click.option("--hardware", default="auto", show_default=True,
                 help="Hardware profile for the roofline; auto: matched to the GPU's name."),
    click.option("--shapes", type=click.Choice(["auto", "all", "smoke", "scored"]),
                 default="auto", show_default=True,
                 help="Which shapes to grade; auto: smoke shapes on --device cpu, all on cuda."),
    click.option("--problem", "problems", multiple=True, help="Grade only these problems."),
    click.option("--seeds", type=click.IntRange(1, 32), default=None,
                 help="Input sets per shape (default: the suite's)."),
    click.option("--timeout", type=click.FloatRange(1, 7200), default=None,
                 help="Wall-clock limit of each entry container, seconds, counted once its "
                 "harness is set up (not the container's start nor `import torch`)."),
]


def with_options(options: list[Callable[[F], F]]) -> Callable[[F], F]:
    """A command decorated with each of `options`, in order."""
    def decorate(f: F) -> F:
        for option in reversed(options):
            f = option(f)
        return f
    return decorate


def grading_options(*, bundle: Path, out_dir: Path, suite_roots: tuple[Path, ...],
                    seed_secret: str | None, policy: str, device: str, runtime: str,
                    python: str | None, cuda_base: str | None, hardware: str, shapes: str,
                    problems: tuple[str, ...], seeds: int | None, timeout: float | None,
                    scheduling: Scheduling, resume: bool = False,
                    keywords: tuple[str, ...] = ()) -> GradingOptions:
    """The staged options of one grading from the command line's words; each stage refuses,
    as it is made, what contradicts itself (a UsageError with the CLI's message)."""
    from grader.grading.config import GradingOptions
    from grader.grading.settings import GradingSettings, Narrowing

    settings = GradingSettings.model_validate(dict(
        policy=policy, device=device, runtime=runtime, hardware=hardware, shapes=shapes,
        problems=problems, seeds_per_shape=seeds, timeout_s=timeout))
    return GradingOptions(bundle=bundle, out_dir=out_dir, suite_roots=suite_roots,
                          seed_secret=seed_secret, resume=resume, settings=settings,
                          narrowing=Narrowing(keywords=keywords), python=python,
                          cuda_base=cuda_base, scheduling=scheduling)
