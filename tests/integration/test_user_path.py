"""Issue 23 against the real engine: grading one kernel file and a folder, the Markdown report
naming the participant's path and error, the output folder reused, a broken reference."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.paths import PROBLEM_BUNDLES, REPO

pytestmark = pytest.mark.docker


def _grader(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grader", *args], capture_output=True,
                          text=True, cwd=REPO, check=False)


def test_one_kernel_file_then_a_folder_into_one_output(engine, runtime, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    kernel = tmp_path / "my_add.py"
    kernel.write_text("import triton\nimport no_such_module_here\n\ndef kernel(x, y):\n"
                      "    return x\n")
    out = tmp_path / "out"
    res = _grader("run", str(kernel), "--problem", "vector_add", "--suite", "demo", "-o",
                  str(out), "--format", "json,md")
    assert res.returncode == 0, res.stderr
    rep = json.loads((out / "report.json").read_text())
    assert rep["problems"][0]["verdict"] == "compile_error"
    md = (out / "report.md").read_text()
    assert "/grader/entry" not in md and "no\\_such\\_module\\_here" in md
    # The one kernel file is named as given (issue 34), not as the packing placed it.
    assert "my\\_add.py" in md and "kernels/vector\\_add.py" not in md
    assert not (out / ".checkpoint").exists() and (out / "seed.secret").is_file()

    # Another submission into the same folder: refused, then replaced with --force, and the
    # first run's report.md (a format this run does not write) does not survive beside it.
    folder = REPO / "examples" / "triton"
    res = _grader("run", str(folder), "--problem", "vector_add", "-o", str(out))
    assert res.returncode == 2 and "another submission" in res.stderr and "--force" in res.stderr
    res = _grader("run", str(folder), "--problem", "vector_add", "-o", str(out), "--force",
                  "--keep-checkpoint")
    assert res.returncode == 0, res.stderr
    assert json.loads((out / "report.json").read_text())["problems"][0]["verdict"] == "passed"
    assert not (out / "report.md").exists() and (out / ".checkpoint").is_dir()


def test_a_broken_reference_blames_the_suite(engine, runtime, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    suite = tmp_path / "suites" / "demo"
    shutil.copytree(PROBLEM_BUNDLES / "demo", suite)
    ref = suite / "vector_add" / "reference.py"
    ref.write_text(ref.read_text() + "\n\ndef reference(*inputs):\n"
                   "    raise RuntimeError('the organiser broke this')\n")
    out = tmp_path / "out"
    res = _grader("run", str(REPO / "examples" / "triton"), "--problem", "vector_add",
                  "--suites", str(tmp_path / "suites"), "-o", str(out))
    assert res.returncode == 21, res.stderr
    assert str(ref) in res.stderr and "hint:" in res.stderr
    rep = json.loads((out / "report.json").read_text())  # the reports are still written
    shapes = rep["problems"][0]["shapes"]
    assert {s["verdict"] for s in shapes} == {"reference_error"}, shapes
    assert "the organiser broke this" in shapes[0]["error_excerpt"]


def test_from_init_to_a_graded_kernel(engine, runtime, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    suite = tmp_path / "my-suite"
    res = _grader("init", "double", "--suite", str(suite))
    assert res.returncode == 0, res.stderr
    kernel = tmp_path / "double.py"
    kernel.write_text(
        "import torch\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        "def _double(x_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    mask = offs < n\n"
        "    tl.store(out_ptr + offs, 2 * tl.load(x_ptr + offs, mask=mask), mask=mask)\n\n\n"
        "def kernel(x):\n    out = torch.empty_like(x)\n    n = x.numel()\n"
        "    _double[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)\n    return out\n")
    out = tmp_path / "out"
    res = _grader("run", str(kernel), "--problem", "double", "--suite", str(suite), "-o",
                  str(out))
    assert res.returncode == 0, res.stderr
    rep = json.loads((out / "report.json").read_text())
    assert rep["suite"]["id"] == "my-suite"
    assert [p["verdict"] for p in rep["problems"]] == ["passed"], rep["problems"]
