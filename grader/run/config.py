"""The options of one grading run, built by the CLI and passed down whole."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from grader.images import RuntimeConfig
from grader.paths import PROBLEM_BUNDLES
from grader.sandbox.spec import Limits
from grader.verdicts import Verdict

# auto: smoke shapes on the CPU interpreter (the others take minutes there), all on a GPU.
ShapeSelection = Literal["auto", "all", "smoke", "scored"]


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    bundle: Path
    out_dir: Path
    suite_roots: tuple[Path, ...] = (PROBLEM_BUNDLES,)
    policy: str = "triton"
    hardware: str = "auto"  # a profile name; auto: cpu-interpreter, or matched to the GPU
    device: str = "cpu"  # "cpu" (Triton interpreter) or "cuda"
    gpus: tuple[int, ...] = (0,)  # --device cuda: one worker per GPU
    jobs: int = 1  # --device cpu: problems graded at once
    runtime: RuntimeConfig = field(default_factory=RuntimeConfig)
    shapes: ShapeSelection = "auto"
    problems: tuple[str, ...] = ()  # empty: every problem of the suite
    formats: tuple[str, ...] = ("json", "html")
    # Renderings meant for publication: no entry output but for compile and runtime errors
    # (report/public.py, issue 18); report.json stays the full record.
    public: bool = False
    fail_on: frozenset[Verdict] = frozenset()
    seed_secret: bytes | None = None  # None: a fresh secret for this run (or the checkpoint's)
    resume: bool = False  # finish the run checkpointed in out_dir (see grader/run/checkpoint.py)
    seeds_per_shape: int | None = None  # None: the suite's setting
    # A problem is graded in batches of shapes whose inputs, all cases counted, fit this
    # (run/plan.py): the inputs cross between containers as files.
    batch_bytes: int = 8 << 30
    # The reference's container and the entry's side by side (run.batch.run_pair): the
    # entry imports while the reference computes. False: one after the other.
    overlap: bool = True
    # Each batch's containers started while the batch before it runs, waiting at a gate after
    # their cold imports (grader/run/worker.py). auto: when the host has AHEAD_CORES cores a
    # worker (two running containers, two or more starting): on two cores it only slows the
    # run.
    start_ahead: Literal["auto", "on", "off"] = "auto"
    # How many batches' containers are started ahead at once (worker.py): a batch whose next
    # batch has no standby starts this many; the wait for their set-up falls on one batch in
    # this many.
    ahead_depth: int = 2
    entry_limits: Limits = field(default_factory=Limits)
    reference_limits: Limits = field(default_factory=lambda: Limits(
        memory_bytes=8 << 30, pids=512, output_bytes=4 << 30, wall_s=600.0))
