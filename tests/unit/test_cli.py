"""The command line: help texts, exit codes, and the table of codes in docs/cli.md."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from grader.cli import scoring as cli_scoring
from grader.cli import tools as cli_tools
from grader.cli.main import cli
from grader.errors import EXIT_CODES
from grader.paths import REPO

cli_tools.register(cli)
cli_scoring.register(cli)
COMMANDS = ["run", "check", "report", "images", "doctor", "policy", "bundle", "init", "selftest",
            "hardware", "roofline", "leaderboard", "compare", "release", "rescore"]


def test_help_lists_every_command() -> None:
    out = CliRunner().invoke(cli, ["--help"]).output
    for name in COMMANDS:
        assert name in out


@pytest.mark.parametrize("args", [[c] for c in COMMANDS] + [
    ["images", "build"], ["images", "list"], ["images", "render"], ["images", "prune"],
    ["policy", "show"], ["bundle", "create"], ["bundle", "check"]])
def test_every_command_has_help(args: list[str]) -> None:
    res = CliRunner().invoke(cli, [*args, "--help"])
    assert res.exit_code == 0 and "Usage:" in res.output and len(res.output) > 100


def _codes() -> dict[str, int]:
    return EXIT_CODES


def test_exit_codes_are_distinct_and_documented_in_one_table() -> None:
    codes = _codes()
    assert len(set(codes.values())) == len(codes)
    doc = (REPO / "docs" / "cli.md").read_text()
    table = doc.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| `(\w+)` \|", table, flags=re.M)
    assert dict((name, int(code)) for code, name in rows) == codes


def _grader(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # This checkout's grader, whatever `pip install -e` points the interpreter at.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    return subprocess.run([sys.executable, "-m", "grader", *args], capture_output=True,
                          text=True, cwd=cwd, check=False, env=env)


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


# -- grader bundle check: its exit codes end to end (no Docker needed) -------------------

def test_bundle_check_accepts_the_example(tmp_path: Path) -> None:
    out = tmp_path / "b.tar"
    assert _grader("bundle", "create", str(REPO / "examples" / "triton"), "-o", str(out),
                   cwd=tmp_path).returncode == 0
    res = _grader("bundle", "check", str(out), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    for text in ("layout: 4 file(s) of at most 256", "kernels/matmul.py",
                 "suite demo: every problem has a kernel", "0 blocking", "ok:"):
        assert text in res.stdout


def test_bundle_check_gates_on_blocking_findings(tmp_path: Path) -> None:
    out = tmp_path / "b.tar"
    _grader("bundle", "create", str(REPO / "examples" / "torch-fallback"), "-o", str(out),
            cwd=tmp_path)
    res = _grader("bundle", "check", str(out), cwd=tmp_path)
    assert res.returncode == _codes()["FindingsGate"] == 4
    assert "FB001" in res.stdout and "hint:" in res.stderr and "Traceback" not in res.stderr


def test_bundle_check_refused_bundle_exits_with_intake_code(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tar"
    bad.write_bytes(b"\x00" * 10 + b"not a tar" * 100)
    res = _grader("bundle", "check", str(bad), cwd=tmp_path)
    assert res.returncode in range(10, 16)
    assert res.stderr.startswith("error:")


def test_bundle_create_leaves_nothing_when_refused(tmp_path: Path) -> None:
    src = tmp_path / "sub"
    (src / "kernels").mkdir(parents=True)
    (src / "submission.toml").write_text('[submission]\nname = "x"\nsuite = "demo"\n\n'
                                         '[problems.vector_add]\nfile = "kernels/gone.py"\n')
    out = tmp_path / "out" / "b.tar"
    res = _grader("bundle", "create", str(src), "-o", str(out), cwd=tmp_path)
    assert res.returncode == EXIT_CODES["ManifestError"]
    assert not out.exists() and list(out.parent.iterdir()) == []


def test_init_refusal_exit_code(tmp_path: Path) -> None:
    assert _grader("init", "p1", "--suite", str(tmp_path), cwd=tmp_path).returncode == 0
    res = _grader("init", "p1", "--suite", str(tmp_path), cwd=tmp_path)
    assert res.returncode == EXIT_CODES["UsageError"]
    assert "already exists" in res.stderr and "hint:" in res.stderr


# -- --fail-on and --log-format: option parsing -------------------------------------------

def test_fail_on_parsing() -> None:
    import click

    from grader.cli.main import _verdict_set
    from grader.verdicts import Verdict

    assert _verdict_set("") == frozenset()
    assert _verdict_set(" fallback, incorrect ,") == {Verdict.FALLBACK, Verdict.INCORRECT}
    with pytest.raises(click.BadParameter, match="expected verdicts among"):
        _verdict_set("fallback,bogus")


def test_gpus_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import grader.grading.runner

    seen = []
    monkeypatch.setattr(grader.grading.runner, "grade_bundle",
                        lambda req, progress: seen.append(req.grading.scheduling.gpus))
    for args, gpus in ((["--gpus", "1, 0,3"], (1, 0, 3)), (["--gpu", "2", "--gpu", "2"], (2,)),
                       ([], (0,))):
        res = CliRunner().invoke(cli, ["run", str(tmp_path / "b.tar"), *args])
        assert res.exit_code == 0, res.output
        assert seen.pop() == gpus


@pytest.mark.parametrize(("option", "value", "text"), [
    ("--gpus", "0,x", "expected GPU indices"),
    ("--gpus", "64", "expected GPU indices"),
    ("--fail-on", "nonsense", "expected verdicts among"),
    ("--log-format", "xml", "human"),
    ("--format", "pdf", "unknown format"),
])
def test_run_rejects_bad_options_before_grading(tmp_path: Path, option: str, value: str,
                                               text: str) -> None:
    res = _grader("run", str(tmp_path / "none.tar"), option, value, cwd=tmp_path)
    assert res.returncode == 2 and text in res.stderr


def _report(*verdicts: str) -> SimpleNamespace:
    shapes = [SimpleNamespace(id=f"s{i}", verdict=v) for i, v in enumerate(verdicts)]
    return SimpleNamespace(problems=[SimpleNamespace(id="p", shapes=shapes)])


def test_gate_failure_names_the_shapes_and_where_the_reports_are(tmp_path: Path) -> None:
    from grader.errors import VerdictGate
    from grader.grading.runner import gate_failure
    from grader.verdicts import Verdict

    gate = frozenset({Verdict.FALLBACK, Verdict.INCORRECT})
    gate_failure(_report(Verdict.PASSED, Verdict.TIMEOUT), gate, tmp_path)  # type: ignore[arg-type]
    with pytest.raises(VerdictGate) as err:
        gate_failure(_report(*[Verdict.FALLBACK] * 4, Verdict.INCORRECT), gate,  # type: ignore[arg-type]
                     tmp_path)
    msg = str(err.value)
    assert "5 shape(s)" in msg and "fallback x4" in msg and "p/s0: fallback" in msg
    assert "and 2 more" in msg and str(tmp_path) in msg and err.value.exit_code == 3


def test_device_cuda_with_cpu_runtime_says_what_to_do(tmp_path: Path) -> None:
    from grader.errors import UsageError
    from grader.grading.config import GradingOptions
    from grader.grading.settings import GradingSettings

    with pytest.raises(UsageError) as err:
        GradingSettings(device="cuda")
    assert "--runtime host" in (err.value.hint or "")
    with pytest.raises(UsageError, match="not hexadecimal"):
        GradingOptions(bundle=tmp_path / "b.tar", out_dir=tmp_path, seed_secret="zz")
    with pytest.raises(UsageError) as err:  # the command line's words, staged in one place
        CliRunner().invoke(cli, ["run", str(tmp_path / "b.tar"), "--device", "cuda"],
                           standalone_mode=False, catch_exceptions=False)
    assert "--runtime host" in (err.value.hint or "")


def test_bundle_create_refuses_links_out_of_the_folder(tmp_path: Path) -> None:
    """In CI the folder is an untrusted pull request: a link must not pack a runner's file."""
    import shutil

    from grader.errors import UnsafeMember
    from grader.intake.tools import create_bundle

    src = tmp_path / "sub"
    shutil.copytree(REPO / "examples" / "triton", src)
    secret = tmp_path / "runner-secret"
    secret.write_text("token")
    (src / "kernels" / "matmul.py").unlink()
    (src / "kernels" / "matmul.py").symlink_to(secret)
    with pytest.raises(UnsafeMember, match="symbolic link"):
        create_bundle(src, tmp_path / "b.tar")
    assert not (tmp_path / "b.tar").exists()


def test_readme_names_every_command_and_links_existing_docs() -> None:
    readme = (REPO / "README.md").read_text()
    for name in COMMANDS:
        assert f"`grader {name}" in readme, name
    for ref in re.findall(r"`((?:docs|examples|ci|\.github)/[\w./-]+)`", readme):
        assert (REPO / ref).exists(), ref
    shot = re.search(r"!\[[^\]]*\]\((docs/[\w.-]+\.png)\)", readme)
    assert shot and (REPO / shot.group(1)).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
