"""`grader suite check` without Docker: bit-equality, roofline expressions, the kit, which
error the command exits with, and the checks run over a fake reference runner."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from grader.errors import InfraError, ProblemError, ReferenceFailed
from grader.formats.problem import Shape
from grader.grading.progress import Progress
from grader.organiser.check import (
    ShapeCheck,
    SuiteCheck,
    _bits_equal,
    check_suite,
    kit_error,
    roofline_errors,
)
from grader.paths import PROBLEM_BUNDLES
from grader.suite.load import SuiteProblem, load_suite
from grader.verdicts import Verdict


def test_bits_equal() -> None:
    nan = torch.tensor([float("nan"), 1.0])
    assert _bits_equal([nan], [nan.clone()])  # NaN equals itself bit for bit
    assert not _bits_equal([torch.tensor([0.0])], [torch.tensor([-0.0])])
    assert not _bits_equal([torch.ones(2)], [torch.ones(2, dtype=torch.float64)])
    assert _bits_equal({"a": torch.ones(2), "k": 3}, {"a": torch.ones(2), "k": 3})
    assert not _bits_equal({"a": torch.ones(2)}, {"b": torch.ones(2)})


def _suite(tmp: Path) -> Path:
    shutil.copytree(PROBLEM_BUNDLES / "demo", tmp / "demo")
    return tmp / "demo"


def test_roofline_expressions_and_the_kit(tmp_path: Path) -> None:
    root = _suite(tmp_path)
    suite = load_suite(root)
    assert all(not roofline_errors(b) for b in suite.problems.values())
    assert kit_error(suite)[0] is None and kit_error(suite)[1] > 0
    toml = root / "vector_add" / "problem.toml"
    toml.write_text(toml.read_text().replace('bytes = "3*4*n"', 'bytes = "n - n"'))
    errors = roofline_errors(load_suite(root).problems["vector_add"])
    assert len(errors) == 3 and errors[0].startswith("vector_add/smoke_4099: ")
    # An output count that names no param of the shapes: said per shape, as the others.
    toml.write_text(toml.read_text().replace('bytes = "n - n"', 'bytes = "3*4*n"\n'
                                             'output_bytes = "4*rows"'))
    errors = roofline_errors(load_suite(root).problems["vector_add"])
    assert len(errors) == 3 and "rows" in errors[0]
    # A description that names a hidden shape: the kit refuses to ship it.
    toml.write_text(toml.read_text().replace('description = """', 'description = """'
                                             'Graded on residual_prefill. '))
    assert "residual_prefill" in str(kit_error(load_suite(root))[0])


def _check(problem: str, verdict: Verdict) -> ShapeCheck:
    return ShapeCheck(problem=problem, shape="s", verdict=verdict, detail="d")


def test_the_exit_error_blames_the_suite_first() -> None:
    refs = {"a": "/s/a/reference.py"}
    both = SuiteCheck(suite="x", shapes=[_check("a", Verdict.REFERENCE_ERROR),
                                         _check("b", Verdict.INFRA_ERROR)], references=refs)
    err = both.error()
    assert isinstance(err, ReferenceFailed) and "/s/a/reference.py" in err.message
    assert isinstance(SuiteCheck(suite="x", roofline=["a/s: bad"]).error(), ProblemError)
    assert isinstance(SuiteCheck(suite="x", kit=ProblemError("leaks")).error(), ProblemError)
    # release's self-check blames a reference: the suite's fault, as `grader release` says.
    refused = SuiteCheck(suite="x", kit=ReferenceFailed("suite x, problem a: raised"),
                         shapes=[_check("a", Verdict.PASSED)]).error()
    assert isinstance(refused, ReferenceFailed) and refused.exit_code == 21
    infra = SuiteCheck(suite="x", shapes=[_check("b", Verdict.INFRA_ERROR)]).error()
    assert type(infra) is InfraError
    sound = SuiteCheck(suite="x", shapes=[_check("a", Verdict.PASSED)])
    assert sound.ok and sound.error() is None


class FakeRunner:
    """Stands in for the container runs: a verdict per problem."""

    def __init__(self, verdicts: dict[str, Verdict]) -> None:
        self.verdicts = verdicts
        self.reaped: list[str] = []
        self.sandbox = SimpleNamespace(engine=SimpleNamespace(reap=self.reaped.append))

    def check(self, bundle: SuiteProblem, shapes: list[Shape], progress: Progress
              ) -> list[ShapeCheck]:
        return [ShapeCheck(problem=bundle.id, shape=s.id, verdict=self.verdicts[bundle.id],
                           detail="fake") for s in shapes]


@pytest.mark.parametrize(("shapes", "count"), [("all", 3), ("smoke", 1), ("scored", 2)])
def test_check_suite_selects_shapes_and_reaps(tmp_path: Path, shapes: str, count: int) -> None:
    suite = load_suite(_suite(tmp_path))
    runner = FakeRunner({"vector_add": Verdict.PASSED})
    made: list[str] = []

    def make(session: str) -> FakeRunner:
        made.append(session)
        return runner

    got = check_suite(suite, problems=("vector_add",), shapes=shapes, make_runner=make,
                      progress=Progress())
    assert len(got.shapes) == count and got.ok
    assert runner.reaped == made  # the session's containers are removed


def test_a_reference_that_does_not_parse_is_refused_before_any_run(tmp_path: Path) -> None:
    root = _suite(tmp_path)
    (root / "rmsnorm" / "reference.py").write_text("def reference(:\n")
    with pytest.raises(ReferenceFailed):
        check_suite(load_suite(root), make_runner=lambda s: pytest.fail("ran"),
                    progress=Progress())
