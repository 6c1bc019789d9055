"""On an NVIDIA GPU (run with --run-gpu): every bundled problem draws its inputs on the device.

The CPU suite tests check the same properties on the CPU (tests/unit/suite_checks.py); here the
generator is a CUDA one, which the CPU never exercises: every draw must name the device, the
same seed must give the same tensors, and neither global RNG may move.
"""

from __future__ import annotations

import sys

import pytest

from grader.paths import PROBLEM_BUNDLES, REPO
from grader.suite.load import load_suite

sys.path.insert(0, str(REPO / "tests" / "unit"))  # the CPU tests' shared checks
from suite_checks import assert_seeded_inputs

pytestmark = pytest.mark.gpu

SUITES = {name: load_suite(PROBLEM_BUNDLES / name) for name in ("demo", "llm-inference")}
PROBLEMS = [(name, pid) for name, suite in SUITES.items() for pid in suite.problems]
SEED_INDEPENDENT = {("llm-inference", "rope"): frozenset({3})}  # inv_freq: see test_llm_solutions


@pytest.mark.parametrize(("suite", "pid"), PROBLEMS)
def test_inputs_are_drawn_seeded_on_the_device(suite: str, pid: str) -> None:
    assert_seeded_inputs(SUITES[suite].problems[pid], f"_gpu_{suite.replace('-', '_')}",
                         SEED_INDEPENDENT.get((suite, pid), frozenset()), device="cuda")
