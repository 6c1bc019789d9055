"""The seeds a grading derives from its secret: each case's, and a module problem's; and the
cases they make of a problem's shapes."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import replace

from grader.formats.problem import Shape
from grader.model.runs import Case
from grader.run.jobs import TimingKnobs
from grader.suite.load import SuiteProblem


def derive_seed(secret: bytes, problem: str, shape: str, k: int) -> int:
    """A per-case seed from the run's secret: unpredictable to entries, reproducible to us."""
    digest = hmac.new(secret, f"{problem}/{shape}/{k}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") & 0x7FFF_FFFF


def derive_module_seed(secret: bytes, case_seed: int) -> int:
    """The seed a module problem's class is built under in both containers: from the case's
    seed, keyed by the secret, so that an entry learns nothing of its input seed from it."""
    digest = hmac.new(secret, f"module/{case_seed}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") & 0x7FFF_FFFF


def problem_cases(secret: bytes, sp: SuiteProblem, shapes: list[Shape], n_seeds: int,
                  timing: TimingKnobs | None) -> list[Case]:
    """A problem's cases under `secret`: `n_seeds` correctness cases a shape and, timed
    (`timing`), each shape's checked timed calls (model/timed.py); a module problem's module
    seeds. An entry's grading and a round's prepared references (grading/prepare.py) derive
    the same ones, so that a batch's key (grading/reuse.batch_key) is the same in both."""
    cases = [Case(id=f"{s.id}.{k}", shape=s, seed=derive_seed(secret, sp.id, s.id, k))
             for s in shapes for k in range(n_seeds)]
    if timing is not None:
        cases += [Case(id=f"{s.id}.t{k}", shape=s, timing=True,
                       seed=derive_seed(secret, sp.id, s.id, 1000 + k))
                  for s in shapes for k in range(timing.checked_per_shape)]
    if sp.problem.interface == "module":
        # A timed loop builds one module for its shape: its checked calls share its seed.
        first = {c.shape.id: c.seed for c in reversed(cases) if c.timing}
        cases = [replace(c, module_seed=derive_module_seed(
            secret, first[c.shape.id] if c.timing else c.seed)) for c in cases]
    return cases


def per_shape(cases: list[Case], shapes: list[Shape]) -> dict[str, int]:
    """What moves as files, by shape: its correctness cases (a checked timed call's inputs are
    drawn where it runs, and only its outputs' samples travel)."""
    return {s.id: sum(1 for c in cases if c.shape.id == s.id and not c.timing) for s in shapes}
