"""Issue 23, item 5: `grader release` refuses a suite whose reference does not import, or fails
on its smallest shape on the CPU, naming the file; it writes no kit then."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli.scoring import release
from grader.errors import ReferenceFailed
from grader.organiser.selfcheck import self_check, smallest
from grader.paths import PROBLEM_BUNDLES
from grader.suite.load import load_suite

pytest.importorskip("torch")


def _suite(tmp: Path, tail: str | None = None) -> Path:
    suite = tmp / "demo"
    shutil.copytree(PROBLEM_BUNDLES / "demo", suite)
    if tail is not None:
        ref = suite / "vector_add" / "reference.py"
        ref.write_text(ref.read_text() + tail)
    return suite


def test_the_demo_suite_passes_on_its_smallest_shapes(tmp_path: Path) -> None:
    suite = load_suite(_suite(tmp_path))
    checked = self_check(suite)
    assert [c.problem for c in checked] == list(suite.problems)
    assert all(suite.problems[c.problem].problem.shapes for c in checked)
    assert smallest(list(suite.problems["vector_add"].problem.shapes)).smoke


@pytest.mark.parametrize(("tail", "says"), [
    ("\nimport no_such_module_for_the_reference\n", "import failed"),
    ("\ndef reference(*inputs):\n    raise RuntimeError('broken')\n", "the reference failed"),
])
def test_a_broken_reference_is_refused_with_no_kit(tmp_path: Path, tail: str,
                                                   says: str) -> None:
    suite_dir = _suite(tmp_path, tail)
    kit = tmp_path / "kit.tar"
    res = CliRunner().invoke(release, ["demo", "-o", str(kit), "--suites", str(tmp_path)])
    assert isinstance(res.exception, ReferenceFailed), res.output
    assert res.exception.exit_code == 21
    assert str(suite_dir / "vector_add" / "reference.py") in res.exception.message
    assert says in res.exception.message and res.exception.hint
    assert not kit.exists()


def test_no_run_check_still_refuses_a_reference_that_does_not_import(tmp_path: Path) -> None:
    _suite(tmp_path, "\ndef reference(*inputs):\n    raise RuntimeError('GPU only')\n")
    kit = tmp_path / "kit.tar"
    res = CliRunner().invoke(release, ["demo", "-o", str(kit), "--suites", str(tmp_path),
                                       "--no-run-check"])
    assert res.exit_code == 0, res.output
    assert kit.is_file()
    _suite(tmp_path / "b", "\nimport no_such_module_for_the_reference\n")
    with pytest.raises(ReferenceFailed):
        self_check(load_suite(tmp_path / "b" / "demo"), run=False)
