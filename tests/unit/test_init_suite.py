"""Issue 23, item 9: `grader init` into a new suite creates a suite that loads, and never
touches an existing suite's files."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli.main import cli
from grader.cli.tools import register
from grader.errors import UsageError
from grader.suite.load import find_suite, load_suite
from grader.suite.scaffold import scaffold

register(cli)


def test_init_into_a_new_suite_makes_a_suite_that_loads(tmp_path: Path) -> None:
    suite_dir = tmp_path / "my-suite"
    made = scaffold("my_op", suite_dir)
    assert [p.name for p in made.suite_files] == ["suite.toml", "weights.toml"]
    suite = load_suite(suite_dir)  # the loader `grader run` uses
    assert suite.id == "my-suite" and list(suite.problems) == ["my_op"]
    assert suite.weights.weights == []  # the scaffold's only shape is smoke: no weight yet
    assert find_suite("my-suite", [tmp_path]).id == "my-suite"
    assert not any("[suite].problems" in s for s in made.next_steps)  # already listed
    assert any(f"--suite {suite_dir}" in s for s in made.next_steps)

    before = {p: p.read_bytes() for p in (suite_dir / "suite.toml", suite_dir / "weights.toml")}
    second = scaffold("other_op", suite_dir)
    assert second.suite_files == []
    assert {p: p.read_bytes() for p in before} == before
    assert any("add 'other_op' to [suite].problems" in s for s in second.next_steps)


def test_the_command_lists_every_file_it_made(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["init", "my_op", "--suite", str(tmp_path / "s")])
    assert res.exit_code == 0, res.output
    created = [line.split()[-1] for line in res.output.splitlines()
               if line.startswith("created ")]
    assert [Path(c).name for c in created] == ["suite.toml", "weights.toml", "problem.toml",
                                               "reference.py"]


def test_a_new_suite_needs_a_valid_folder_name(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not a valid suite id"):
        scaffold("my_op", tmp_path / "bad name")
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "weights.toml").write_text("version = '1'\n")
    with pytest.raises(UsageError, match="never overwrites"):
        scaffold("my_op", tmp_path / "w")
