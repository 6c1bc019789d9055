"""A problem graded on no shape is `missing`, never `passed`, and `--fail-on` gates on it
(issue 20: an imported problem without smoke shapes was "passed (0/0 shapes passed)" on a CPU,
and `--fail-on fallback,incorrect,missing` exited 0)."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.errors import VerdictGate
from grader.grading.runner import gate_failure
from grader.grading.selection import nothing_graded, select_shapes
from grader.grading.settings import GradingSettings
from grader.model.results import ProblemResult
from grader.paths import PROBLEM_BUNDLES
from grader.suite.load import load_suite
from grader.verdicts import Verdict

DEMO = load_suite(PROBLEM_BUNDLES / "demo")


def test_no_selected_shape_is_missing_and_says_why(tmp_path: Path) -> None:
    bundle = next(iter(DEMO.problems.values()))
    scored = select_shapes(bundle, GradingSettings(shapes="scored"))
    result = nothing_graded(bundle, GradingSettings(), [], "kernels/x.py")
    assert result.verdict is Verdict.MISSING and result.shapes == []
    assert "no shape graded" in result.detail and "--shapes all" in result.detail
    assert scored  # the demo's problems do have shapes: only the selection was empty
    assert result.kernel_file == "kernels/x.py"


def test_fail_on_gates_a_problem_without_shapes(tmp_path: Path) -> None:
    from types import SimpleNamespace

    empty = ProblemResult(id="imported", operator="op", verdict=Verdict.MISSING,
                          detail="no shape graded")
    rep = SimpleNamespace(problems=[empty])
    gate_failure(rep, frozenset({Verdict.FALLBACK}), tmp_path)  # type: ignore[arg-type]
    with pytest.raises(VerdictGate, match=r"imported/-: missing"):
        gate_failure(rep, frozenset({Verdict.MISSING}), tmp_path)  # type: ignore[arg-type]


def test_suite_roots_come_before_the_working_directory(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """`--suites` first: an import's source folder named like its suite must not shadow it."""
    import shutil

    from grader.errors import ProblemError
    from grader.suite.load import find_suite

    roots = tmp_path / "suites"
    shutil.copytree(PROBLEM_BUNDLES / "demo", roots / "demo")
    (tmp_path / "demo").mkdir()  # e.g. the source checkout, in the working directory
    monkeypatch.chdir(tmp_path)
    assert find_suite("demo", [roots]).directory == roots / "demo"
    with pytest.raises(ProblemError):
        find_suite("demo", [tmp_path / "none"])  # the folder here is no suite
    assert find_suite(str(roots / "demo"), []).id == "demo"  # a path still works
