"""Issue 34 against the real engine: what a participant grading one kernel file reads on the
terminal (friction 6), and what --timeout counts and shows (friction 4)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grader.paths import REPO

pytestmark = pytest.mark.docker

ADD = ("import torch\nimport triton\nimport triton.language as tl\n\n\n@triton.jit\n"
       "def _add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
       "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
       "    mask = offs < n\n"
       "    x = tl.load(x_ptr + offs, mask=mask)\n"
       "    y = tl.load(y_ptr + offs, mask=mask)\n"
       "    tl.store(out_ptr + offs, x + y, mask=mask)\n\n\n"
       "def kernel(x, y):\n"
       "    out = torch.empty_like(x)\n"
       "    n = x.numel()\n"
       "    _add[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)\n"
       "    return out\n")


def _run(kernel: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grader", "run", str(kernel), "--problem",
                           "vector_add", "--suite", "demo", "-o", str(out), "--format", "json",
                           *extra], capture_output=True, text=True, cwd=REPO, check=False,
                          timeout=600)


def test_failures_show_the_users_file_and_line(engine, runtime, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # A syntax error: its file:line on the terminal, the file as the user named it.
    bad = tmp_path / "my_add.py"
    bad.write_text(ADD.replace("def kernel(x, y):", "def kernel(x, y:"))
    res = _run(bad, tmp_path / "syntax")
    assert res.returncode == 0, res.stderr
    assert "compile_error: the kernel file does not parse at line 15 (SyntaxError)" in res.stdout
    assert f"at {bad}:15" in res.stdout
    assert "kernels/vector_add.py" not in res.stdout
    problem = json.loads((tmp_path / "syntax" / "report.json").read_text())["problems"][0]
    assert problem["kernel_file"] == str(bad)
    assert f'File "{bad}", line 15' in problem["shapes"][0]["error_excerpt"]

    # No kernel(): said so, not "importing the kernel file failed".
    bad.write_text(ADD.replace("def kernel(x, y):", "def kernal(x, y):"))
    res = _run(bad, tmp_path / "nokernel")
    assert "the kernel file defines no callable kernel()" in res.stdout, res.stdout

    # An exception: the deepest frame in the entry's file, and the error's line.
    bad.write_text(ADD.replace("    out = torch.empty_like(x)\n",
                               "    out = torch.empty_like(x)\n    _check(n=x.numel())\n")
                   + "\n\ndef _check(n):\n    raise ValueError(f'no block size for {n}')\n")
    res = _run(bad, tmp_path / "raises")
    assert "runtime_error" in res.stdout, res.stdout
    assert f"at {bad}:24 (in _check)" in res.stdout
    assert "ValueError: no block size for 4099" in res.stdout

    # Wrong values: the worst elements with their indices, got and expected.
    bad.write_text(ADD.replace("x + y, mask=mask", "x - y, mask=mask"))
    res = _run(bad, tmp_path / "wrong")
    assert "incorrect" in res.stdout and "; worst: output 0[" in res.stdout, res.stdout
    rep = json.loads((tmp_path / "wrong" / "report.json").read_text())
    assert "got " in rep["problems"][0]["shapes"][0]["detail"]


def test_timeout_counts_the_entry_and_shows_where_it_hung(engine, runtime, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Friction 4: --timeout counted the container's start and `import torch`, so an honest
    smoke kernel was `timeout` at --timeout 3, with the message a real hang gets; and a hang
    said nothing of where the entry was. The hang is killed 3 s after its harness armed the
    clock, in its own code: counted from the container's start, a cold `import torch` would
    have been where it stopped. An honest kernel's own time is the host's speed (a loaded
    two-core host took more than 3 s for the smoke kernel through Triton's interpreter): its
    run has room for that."""
    honest = tmp_path / "my_add.py"
    honest.write_text(ADD)
    res = _run(honest, tmp_path / "honest", "--timeout", "120")
    assert res.returncode == 0, res.stderr
    rep = json.loads((tmp_path / "honest" / "report.json").read_text())
    assert rep["problems"][0]["verdict"] == "passed", rep["problems"][0]["shapes"][0]["detail"]

    hung = tmp_path / "my_hang.py"
    # The loop on one line: wherever the signal finds it, the stack names that line.
    hung.write_text(ADD.replace("    out = torch.empty_like(x)\n",
                                "    _wait_forever()\n    out = torch.empty_like(x)\n")
                    + "\n\ndef _wait_forever():\n    while True: pass\n")
    res = _run(hung, tmp_path / "hung", "--timeout", "3")
    assert res.returncode == 0, res.stderr
    shape = json.loads((tmp_path / "hung" / "report.json").read_text())["problems"][0][
        "shapes"][0]
    assert shape["verdict"] == "timeout"
    assert "killed after 3 s" in shape["detail"]  # the limit counts from the harness's set-up
    assert "most recent call first" in shape["error_excerpt"]  # faulthandler, relayed
    assert f"at {hung}:24 (in _wait_forever) when it was stopped" in res.stdout, res.stdout


def test_k_and_last_failed_grade_what_was_asked(engine, runtime, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """-k grades only the shapes it names; --last-failed only what failed the run before; a
    --require passed gate exits 3 on what did not pass."""
    import shutil

    sub = tmp_path / "sub"
    shutil.copytree(REPO / "examples" / "triton", sub)
    add = sub / "kernels" / "vector_add.py"
    add.write_text(add.read_text().replace("x + y", "x - y"))
    out = tmp_path / "out"

    def run(*extra: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
        res = subprocess.run([sys.executable, "-m", "grader", "run", str(sub), "-o", str(out),
                              "--format", "json", *extra], capture_output=True, text=True,
                             cwd=REPO, check=False, timeout=900)
        rep = json.loads((out / "report.json").read_text())
        return res, [f"{p['id']}/{s['id']}:{s['verdict']}" for p in rep["problems"]
                     for s in p["shapes"]]

    res, graded = run("-k", "rmsnorm", "-k", "vector_add")
    assert res.returncode == 0, res.stderr
    assert graded == ["vector_add/smoke_4099:incorrect", "rmsnorm/smoke_8x256:passed",
                      "rmsnorm/smoke_5x200:passed"]  # no matmul

    res, graded = run("--last-failed", "--require", "passed")
    assert res.returncode == 3, res.stderr  # the gate: vector_add is still incorrect
    assert "--last-failed: grading again 1 shape(s) that did not pass" in res.stderr
    assert graded == ["vector_add/smoke_4099:incorrect"], graded

    add.write_text(add.read_text().replace("x - y", "x + y"))
    res, graded = run("--lf", "--fail-on", "any-failure")
    assert res.returncode == 0, res.stderr
    assert graded == ["vector_add/smoke_4099:passed"]
