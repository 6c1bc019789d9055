"""Where a problem's grading time went: the host's clocks and each harness's own counts.

Kept in a problem's `phases_s` for bench/overhead.py: evidence of cost, never of a verdict.
"""

from __future__ import annotations

import math

from grader.model.runs import Evidence

# The phases each harness process counts (harness.main.Phases), kept as "<role>.<phase>".
# Only these names: the entry writes that file.
# "standby" (the cold imports of a container started ahead, run.ahead.Standby),
# "standby_prepare" (the entry's GPU set-up there, in place of "prepare") and "gate" (its wait
# for the release) come before the container's release: its wall leaves them out.
AHEAD_PHASES = {"reference": ("standby", "gate"), "entry": ("standby", "standby_prepare", "gate")}
HARNESS_PHASES = {"reference": ("import", "inputs", "reference", "timing",
                                *AHEAD_PHASES["reference"]),
                  "entry": ("prepare", "record", "job_wait", "warm", "inputs", "call", "save",
                            "build", "timing_wait", "timing", *AHEAD_PHASES["entry"])}


def harness_phases(role: str, run: Evidence) -> dict[str, float]:
    got = run.out.result.phases_s if run.out.result is not None else {}
    return {f"{role}.{k}": got[k] for k in HARNESS_PHASES[role]
            if k in got and math.isfinite(got[k]) and got[k] >= 0}


def add(phases: dict[str, float], more: dict[str, float]) -> None:
    """Sum phase seconds over a problem's batches."""
    for k, v in more.items():
        phases[k] = phases.get(k, 0.0) + v
