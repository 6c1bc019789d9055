"""Issue 23: `grader suite check` against the real engine: a reference that raises and one that
does not match itself are the suite's fault (reference_error, exit 21), a sound one passes,
and the roofline expressions and the release kit are checked."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.paths import PROBLEM_BUNDLES, REPO

pytestmark = pytest.mark.docker

RAISES = ("\n\ndef reference(*inputs):\n"
          "    raise RuntimeError('the organiser broke this')\n")
# Unseeded noise far beyond fp32's tolerance: two runs with one seed disagree.
NOISY = ("\n\ndef reference(x, y):\n    import os\n"
         "    return x + y + float(int.from_bytes(os.urandom(2), 'little') + 1)\n")


# make_inputs drawing unseeded values: two runs draw different inputs from one seed, and an
# entry, which draws its own from the seed (issue 32), would compute on other values.
UNSEEDED = ("\n\n_make_inputs = make_inputs\n\n\n"
            "def make_inputs(seed, device, **params):\n    import os\n"
            "    return _make_inputs(int.from_bytes(os.urandom(4), 'little'), device, **params)\n")


def _check(roots: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grader", "suite", "check", "demo",
                           "--suites", str(roots), *args], capture_output=True, text=True,
                          cwd=REPO, check=False, timeout=900)


def test_broken_references_are_the_suites_fault(engine, runtime, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    roots = tmp_path / "suites"
    suite = roots / "demo"
    shutil.copytree(PROBLEM_BUNDLES / "demo", suite)
    for problem, tail in (("rmsnorm", RAISES), ("vector_add", NOISY), ("matmul", UNSEEDED)):
        ref = suite / problem / "reference.py"
        ref.write_text(ref.read_text() + tail)
    res = _check(roots, "--shapes", "smoke")
    assert res.returncode == 21, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    rms = next(line for line in lines if line.startswith("BAD rmsnorm/"))
    assert "reference_error" in rms and "raised" in rms
    assert "the organiser broke this" in res.stdout  # the reference's own error
    add = next(line for line in lines if line.startswith("BAD vector_add/"))
    assert "reference_error" in add and "beyond the problem's tolerance" in add
    mm = next(line for line in lines if line.startswith("BAD matmul/"))
    assert "reference_error" in mm and "drew different inputs" in mm
    # grader release's self-check refuses a suite whose reference raises; suite check says
    # the same (issue 34, friction 7: it printed "ok  release kit" here).
    assert any(line.startswith("BAD release kit") for line in lines)
    assert "infra_error" not in res.stdout
    assert "is at fault" in res.stderr and "hint:" in res.stderr
    assert str(suite / "rmsnorm" / "reference.py") in res.stderr


def test_a_roofline_expression_that_does_not_evaluate(engine, runtime, tmp_path: Path  # type: ignore[no-untyped-def]
                                                      ) -> None:
    roots = tmp_path / "suites"
    suite = roots / "demo"
    shutil.copytree(PROBLEM_BUNDLES / "demo", suite)
    toml = suite / "vector_add" / "problem.toml"
    toml.write_text(toml.read_text().replace('bytes = "3*4*n"', 'bytes = "3*4*n - 4*n*3"'))
    res = _check(roots, "--problem", "vector_add", "--shapes", "smoke")
    assert res.returncode == 20, res.stdout + res.stderr
    assert "BAD roofline vector_add/smoke_4099" in res.stdout
    assert "ok  vector_add/smoke_4099" in res.stdout  # the reference itself is sound
    # Its steps, reported through the one progress type (issue 33), read as they always did.
    steps = [line for line in res.stderr.splitlines() if line.startswith("[suite check]")]
    assert steps == ["[suite check] vector_add: image",
                     "[suite check] vector_add: reference, twice (1 cases)"], res.stderr
