"""From the command line's words to a graded, reported run."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path

import click

from grader.config import RunConfig
from grader.detect.policy import load_policy
from grader.detection import Detector
from grader.errors import UsageError, VerdictGate
from grader.grade import Grader
from grader.imaging import RuntimeConfig
from grader.paths import PROBLEM_BUNDLES
from grader.report.model import Report
from grader.report.render import write_reports
from grader.sandbox.docker_engine import DockerEngine
from grader.verdicts import Verdict


@dataclass(frozen=True, kw_only=True)
class RunRequest:
    bundle: Path
    out_dir: Path
    suite_roots: tuple[Path, ...] = ()
    policy: str = "triton"
    device: str = "cpu"
    shapes: str = "auto"
    problems: tuple[str, ...] = ()
    seeds: int | None = None
    timeout: float | None = None
    formats: tuple[str, ...] = ("json", "html")
    fail_on: frozenset[Verdict] = frozenset()
    seed_secret: str | None = None
    quiet: bool = False
    runtime: str = "cpu"  # cpu | cuda | host
    python: str | None = None  # interpreter inside the container (cuda, host)
    cuda_base: str | None = None
    gpu: int = 0
    hardware: str = "auto"


def to_config(req: RunRequest) -> RunConfig:
    secret = None
    if req.seed_secret is not None:
        try:
            secret = bytes.fromhex(req.seed_secret)
        except ValueError:
            raise UsageError("--seed-secret must be hexadecimal") from None
    cfg = RunConfig(bundle=req.bundle, out_dir=req.out_dir,
                    suite_roots=req.suite_roots or (PROBLEM_BUNDLES,), policy=req.policy,
                    device=req.device, shapes=req.shapes,  # type: ignore[arg-type]
                    problems=req.problems, formats=req.formats, fail_on=req.fail_on,
                    seed_secret=secret, seeds_per_shape=req.seeds)
    python = req.python or (sys.executable if req.runtime == "host" else "python3")
    runtime = RuntimeConfig(kind=req.runtime, python=python,  # type: ignore[arg-type]
                            **({"cuda_base": req.cuda_base} if req.cuda_base else {}))
    cfg = replace(cfg, runtime=runtime, gpu_index=req.gpu, hardware=req.hardware)
    if req.device == "cuda":
        # A CUDA context, torch and Triton's compiler need far more than the CPU defaults.
        cfg = replace(cfg, entry_limits=replace(cfg.entry_limits, memory_bytes=32 << 30,
                                                pids=1024, cpus=4.0),
                      reference_limits=replace(cfg.reference_limits, memory_bytes=64 << 30,
                                               pids=1024, cpus=4.0))
    if req.runtime == "cpu" and req.device == "cuda":
        raise UsageError("--device cuda needs --runtime cuda or --runtime host")
    if req.timeout is not None:
        cfg = replace(cfg, entry_limits=replace(cfg.entry_limits, wall_s=req.timeout))
    return cfg


def summary_line(rep: Report) -> str:
    s = rep.summary
    counts = ", ".join(f"{n} {v}" for v, n in sorted(s.verdicts.items()))
    return (f"{rep.submission.name}: {s.shapes} shapes in {s.problems} problems: {counts}; "
            f"correct {s.correctness_rate:.0%}, in {rep.submission.dsl} {s.dsl_adoption_rate:.0%}")


def grade_bundle(req: RunRequest) -> Report:
    cfg = to_config(req)
    policy = load_policy(cfg.policy)
    cfg = replace(cfg, policy=policy.name)

    def progress(msg: str) -> None:
        if not req.quiet:
            click.echo(f"[grader] {msg}", err=True)

    grader = Grader(cfg, DockerEngine(), Detector(policy=policy), progress)
    rep = grader.run()
    paths = write_reports(rep, cfg.out_dir, list(cfg.formats))
    click.echo(summary_line(rep))
    for fmt, path in paths.items():
        click.echo(f"{fmt}: {path}")
    # The secret behind the report's seed commitment: for the organiser, to reproduce inputs.
    secret_file = cfg.out_dir / "seed.secret"
    secret_file.write_text(grader.secret.hex() + "\n")
    secret_file.chmod(0o600)
    hit = sorted({s.verdict for p in rep.problems for s in p.shapes} & cfg.fail_on)
    if hit:
        print(f"failing: verdicts {', '.join(hit)} occurred (--fail-on)", file=sys.stderr)
        raise VerdictGate(f"--fail-on: {', '.join(hit)}")
    return rep
