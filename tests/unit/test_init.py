"""`grader init`: the scaffold is valid as written, its reference runs, nothing is overwritten."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli.main import cli
from grader.cli.tools import register
from grader.errors import UsageError
from grader.formats._base import load_toml
from grader.formats.problem import Problem
from grader.suite.load import load_problem
from grader.suite.scaffold import render, scaffold

register(cli)


def test_scaffold_validates_and_its_reference_runs(tmp_path: Path) -> None:
    made = scaffold("my_op", tmp_path / "suite")
    assert [p.name for p in made.files] == ["problem.toml", "reference.py"]
    bundle = load_problem(made.directory)  # the same loader `grader run` uses
    problem = load_toml(made.directory / "problem.toml", Problem, UsageError)
    assert problem == bundle.problem and problem.id == "my_op"
    assert [s.smoke for s in problem.shapes] == [True]
    assert "TODO" in problem.description and "TODO" in problem.hidden.provenance

    torch = pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("ref", made.directory / "reference.py")
    assert spec is not None and spec.loader is not None
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    shape = problem.shapes[0]
    inputs = ref.make_inputs(7, "cpu", **shape.params)
    again = ref.make_inputs(7, "cpu", **shape.params)
    assert all(torch.equal(a, b) for a, b in zip(inputs, again, strict=True))  # seeded
    out = ref.reference(*inputs)
    assert out.shape == (shape.params["n"],) and str(out.dtype).endswith(problem.dtypes[0])


def test_scaffold_flops_and_bytes_match_the_reference(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    derive = pytest.importorskip("grader.scoring.derive")
    made = scaffold("my_op", tmp_path)
    rows = derive.check(made.directory, shapes=None, rtol=0.01, device="cpu")
    assert rows and all(r.ok for r in rows)


def test_refuses_to_overwrite(tmp_path: Path) -> None:
    (tmp_path / "my_op").mkdir()
    (tmp_path / "my_op" / "problem.toml").write_text("mine")
    with pytest.raises(UsageError, match="already exists"):
        scaffold("my_op", tmp_path)
    assert (tmp_path / "my_op" / "problem.toml").read_text() == "mine"


@pytest.mark.parametrize("bad", ["", "../x", "a/b", "-x", "x" * 65, "a b"])
def test_refuses_bad_ids(tmp_path: Path, bad: str) -> None:
    with pytest.raises(UsageError, match="not a valid problem id") as err:
        scaffold(bad, tmp_path)
    assert err.value.hint
    assert list(tmp_path.iterdir()) == []


def test_next_steps_mention_suite_listing_only_when_missing(tmp_path: Path) -> None:
    (tmp_path / "suite.toml").write_text('[suite]\nid = "s"\nversion = "1"\nproblems = ["p"]\n')
    assert not any("suite.toml" in s for s in scaffold("p", tmp_path).next_steps)
    assert any("suite.toml" in s for s in scaffold("q", tmp_path).next_steps)


def test_render_is_pure_and_names_the_problem(tmp_path: Path) -> None:
    texts = render("abc", tmp_path / "abc")
    assert 'id = "abc"' in texts["problem.toml"] and "`abc`" in texts["reference.py"]
    assert not list(tmp_path.iterdir())


def test_cli(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["init", "vec", "--suite", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "created" in res.output and "next:" in res.output
    res = CliRunner().invoke(cli, ["init", "vec", "--suite", str(tmp_path)])
    # CliRunner bypasses main(), which maps the error to its exit code (test_cli checks that).
    assert isinstance(res.exception, UsageError) and res.exception.exit_code == 2
