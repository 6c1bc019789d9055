"""Every llm-inference problem folder loads, its make_inputs is seeded, and our Triton
solution and the pure-PyTorch baseline entry match the reference on every smoke shape under
Triton's CPU interpreter (one subprocess for all cases)."""

from __future__ import annotations

from typing import Any

import pytest
from suite_checks import assert_matched, assert_seeded_inputs, run_interpreted, smoke_case

from grader.paths import PROBLEM_BUNDLES, REPO
from grader.suite.load import SuiteProblem, load_suite

KERNELS = REPO / "solutions" / "llm-inference" / "kernels"
TORCH_KERNELS = REPO / "solutions" / "llm-inference-torch" / "kernels"
BUNDLES: dict[str, SuiteProblem] = dict(load_suite(PROBLEM_BUNDLES / "llm-inference").problems)
PROBLEMS = sorted(BUNDLES)
SMOKE_CASES = [(pid, s.id) for pid, b in BUNDLES.items() for s in b.problem.shapes if s.smoke]
# Inputs that are a function of the shape's params alone, the same for every seed:
# rope's inv_freq = theta ** (-2i/D) (its notes say why it is an input).
SEED_INDEPENDENT = {"rope": frozenset({3})}


@pytest.fixture(scope="module")
def smoke_results() -> dict[str, dict[str, Any]]:
    """Every smoke case of every problem, run once in one interpreter subprocess."""
    return run_interpreted(
        [smoke_case(f"{entry}:{pid}/{s.id}", b, s, folder / f"{pid}.py")
         for entry, folder in (("triton", KERNELS), ("torch", TORCH_KERNELS))
         for pid, b in BUNDLES.items() for s in b.problem.shapes if s.smoke], timeout=240)


@pytest.mark.parametrize("pid", PROBLEMS)
def test_problem_has_shapes_provenance_and_solution(pid: str) -> None:
    problem = BUNDLES[pid].problem
    phases = [s.phase for s in problem.shapes if not s.smoke]
    assert any(s.smoke for s in problem.shapes), f"{pid}: no smoke shape"
    assert phases.count("prefill") >= 2 and phases.count("decode") >= 2, phases
    assert problem.hidden.provenance
    assert (KERNELS / f"{pid}.py").is_file() and (TORCH_KERNELS / f"{pid}.py").is_file()


@pytest.mark.parametrize("pid", PROBLEMS)
def test_make_inputs_is_seeded(pid: str) -> None:
    assert_seeded_inputs(BUNDLES[pid], "_llm", SEED_INDEPENDENT.get(pid, frozenset()))


@pytest.mark.parametrize(("pid", "shape_id"), SMOKE_CASES)
@pytest.mark.parametrize("entry", ["triton", "torch"])
def test_solution_matches_reference(smoke_results: dict[str, dict[str, Any]], entry: str,
                                    pid: str, shape_id: str) -> None:
    assert_matched(smoke_results, f"{entry}:{pid}/{shape_id}")
