"""The options of a grading, in stages (issue 33; cibuildwheel's command line -> global and
per-build options was the example): each layer takes the stage it reads, not the whole.

- `GradingSettings` (settings.py): what a problem's result depends on; the one type the
  checkpoint's key and the round's settings reuse.
- `Scheduling`: how the work is spread (GPUs, jobs, containers started ahead, batch size,
  Ray); never what a result is.
- `Presentation`: how the outcome is shown and kept (formats, progress, --json, --public,
  --fail-on, the output folder's handling); read by runner.py only.
- `GradingOptions`: what one grading reads (grader.Grader): the bundle, the output folder,
  the suites, the secret, the settings, the narrowing (-k, --last-failed), the runtime image
  and the scheduling. Its workers get the settings, the scheduling and the derived limits.
- `RunOptions`: `grader run`'s whole command line, the grading and its presentation.

What the run layer needs in another form is derived here, once: the runtime image's config,
the secret's bytes, the limits for --device cuda and --timeout, a practice run's shapes.
Each stage refuses, as it is made, options that contradict each other, with the CLI's
messages (the settings theirs: settings.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from grader.errors import UsageError
from grader.grading.practice import practice_shapes
from grader.grading.settings import Device, GradingSettings, Narrowing
from grader.sandbox.runtimes import RuntimeConfig, runtime_config
from grader.sandbox.spec import Limits
from grader.suite.roots import suite_roots
from grader.verdicts import Verdict

# An entry's harness set-up (the container's start, a cold `import torch`, the recorder) is
# allowed this long before --timeout starts to count (sandbox.spec.Limits.setup_s): seconds on
# a loaded host; the same allowance as a standby's (run.ahead.GATE_WAIT_S).
ENTRY_SETUP_S = 300.0
# Cores a worker needs for starting ahead to pay: its two running containers, and a batch
# ahead's two making their imports (at depth 2, two batches' four, one batch in two). On the
# two-core CI machine (2026-12-01) the demo suite's grading took 9.4-9.6 s with it against
# 9.1-10.6 s without: no core to overlap on.
AHEAD_CORES = 4
# Cores a worker needs for its timed loops to run beside host work (time_beside auto): on the
# H200's 16-core host (2026-12-05, bench/beside_noise.py) three kernels from 3.7 µs to 734 µs
# timed beside two standbys' set-up moved their medians by 0.02 % at most, beside
# judging-like float64 comparisons by 0.04 %, within quiet's own spread of round medians
# (0.03-0.85 %); on the two-core CI machine a standby's cold imports take the cores a
# launch-bound loop runs on.
BESIDE_CORES = 8


@dataclass(frozen=True, kw_only=True)
class Scheduling:
    """How a grading's work is spread over the host, or a round's over a Ray cluster."""

    gpus: tuple[int, ...] = (0,)  # --device cuda: one worker per GPU
    jobs: int = 1  # --device cpu: problems graded at once
    # A problem is graded in batches of shapes whose outputs, all cases counted, fit this
    # (run/plan.py): they cross between containers as files and wait in each side's folder
    # until judged (inputs are drawn where they are used, one case at a time).
    batch_bytes: int = 8 << 30
    # The reference's container and the entry's side by side (run.pair.run_pair): the
    # entry imports while the reference computes. False (--sequential): one after the other.
    overlap: bool = True
    # Each batch's containers started while the batch before it runs, waiting at a gate after
    # their cold imports (grader/grading/worker.py). auto: when the host has AHEAD_CORES cores
    # a worker (two running containers, two or more starting): on two cores it only slows the
    # run. auto | on | off.
    start_ahead: str = "auto"
    # How many batches' containers are started ahead at once (worker.py): a batch whose next
    # batch has no standby starts this many; the wait for their set-up falls on one batch in
    # this many. Timed beside them (time_beside), each batch starts the one this many after it.
    ahead_depth: int = 2
    # Whether a running batch's timed loops run beside the host's other work for its worker:
    # the standbys started beside it setting up (cold imports, and on a GPU the CUDA context
    # and profiler set-up) and the judging of the batch before it. Off, they wait until those
    # are done (run.ahead.Beside). auto: on when the host has BESIDE_CORES cores a worker.
    time_beside: str = "auto"
    # An entry's batches run as workers of one serving container (run/served.py) instead of a
    # container each: no container start and no cold imports a batch (issue 32). Measured on
    # the H200 and the H100 (docs/benchmarks.md), not yet with the hostile GPU cases: off
    # unless asked (--serve).
    serve: bool = False
    ray: str | None = None  # a round's entries: None on this host; "auto" or a cluster's address

    def slots(self, device: Device) -> tuple[int, ...]:
        """One per worker: each GPU on --device cuda, else --jobs CPU slots."""
        return self.gpus if device == "cuda" else tuple(range(self.jobs))

    def ahead(self, workers: int, cores: int | None = None) -> int:
        """How many batches ahead `workers` workers start containers (0: none): ahead_depth
        when start_ahead says so (auto: when the host has AHEAD_CORES cores a worker)."""
        if self.start_ahead != "auto":
            on = self.start_ahead == "on"
        else:
            on = (cores if cores is not None else os.cpu_count() or 1) >= AHEAD_CORES * workers
        return self.ahead_depth if on else 0

    def beside(self, workers: int, cores: int | None = None) -> bool:
        """Whether the timed loops of `workers` workers run beside their host work (auto:
        when the host has BESIDE_CORES cores a worker)."""
        if self.time_beside != "auto":
            return self.time_beside == "on"
        return (cores if cores is not None else os.cpu_count() or 1) >= BESIDE_CORES * workers


@dataclass(frozen=True, kw_only=True)
class Presentation:
    """How a run's outcome is shown and kept: never what a result is."""

    formats: tuple[str, ...] = ("json", "html")
    # Renderings meant for publication: no entry output but for compile and runtime errors
    # (report/public.py, issue 18); report.json stays the full record.
    public: bool = False
    fail_on: frozenset[Verdict] = frozenset()
    quiet: bool = False
    log_format: str = "human"  # human | json (see grader.grading.progress)
    json: bool = False  # one summary object on stdout (report/summaries.py); text on stderr
    # Practice (practice.py): the report and lines with nothing hidden; its shapes, the public
    # ones, are the settings' (RunOptions folds them in).
    practice: bool = False
    force: bool = False  # replace another submission's reports in out_dir
    keep_checkpoint: bool = False  # keep out_dir/.checkpoint after a run that completed


@dataclass(frozen=True, kw_only=True)
class GradingOptions:
    """What one grading reads: `grader run`'s, a round entry's, a selftest case's."""

    bundle: Path  # a tar (grader run packs a folder or one kernel file first: runner.py)
    out_dir: Path  # its checkpoint (and the secret's file) while it grades
    # --suites as given; made the full lookup order (suite/roots.py) as the options are made
    suite_roots: tuple[Path, ...] = ()
    # Hex, as --seed-secret takes it (see secret); None: a fresh secret for this run (or the
    # checkpoint's).
    seed_secret: str | None = None
    resume: bool = False  # finish the run checkpointed in out_dir (grader/grading/checkpoint.py)
    settings: GradingSettings = field(default_factory=GradingSettings)
    narrowing: Narrowing = field(default_factory=Narrowing)
    python: str | None = None  # interpreter inside the container (cuda, host)
    cuda_base: str | None = None  # base image of the cuda runtime; None: RuntimeConfig's
    scheduling: Scheduling = field(default_factory=Scheduling)
    # The limits before --device cuda and --timeout (see entry_limits, reference_limits).
    base_entry_limits: Limits = field(default_factory=lambda: Limits(setup_s=ENTRY_SETUP_S))
    base_reference_limits: Limits = field(default_factory=lambda: Limits(
        memory_bytes=8 << 30, pids=512, output_bytes=4 << 30, wall_s=600.0))

    def __post_init__(self) -> None:
        object.__setattr__(self, "suite_roots", suite_roots(self.suite_roots))
        _ = self.secret  # raises UsageError for a secret that is not hexadecimal
        if self.resume and self.narrowing:
            raise UsageError("--resume finishes the run checkpointed in -o as it was started: "
                             "it takes no -k or --last-failed",
                             hint="resume first, then grade again with -k or --last-failed")

    @property
    def secret(self) -> bytes | None:
        """--seed-secret's bytes; None: a fresh secret for this run (or the checkpoint's)."""
        if self.seed_secret is None:
            return None
        try:
            return bytes.fromhex(self.seed_secret)
        except ValueError:
            raise UsageError("--seed-secret: not hexadecimal",
                             hint="pass the contents of the seed.secret file a run wrote "
                             "(hex digits), or leave it out for a fresh secret") from None

    @property
    def runtime_config(self) -> RuntimeConfig:
        """The runtime: --runtime, --python (host: this interpreter by default) and
        --cuda-base (sandbox/runtimes.py)."""
        return runtime_config(self.settings.runtime, python=self.python,
                              cuda_base=self.cuda_base)

    @property
    def entry_limits(self) -> Limits:
        """Each entry container's limits: the base, for --device cuda, under --timeout."""
        limits = self.base_entry_limits
        if self.settings.device == "cuda":
            # A CUDA context, torch and Triton's compiler need far more than the CPU defaults.
            limits = replace(limits, memory_bytes=32 << 30, pids=1024, cpus=4.0)
        if self.settings.timeout_s is not None:
            limits = replace(limits, wall_s=self.settings.timeout_s)
        return limits

    @property
    def reference_limits(self) -> Limits:
        """Each reference container's limits: the base, for --device cuda."""
        limits = self.base_reference_limits
        if self.settings.device == "cuda":
            limits = replace(limits, memory_bytes=64 << 30, pids=1024, cpus=4.0)
        return limits


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """`grader run`'s command line, staged (cli/main.py builds it): the grading, and how its
    outcome is shown. `suite` is --suite: one kernel file's suite (runner.py packs it), whose
    folder, when it names one, is looked in first for suites."""

    grading: GradingOptions
    presentation: Presentation = field(default_factory=Presentation)
    suite: str | None = None

    def __post_init__(self) -> None:
        g = self.grading
        if self.suite is not None:
            g = replace(g, suite_roots=suite_roots(g.suite_roots, suite=self.suite))
        if self.presentation.practice:  # raises for --shapes all|scored
            g = replace(g, settings=g.settings.but(shapes=practice_shapes(g.settings.shapes)))
        object.__setattr__(self, "grading", g)
