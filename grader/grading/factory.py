"""A grading's parts, built in one place: the engine (sandbox/docker_engine.get_engine), the
policy that the options name, its detector, the Grader; and the sandbox that runs a suite's
references outside a grading (suite check).

`grader run` (runner.py), a round's entries (round/entry.py), `grader selftest` and
`grader suite check` all build through here (issue 33: the policy -> detector -> grader
set-up was written in three places and the engine in twelve), so that they grade on the same
parts. Tests that play containers hand in an engine of their own (tests/unit/fake_engine.py).
"""

from __future__ import annotations

from dataclasses import replace

from grader.detect.detector import Detector
from grader.detect.policy import load_policy
from grader.grading.config import GradingOptions
from grader.grading.grader import Grader, worker_setup
from grader.grading.progress import Progress
from grader.run.jobs import WorkerSetup
from grader.sandbox.docker_engine import get_engine
from grader.sandbox.engine import ContainerEngine


def build_grader(cfg: GradingOptions, progress: Progress, *,
                 engine: ContainerEngine | None = None) -> Grader:
    """The Grader of `cfg`: its policy loaded (UsageError when none has that name) and named in
    the config as the policy calls itself (the report's and the checkpoint's name), its
    detector, and `engine` (None: the engine of this host, DockerUnavailable without one)."""
    policy = load_policy(cfg.settings.policy)
    return Grader(replace(cfg, settings=cfg.settings.but(policy=policy.name)),
                  engine or get_engine(), Detector(policy=policy), progress)


def reference_sandbox(cfg: GradingOptions, engine: ContainerEngine, session: str) -> WorkerSetup:
    """What a suite's reference runs in outside a grading (suite check): the sandbox of a
    grading's first worker, with no timing (nothing is timed there)."""
    return replace(worker_setup(cfg, engine, session), timing=None)
