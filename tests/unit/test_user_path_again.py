"""Issue 34, the user's path a second pass: each friction replayed without Docker (the ones
that need the engine are in tests/integration/test_user_path.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from grader.errors import EXIT_CODES
from grader.paths import PROBLEM_BUNDLES, REPO

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
