"""Imported suites graded end to end with `grader run`: class entries against the real engine.

KernelBench: a Triton ModelNew (relu), a Triton ModelNew whose nn.Linear weights must equal the
reference's (built under the same seed in the other container), and a ModelNew delegating to
torch.matmul. Atrex: a Triton `class Model`, and one that launches Triton but computes with an
nn.ReLU built in its constructor, which only the trace of forward() shows.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grader.intake.tools import create_bundle
from grader.paths import REPO

pytestmark = pytest.mark.docker

FIXTURES = REPO / "tests" / "fixtures" / "import"


def _grader(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grader", *args], capture_output=True,
                          text=True, cwd=REPO, check=False)


def _verdicts(out: Path) -> dict[str, list[str]]:
    rep = json.loads((out / "report.json").read_text())
    return {p["id"]: [s["verdict"] for s in p["shapes"]] for p in rep["problems"]}


def test_imported_suites_grade_class_entries(engine, runtime, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    suites = tmp_path / "suites"
    suites.mkdir()
    for kind, name in (("kernelbench", "kernelbench-fixture"), ("atrex", "atrex-fixture")):
        res = _grader("import", kind, str(FIXTURES / kind), "-o", str(suites / name))
        assert res.returncode == 0, res.stderr
        create_bundle(FIXTURES / "entries" / kind, tmp_path / f"{kind}.tar")

    # KernelBench: the smoke shapes the importer derived (the default on a CPU)
    res = _grader("run", str(tmp_path / "kernelbench.tar"), "--suites", str(suites),
                  "-o", str(tmp_path / "kb"), "--format", "json")
    assert res.returncode == 0, res.stderr
    assert _verdicts(tmp_path / "kb") == {"level1_19_relu": ["passed"],
                                          "level1_99_linear_relu": ["passed"],
                                          "level2_3_matmul_scale": ["fallback"]}
    rep = json.loads((tmp_path / "kb" / "report.json").read_text())
    mm = next(p for p in rep["problems"] if p["id"] == "level2_3_matmul_scale")
    assert "aten.mm" in mm["shapes"][0]["trace"]["torch_ops"]

    # Atrex smoke shapes (the default on a CPU); scale_softmax has no entry
    res = _grader("run", str(tmp_path / "atrex.tar"), "--suites", str(suites),
                  "-o", str(tmp_path / "atrex"), "--format", "json")
    assert res.returncode == 0, res.stderr
    got = _verdicts(tmp_path / "atrex")
    assert got["linear"] == ["passed"] and got["relu"] == ["fallback"]
    rep = json.loads((tmp_path / "atrex" / "report.json").read_text())
    relu = next(p for p in rep["problems"] if p["id"] == "relu")["shapes"][0]
    assert "aten.relu" in relu["trace"]["torch_ops"]
    assert {f["rule"] for f in relu["findings"]} >= {"DY001"}


def _atrex_real(tmp_path: Path) -> Path:
    """tests/fixtures/import/atrex_real imported as the suite atrex-real; the suites folder."""
    suites = tmp_path / "suites"
    suites.mkdir()
    res = _grader("import", "atrex", str(FIXTURES / "atrex_real"), "-o",
                  str(suites / "atrex-real"))
    assert res.returncode == 0, res.stderr
    return suites


def test_atrex_round_of_our_entry_twice(engine, runtime, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """What `bench/gpu_session.sh atrex` runs, on the CPU: an imported Atrex suite (outside
    the checkout, found through --suites), bench/atrex_entry.py's entry (our Triton
    fused_add_rms_norm and topk_filter, the other operator's reference) graded twice by
    bench/round_speed.py: ours `passed`, the reference `fallback`, and the second entry
    reusing the first's references (issue 32). Atrex-Bench's real schemas
    (tests/fixtures/import/atrex_real) on their derived smoke shapes: inputs made for
    device='cuda', dict inputs and outputs, a ROCm fp8 output, masked -inf matched exactly;
    a reference graded as the entry is exact and done by PyTorch, so `fallback` (issue 20:
    infra_error, incorrect or passed before)."""
    suites = _atrex_real(tmp_path)
    entry = tmp_path / "entry"
    res = subprocess.run([sys.executable, "bench/atrex_entry.py", str(suites / "atrex-real"),
                          "-o", str(entry)], capture_output=True, text=True, cwd=REPO,
                         check=False)
    assert res.returncode == 0, res.stderr
    assert "2 in Triton (fused_add_rms_norm, topk_filter), 1 their own reference" in res.stdout
    res = subprocess.run([sys.executable, "bench/round_speed.py", "--suite", "atrex-real",
                          "--suites", str(suites), "--entry", str(entry), "-n", "2",
                          "-o", str(tmp_path / "r"), "--json", str(tmp_path / "f.json")],
                         capture_output=True, text=True, cwd=REPO, check=False, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    got = json.loads((tmp_path / "f.json").read_text())
    assert [(e["status"], e["refs_computed"], e["refs_reused"]) for e in got["entries"]] == [
        ("graded", 3, 0), ("graded", 0, 3)]
    for e in got["entries"]:
        assert _verdicts(tmp_path / "r" / "entries" / e["name"]) == {
            "fp8_quant_fnuz": ["fallback"], "fused_add_rms_norm": ["passed"],
            "topk_filter": ["passed"]}
        rep = json.loads((tmp_path / "r" / "entries" / e["name"] / "report.json").read_text())
        topk = next(p for p in rep["problems"] if p["id"] == "topk_filter")["shapes"][0]
        assert topk["comparisons"][0]["mismatched"] == 0  # its -inf matched, not skipped
