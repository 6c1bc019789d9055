"""The command line: help texts, exit codes, and the table of codes in docs/cli.md."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli import cli
from grader.cli_tools import register
from grader.errors import EXIT_CODES
from grader.paths import REPO

register(cli)
COMMANDS = ["run", "check", "report", "images", "doctor", "policy", "bundle"]


def test_help_lists_every_command() -> None:
    out = CliRunner().invoke(cli, ["--help"]).output
    for name in COMMANDS:
        assert name in out


@pytest.mark.parametrize("args", [[c] for c in COMMANDS] + [
    ["images", "build"], ["images", "list"], ["images", "render"], ["images", "prune"],
    ["policy", "show"], ["bundle", "create"]])
def test_every_command_has_help(args: list[str]) -> None:
    res = CliRunner().invoke(cli, [*args, "--help"])
    assert res.exit_code == 0 and "Usage:" in res.output and len(res.output) > 100


def test_exit_codes_are_distinct_and_documented() -> None:
    assert len(set(EXIT_CODES.values())) == len(EXIT_CODES)
    doc = (REPO / "docs" / "cli.md").read_text()
    for name, code in EXIT_CODES.items():
        assert f"| {code} | `{name}` |" in doc


def _grader(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grader", *args], capture_output=True,
                          text=True, cwd=cwd, check=False)


def test_bad_bundle_exits_with_its_code(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tar"
    bad.write_bytes(b"this is not a tar archive at all" * 20)
    res = _grader("check", str(bad), cwd=tmp_path)
    assert res.returncode == EXIT_CODES["BundleUnreadable"]
    assert "error:" in res.stderr and "Traceback" not in res.stderr


def test_bundle_create_then_check(tmp_path: Path) -> None:
    out = tmp_path / "b.tar"
    res = _grader("bundle", "create", str(REPO / "examples" / "triton"), "-o", str(out),
                  cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    first = out.read_bytes()
    _grader("bundle", "create", str(REPO / "examples" / "triton"), "-o", str(out), cwd=tmp_path)
    assert out.read_bytes() == first  # reproducible


def test_render_prints_dockerfile_without_docker() -> None:
    res = CliRunner().invoke(cli, ["images", "render", "runtime-cuda", "--cuda-base", "my/base:1"])
    assert res.exit_code == 0
    assert "FROM my/base:1" in res.output and res.output.startswith("# tag: grader-runtime-cuda:")
