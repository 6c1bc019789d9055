"""The options of one grading run, as the user gives them (`grader run`, `grader round`,
`grader suite check`, selftest), passed down whole from the CLI to the workers.

What the run layer needs in another form is derived here, once: the runtime image's config,
the secret's bytes, the limits for --device cuda and --timeout, a practice run's shapes.
`__post_init__` refuses options that contradict each other, with the CLI's messages."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, cast

from grader.errors import UsageError
from grader.grading.practice import practice_shapes
from grader.sandbox.runtimes import RuntimeConfig, runtime_config, runtime_for
from grader.sandbox.spec import Limits
from grader.suite.roots import suite_roots
from grader.verdicts import Verdict

# An entry's harness set-up (the container's start, a cold `import torch`, the recorder) is
# allowed this long before --timeout starts to count (sandbox.spec.Limits.setup_s): seconds on
# a loaded host; the same allowance as a standby's (run.batch.GATE_WAIT_S).
ENTRY_SETUP_S = 300.0
# auto: smoke shapes on the CPU interpreter (the others take minutes there), all on a GPU.
ShapeSelection = Literal["auto", "all", "smoke", "scored"]


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    bundle: Path  # a tar, or (grader run) a folder or one kernel file packed on the fly
    out_dir: Path
    # --suites as given; made the full lookup order (suite/roots.py) as the config is made
    suite_roots: tuple[Path, ...] = ()
    suite: str | None = None  # the suite (id or folder): one kernel file's, or the bundle's
    policy: str = "triton"
    hardware: str = "auto"  # a profile name; auto: cpu-interpreter, or matched to the GPU
    device: str = "cpu"  # "cpu" (Triton interpreter) or "cuda"
    runtime: str = "cpu"  # cpu | cuda | host: see runtime_config
    python: str | None = None  # interpreter inside the container (cuda, host)
    cuda_base: str | None = None  # base image of the cuda runtime; None: RuntimeConfig's
    gpus: tuple[int, ...] = (0,)  # --device cuda: one worker per GPU
    jobs: int = 1  # --device cpu: problems graded at once
    shapes: str = "auto"  # a ShapeSelection, as given: see shape_selection
    problems: tuple[str, ...] = ()  # empty: every problem of the suite
    # -k: only the shapes whose PROBLEM/SHAPE contains one of these (as pytest's -k, by
    # substring); empty: every shape --shapes selects.
    keywords: tuple[str, ...] = ()
    # --last-failed (grading/last_failed.py): only these PROBLEM/SHAPE ids, `PROBLEM/*` for a
    # whole problem; empty: no such narrowing.
    only_shapes: tuple[str, ...] = ()
    seeds: int | None = None  # input sets per shape; None: the suite's setting
    timeout: float | None = None  # wall-clock limit of each entry container, seconds
    formats: tuple[str, ...] = ("json", "html")
    # Renderings meant for publication: no entry output but for compile and runtime errors
    # (report/public.py, issue 18); report.json stays the full record.
    public: bool = False
    fail_on: frozenset[Verdict] = frozenset()
    # Hex, as --seed-secret takes it (see secret); None: a fresh secret for this run (or the
    # checkpoint's).
    seed_secret: str | None = None
    resume: bool = False  # finish the run checkpointed in out_dir (grader/grading/checkpoint.py)
    force: bool = False  # replace another submission's reports in out_dir
    keep_checkpoint: bool = False  # keep out_dir/.checkpoint after a run that completed
    quiet: bool = False
    log_format: str = "human"  # human | json (see grader.grading.progress)
    json: bool = False  # one summary object on stdout (report/summaries.py); text on stderr
    practice: bool = False  # public shapes only, nothing hidden in any output (practice.py)
    # A problem is graded in batches of shapes whose inputs, all cases counted, fit this
    # (run/plan.py): the inputs cross between containers as files.
    batch_bytes: int = 8 << 30
    # The reference's container and the entry's side by side (run.batch.run_pair): the
    # entry imports while the reference computes. False (--sequential): one after the other.
    overlap: bool = True
    # Each batch's containers started while the batch before it runs, waiting at a gate after
    # their cold imports (grader/grading/worker.py). auto: when the host has AHEAD_CORES cores a
    # worker (two running containers, two or more starting): on two cores it only slows the
    # run. auto | on | off.
    start_ahead: str = "auto"
    # How many batches' containers are started ahead at once (worker.py): a batch whose next
    # batch has no standby starts this many; the wait for their set-up falls on one batch in
    # this many.
    ahead_depth: int = 2
    # The limits before --device cuda and --timeout (see entry_limits, reference_limits).
    base_entry_limits: Limits = field(default_factory=lambda: Limits(setup_s=ENTRY_SETUP_S))
    base_reference_limits: Limits = field(default_factory=lambda: Limits(
        memory_bytes=8 << 30, pids=512, output_bytes=4 << 30, wall_s=600.0))

    def __post_init__(self) -> None:
        object.__setattr__(self, "suite_roots", suite_roots(self.suite_roots, suite=self.suite))
        _ = self.secret  # raises UsageError for a secret that is not hexadecimal
        if self.practice:
            practice_shapes(self.shapes)  # raises for --shapes all|scored
        if self.resume and (self.keywords or self.only_shapes):
            raise UsageError("--resume finishes the run checkpointed in -o as it was started: "
                             "it takes no -k or --last-failed",
                             hint="resume first, then grade again with -k or --last-failed")
        runtime_for(self.runtime_config).check_device(self.device)  # e.g. cuda on cpu's

    def picks(self, problem: str, shape: str) -> bool:
        """Whether -k and --last-failed leave `shape` of `problem` in."""
        name = f"{problem}/{shape}"
        return ((not self.keywords or any(k in name for k in self.keywords))
                and (not self.only_shapes or name in self.only_shapes
                     or f"{problem}/*" in self.only_shapes))

    def picks_any(self, problem: str, shapes: list[str]) -> bool:
        """Whether -k and --last-failed leave any of `shapes` in (a problem they leave none
        of is not graded at all, rather than graded `missing`)."""
        return (not self.keywords and not self.only_shapes) or any(
            self.picks(problem, s) for s in shapes)

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
        return runtime_config(self.runtime, python=self.python, cuda_base=self.cuda_base)

    @property
    def shape_selection(self) -> ShapeSelection:
        """The shapes graded: --shapes, or a practice run's public (smoke) shapes."""
        return cast(ShapeSelection, practice_shapes(self.shapes) if self.practice
                    else self.shapes)

    @property
    def entry_limits(self) -> Limits:
        """Each entry container's limits: the base, for --device cuda, under --timeout."""
        limits = self.base_entry_limits
        if self.device == "cuda":
            # A CUDA context, torch and Triton's compiler need far more than the CPU defaults.
            limits = replace(limits, memory_bytes=32 << 30, pids=1024, cpus=4.0)
        if self.timeout is not None:
            limits = replace(limits, wall_s=self.timeout)
        return limits

    @property
    def reference_limits(self) -> Limits:
        """Each reference container's limits: the base, for --device cuda."""
        limits = self.base_reference_limits
        if self.device == "cuda":
            limits = replace(limits, memory_bytes=64 << 30, pids=1024, cpus=4.0)
        return limits
