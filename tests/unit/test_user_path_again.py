"""Issue 34, the user's path a second pass: each friction replayed without Docker (the ones
that need the engine are in tests/integration/test_user_path_failures.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_user_path_run import _report  # the report of issue 23's tests, as they build it

from grader.errors import EXIT_CODES
from grader.model.results import ProblemResult, ShapeResult
from grader.paths import PROBLEM_BUNDLES, REPO
from grader.verdicts import Verdict

EXAMPLE = REPO / "examples" / "triton"


def _grader(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    return subprocess.run([sys.executable, "-m", "grader", *args], capture_output=True,
                          text=True, cwd=cwd, check=False, env=env, timeout=300)


# -- friction 5: the commands beside `run` -------------------------------------------------

def test_check_takes_a_kernel_file_and_a_folder_as_run_does(tmp_path: Path) -> None:
    kernel = tmp_path / "my_relu.py"
    kernel.write_text("import torch\n\n\ndef kernel(x):\n    return torch.relu(x)\n")
    res = _grader("check", str(kernel), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert f"{kernel}:5: fallback  FB001" in res.stdout  # the user's own file, by its name
    res = _grader("check", str(EXAMPLE), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "0 finding(s) in 3 file(s)" in res.stdout


def test_roofline_derive_names_the_mismatch_with_its_own_code(tmp_path: Path) -> None:
    problem = tmp_path / "vector_add"
    shutil.copytree(PROBLEM_BUNDLES / "demo" / "vector_add", problem)
    toml = problem / "problem.toml"
    toml.write_text(toml.read_text().replace('flops = "n"', 'flops = "2*n"'))
    res = _grader("roofline", "derive", str(problem), "--shape", "smoke_4099", cwd=tmp_path)
    assert res.returncode == EXIT_CODES["RooflineMismatch"] == 22, res.stderr
    assert "internal error" not in res.stderr and "hint:" in res.stderr
    assert f"{toml}: the flops or bytes expression disagrees" in res.stderr
    assert "smoke_4099: flops 8198 written, 4099 counted" in res.stderr


def test_a_linked_kernel_is_refused_as_docs_cli_says(tmp_path: Path) -> None:
    src = tmp_path / "sub"
    shutil.copytree(EXAMPLE, src)
    (src / "kernels" / "matmul.py").unlink()
    (src / "kernels" / "matmul.py").symlink_to(EXAMPLE / "kernels" / "matmul.py")
    res = _grader("bundle", "create", str(src), "-o", str(tmp_path / "b.tar"), cwd=tmp_path)
    assert res.returncode == EXIT_CODES["UnsafeMember"] == 12, res.stderr
    assert "a symbolic link" in res.stderr
    doc = (REPO / "docs" / "cli.md").read_text()
    assert "| 12 | `UnsafeMember` | absolute path, `..`, link" in doc


def test_bundle_check_of_a_kernel_that_does_not_parse_says_no_pass(tmp_path: Path) -> None:
    src = tmp_path / "sub"
    shutil.copytree(EXAMPLE, src)
    (src / "kernels" / "matmul.py").write_text("def kernel(:\n")
    assert _grader("bundle", "create", str(src), "-o", str(tmp_path / "b.tar"),
                   cwd=tmp_path).returncode == 0
    res = _grader("bundle", "check", str(tmp_path / "b.tar"), cwd=tmp_path)
    assert res.returncode == EXIT_CODES["KernelSourceError"], res.stderr
    assert "0 blocking" not in res.stdout
    assert "refused all the same: 1 kernel file(s) would not import" in res.stdout
    assert "kernels/matmul.py:1: does not parse" in res.stderr


# -- friction 6: failures shown where they are ---------------------------------------------

SYNTAX = ('Traceback (most recent call last):\n  File "/grader/lib/grader_harness/entry.py", '
          'line 140, in _import_entry\n  File "/grader/entry/kernel.py", line 4\n'
          '    def kernel(x:\n              ^\nSyntaxError: \'(\' was never closed\n')
RAISED = ('Traceback (most recent call last):\n  File "/grader/lib/grader_harness/entry.py", '
          'line 70, in __call__\n    out = fn(*args)\n  File "/grader/entry/kernel.py", line 9, '
          'in kernel\n    return _helper(x)\n  File "/grader/entry/kernel.py", line 5, in '
          '_helper\n    raise ValueError("bad block size")\nValueError: bad block size\n')
NO_KERNEL = ('Traceback (most recent call last):\n  File "/grader/lib/grader_harness/entry.py", '
             'line 150, in _import_entry\nAttributeError: the kernel file defines no callable '
             'kernel()\n')
HUNG = ('Fatal Python error: ...\n\nThread 0x00007f (most recent call first):\n'
        '  File "/grader/lib/grader_harness/warden.py", line 3 in wait\n\n'
        'Current thread 0x00007e (most recent call first):\n'
        '  File "/grader/entry/kernel.py", line 6 in spin\n'
        '  File "/grader/entry/kernel.py", line 10 in kernel\n'
        '  File "/grader/lib/grader_harness/entry.py", line 70 in __call__\n')


def test_an_import_failure_says_what_failed() -> None:
    from grader.judge.entry_import import import_failure

    assert import_failure(NO_KERNEL).startswith("the kernel file defines no callable kernel()")
    assert import_failure(SYNTAX) == "the kernel file does not parse at line 4 (SyntaxError)"
    assert import_failure("...\nModuleNotFoundError: No module named 'x'") == (
        "importing the kernel file failed (ModuleNotFoundError)")
    # The entry's own exception class is its text: it stays in the excerpt.
    assert import_failure("...\nStolenSecretError: x") == "importing the kernel file failed"
    assert import_failure(None) == "importing the kernel file failed"
    assert "no class ModelNew or Model" in import_failure(
        "AttributeError: the file defines no class ModelNew or Model")


def test_the_deepest_entry_frame_is_found_in_tracebacks_and_stack_dumps() -> None:
    from grader.report.failures import entry_frame

    name = "/grader/entry/kernel.py"
    assert entry_frame(SYNTAX, name) == f"{name}:4"
    assert entry_frame(RAISED, name) == f"{name}:5 (in _helper)"
    assert entry_frame(HUNG, name) == f"{name}:6 (in spin)"  # innermost first in a dump
    assert entry_frame(NO_KERNEL, name) is None
    assert entry_frame(RAISED, "kernels/other.py") is None


def _shape(sid: str, verdict: str, detail: str, excerpt: str | None) -> ShapeResult:
    return ShapeResult(id=sid, phase="decode", smoke=True, params={"n": 1},
                       verdict=Verdict(verdict), detail=detail, error_excerpt=excerpt)


def test_the_terminal_shows_file_line_and_error_of_each_failure() -> None:
    from grader.report.entry_paths import with_entry_paths
    from grader.report.failures import failure_lines

    shapes = [_shape("a", "runtime_error", "kernel() raised on seed 0001", RAISED),
              _shape("b", "runtime_error", "kernel() raised on seed 0001", RAISED),
              _shape("c", "passed", "correct", None)]
    rep = _report([ProblemResult(id="vector_add", operator="add", verdict=Verdict.RUNTIME_ERROR,
                                 kernel_file="kernels/vector_add.py", shapes=shapes),
                   ProblemResult(id="rmsnorm", operator="norm", verdict=Verdict.PASSED,
                                 kernel_file="kernels/rmsnorm.py",
                                 shapes=[_shape("s", "passed", "correct", None)])])
    lines = failure_lines(with_entry_paths(rep))
    assert lines == ["  vector_add/a (and 1 more shape(s)): runtime_error: kernel() raised on "
                     "seed 0001", "    at kernels/vector_add.py:5 (in _helper)",
                     "    ValueError: bad block size"]
    # One kernel file graded on its own: the texts and the lines name it as the user did.
    shown = with_entry_paths(rep, shown_as="my_add.py")
    assert failure_lines(shown)[1] == "    at my_add.py:5 (in _helper)"
    assert {p.kernel_file for p in shown.problems} == {"my_add.py"}


def test_a_timeout_shows_where_the_entry_was() -> None:
    from grader.report.failures import failure_lines

    rep = _report([ProblemResult(id="vector_add", operator="add", verdict=Verdict.TIMEOUT,
                                 kernel_file="/grader/entry/kernel.py",
                                 shapes=[_shape("a", "timeout", "killed after 3 s", HUNG)])])
    assert failure_lines(rep)[1:] == ["    at /grader/entry/kernel.py:6 (in spin) when it was "
                                      "stopped"]


def test_an_unknown_problem_has_a_hint() -> None:
    from grader.errors import UsageError
    from grader.suite.load import check_problems, load_suite

    with pytest.raises(UsageError) as raised:
        check_problems(load_suite(PROBLEM_BUNDLES / "demo"), ("vector_ad", "vector_add"))
    err = raised.value
    assert err.exit_code == EXIT_CODES["UsageError"]
    assert str(err) == ("--problem 'vector_ad' is not in suite demo\n  hint: did you mean "
                        "'vector_add'? suite demo has vector_add, rmsnorm, matmul")


# -- friction 7: suite check and release agree ---------------------------------------------

def _demo(tmp: Path) -> Path:
    suite = tmp / "demo"
    shutil.copytree(PROBLEM_BUNDLES / "demo", suite)
    return suite


def test_suite_check_refuses_the_kit_release_refuses(tmp_path: Path) -> None:
    """A reference that raises: `grader release` exits 21, and `suite check`'s kit line says
    so rather than "release kit ... ok" (its container runs are faked here: the raising
    reference is found by release's own self-check, which suite check now runs)."""
    from types import SimpleNamespace

    from grader.cli.suite import _lines
    from grader.grading.progress import Progress
    from grader.organiser.check import ShapeCheck, check_suite
    from grader.suite.load import load_suite

    root = _demo(tmp_path)
    ref = root / "vector_add" / "reference.py"
    ref.write_text(ref.read_text() + "\n\ndef reference(*inputs):\n"
                   "    raise RuntimeError('the organiser broke this')\n")
    res = _grader("release", "demo", "--suites", str(tmp_path), "-o", str(tmp_path / "k.tar"))
    assert res.returncode == EXIT_CODES["ReferenceFailed"] == 21, res.stderr

    class Runner:
        sandbox = SimpleNamespace(engine=SimpleNamespace(reap=lambda _s: None))

        def check(self, bundle, shapes, progress):  # type: ignore[no-untyped-def]
            return [ShapeCheck(problem=bundle.id, shape=s.id, verdict=Verdict.PASSED,
                               detail="fake") for s in shapes]

    got = check_suite(load_suite(root), shapes="smoke", make_runner=lambda _s: Runner(),
                      progress=Progress())
    lines = _lines(got)
    assert not any(line.startswith("ok  release kit") for line in lines)
    assert any(line.startswith("BAD release kit: grader release would refuse it: suite demo, "
                               "problem vector_add") for line in lines), lines
    err = got.error()
    assert err is not None and err.exit_code == 21


def test_release_warns_of_todo_and_suite_check_of_unlisted_folders(tmp_path: Path) -> None:
    from grader.suite.lint import warnings
    from grader.suite.load import load_suite

    root = _demo(tmp_path)
    assert _grader("init", "double", "--suite", str(root)).returncode == 0  # TODOs, unlisted
    assert warnings(load_suite(root)) == [
        f"{root / 'double'}: a problem folder that {root / 'suite.toml'} does not list; it is "
        "not checked, released or graded"]
    suite_toml = root / "suite.toml"
    suite_toml.write_text(suite_toml.read_text().replace('"matmul"]', '"matmul", "double"]'))
    res = _grader("release", "demo", "--suites", str(tmp_path), "-o", str(tmp_path / "k.tar"))
    assert res.returncode == 0, res.stderr
    assert (f"warning: {root / 'double' / 'problem.toml'}: problem double's description still "
            "says TODO") in res.stderr
    assert f"warning: {root / 'double' / 'reference.py'}:" in res.stderr
    assert (tmp_path / "k.tar").is_file()  # a warning, not a refusal


# -- the features users expected -----------------------------------------------------------

def test_gate_shorthands() -> None:
    from grader.cli.main import _gate, _verdict_set

    every_failure = frozenset(Verdict) - {Verdict.PASSED}
    assert _verdict_set("any-failure") == every_failure
    assert _gate(frozenset(), _verdict_set("passed")) == every_failure  # --require passed
    assert _gate(_verdict_set("timeout"), _verdict_set("passed,fallback")) == (
        every_failure - {Verdict.FALLBACK})
    assert _gate(_verdict_set("incorrect"), frozenset()) == {Verdict.INCORRECT}


def test_k_and_last_failed_narrow_the_shapes(tmp_path: Path) -> None:
    from grader.grading.config import GradingOptions, RunOptions
    from grader.grading.last_failed import last_failed
    from grader.grading.selection import select_shapes
    from grader.grading.settings import GradingSettings, Narrowing
    from grader.suite.load import load_suite

    demo = load_suite(PROBLEM_BUNDLES / "demo")
    g = GradingOptions(bundle=tmp_path / "b.tar", out_dir=tmp_path,
                       settings=GradingSettings(shapes="all"),
                       narrowing=Narrowing(keywords=("prefill",)))
    cfg = RunOptions(grading=g)
    assert [s.id for s in select_shapes(demo.problems["vector_add"], g.settings,
                                        g.narrowing)] == ["residual_prefill"]
    # not graded at all, not `missing`
    assert not g.narrowing.picks_any("vector_add", ["smoke_4099"])

    said = last_failed(cfg)[1]
    assert said.startswith("--last-failed: no ") and "grading everything" in said
    shapes = [_shape("smoke_4099", "incorrect", "wrong", None),
              _shape("residual_decode", "passed", "ok", None)]
    rep = _report([ProblemResult(id="vector_add", operator="add", verdict=Verdict.INCORRECT,
                                 shapes=shapes),
                   ProblemResult(id="matmul", operator="mm", verdict=Verdict.MISSING),
                   ProblemResult(id="rmsnorm", operator="norm", verdict=Verdict.PASSED,
                                 shapes=[_shape("s", "passed", "ok", None)])])
    (tmp_path / "report.json").write_text(rep.model_dump_json())
    got, said = last_failed(RunOptions(grading=GradingOptions(bundle=tmp_path / "b.tar",
                                                              out_dir=tmp_path)))
    assert got.presentation.force  # the reports it read are replaced
    narrowed = got.grading.narrowing
    assert got.grading.settings.problems == ("vector_add", "matmul")
    assert narrowed.only_shapes == ("vector_add/smoke_4099", "matmul/*")
    assert "grading again 2 shape(s)" in said
    assert narrowed.picks("vector_add", "smoke_4099")
    assert not narrowed.picks("vector_add", "residual_decode")
    assert narrowed.picks("matmul", "anything")


def test_the_kit_holds_a_kernel_stub_per_problem(tmp_path: Path) -> None:
    import ast
    import io
    import tarfile

    from grader.organiser.release_kit import build_kit
    from grader.suite.load import load_suite

    suite = load_suite(PROBLEM_BUNDLES / "demo")
    with tarfile.open(fileobj=io.BytesIO(build_kit(suite))) as tar:
        tar.extractall(tmp_path, filter="data")
    kit = tmp_path / "demo"
    for pid, bundle in suite.problems.items():
        stub = (kit / "kernels" / f"{pid}.py").read_text()
        ref = ast.parse((bundle.directory / "reference.py").read_text())
        want = next(n for n in ref.body if isinstance(n, ast.FunctionDef)
                    and n.name == "reference")
        got = next(n for n in ast.parse(stub).body if isinstance(n, ast.FunctionDef)
                   and n.name == "kernel")
        assert [a.arg for a in got.args.args] == [a.arg for a in want.args.args]
        assert f"--problem {pid} --suite demo" in stub
    # The kit's manifest and stubs are a bundle as they stand; the stub says what is missing.
    res = _grader("bundle", "create", str(kit), "-o", str(tmp_path / "b.tar"))
    assert res.returncode == 0, res.stderr
    namespace: dict[str, object] = {}
    exec(compile((kit / "kernels" / "vector_add.py").read_text(), "stub", "exec"), namespace)
    try:
        namespace["kernel"](1, 2)  # type: ignore[operator]
    except NotImplementedError as exc:
        assert "vector_add: write it in Triton" in str(exc)
    else:
        raise AssertionError("the stub computes something")
