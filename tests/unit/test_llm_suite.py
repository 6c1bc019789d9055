"""The llm-inference suite as a whole: it loads, its weights are the script's output, and
every problem has a solution."""

from __future__ import annotations

import subprocess
import sys
import tomllib

import pytest

from grader.formats.submission import Manifest
from grader.paths import PROBLEM_BUNDLES, REPO
from grader.suite import load_suite

SUITE = PROBLEM_BUNDLES / "llm-inference"


def test_suite_has_at_least_eighteen_problems() -> None:
    # shapes, phases and smoke shapes per problem: test_llm_solutions.py
    assert len(load_suite(SUITE).problems) >= 18


def test_weights_are_what_the_script_writes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    before = (SUITE / "weights.toml").read_text()
    res = subprocess.run([sys.executable, str(SUITE / "make_weights.py")], capture_output=True,
                         text=True, cwd=REPO, check=False)
    after = (SUITE / "weights.toml").read_text()
    (SUITE / "weights.toml").write_text(before)
    assert res.returncode == 0, res.stderr
    assert after == before, "weights.toml is stale: run make_weights.py"
    weights = load_suite(SUITE).weights.weights
    assert abs(sum(w.weight for w in weights) - 1.0) < 1e-4
    assert all(w.shape for w in weights)


@pytest.mark.parametrize("folder", ["llm-inference", "llm-inference-torch"])
def test_every_problem_has_a_solution(folder: str) -> None:
    """Our Triton solutions, and the pure-PyTorch baseline entry."""
    manifest = Manifest.model_validate(
        tomllib.loads((REPO / "solutions" / folder / "submission.toml").read_text()))
    assert set(manifest.problems) == set(load_suite(SUITE).problems)
    for entry in manifest.problems.values():
        assert (REPO / "solutions" / folder / entry.file).is_file()
