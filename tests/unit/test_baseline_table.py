"""bench/baseline.py: the baseline table in docs/llm-inference.md is what the script computes
from the committed H200 results, and the fraction and median rules are the documented ones."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from grader.paths import REPO
from grader.scoring.hardware import load_hardware
from grader.scoring.roofline import roofline
from grader.suite.load import load_suite

DATA = REPO / "docs" / "data" / "llm-inference-baseline-h200-2026-11-29.json"


def _table(*args: str) -> str:
    res = subprocess.run([sys.executable, str(REPO / "bench" / "baseline.py"), *args],
                         capture_output=True, text=True, cwd=REPO, check=False)
    assert res.returncode == 0, res.stderr
    return res.stdout


def _rows(text: str) -> dict[str, list[str]]:
    return {cells[0]: cells[1:] for line in text.splitlines()
            if line.startswith("| ") and not line.startswith("| problem")
            and not line.startswith("| ---")
            for cells in [[c.strip() for c in line.strip("|").split("|")]]}


def test_docs_table_is_the_scripts_output() -> None:
    ours = _rows(_table("--bare", str(DATA)))
    doc = (REPO / "docs" / "llm-inference.md").read_text()
    section = doc[doc.index("## Baseline on the H200"):]
    documented = _rows(section[: section.index("Sanity of the rooflines")])
    assert documented.keys() == ours.keys()
    for pid, cells in documented.items():
        # shapes, Triton, PyTorch, reference; a failed column is explained in words in the doc
        got = ours[pid][:4]
        for doc_cell, cell in zip(cells, got, strict=True):
            assert doc_cell == cell or (cell == "–" and not re.fullmatch(r"[\d.]+", doc_cell)), (
                pid, cells, got)


def test_fraction_is_roofline_over_median_and_problem_is_median(tmp_path: Path) -> None:
    suite = load_suite(REPO / "problem_bundles" / "llm-inference")
    problem = suite.problems["silu_and_mul"].problem
    scored = [s for s in problem.shapes if not s.smoke][:3]
    h200 = load_hardware("h200")
    t = [roofline(problem, s, h200).t_s for s in scored]
    # Triton at 1/2, 1/4 and 1/8 of the roofline: the median is 1/4; the reference at 1/10.
    rows = [{"problem": "silu_and_mul", "shape": s.id, "phase": s.phase,
             "triton": {"median_us": ti * 1e6 * k, "correct": True},
             "reference": {"median_us": ti * 1e6 * 10, "correct": True},
             "torch": {"error": "RuntimeError: boom"}}
            for s, ti, k in zip(scored, t, (2, 4, 8), strict=True)]
    path = tmp_path / "bare.json"
    path.write_text(json.dumps({"shapes": rows}))
    row = _rows(_table("--bare", str(path)))["silu_and_mul"]
    assert row[:4] == ["3", "0.250", "–", "0.100"]
    assert "torch failed on" in row[4]


def test_graded_figures_replace_bare_ones_and_checkpoints_count(tmp_path: Path) -> None:
    """A checkpoint folder (a grading cut short) is read like a report; its figures replace
    the bare run's for the same problem and column, the rest stay marked as bare."""
    from grader.grading.checkpoint import Finished
    from grader.model.results import ProblemResult, ShapeResult, Timing
    from grader.verdicts import Verdict

    suite = load_suite(REPO / "problem_bundles" / "llm-inference")
    problem = suite.problems["silu_and_mul"].problem
    shape = next(s for s in problem.shapes if not s.smoke)
    t_us = roofline(problem, shape, load_hardware("h200")).t_s * 1e6
    timing = Timing(median_us=t_us * 2, iqr_us=0.0, cv=0.0, samples=10, method="cuda-events")
    ref = timing.model_copy(update={"median_us": t_us * 5})
    sr = ShapeResult(id=shape.id, phase=shape.phase, smoke=False, params=shape.params,
                     verdict=Verdict.PASSED, detail="", timing=timing, reference_timing=ref)
    ckpt = tmp_path / "problems"
    ckpt.mkdir()
    pr = ProblemResult(id="silu_and_mul", operator="silu_and_mul", verdict=Verdict.PASSED,
                       shapes=[sr])
    (ckpt / "silu_and_mul.json").write_text(Finished(result=pr).to_json())
    rows = _rows(_table("--bare", str(DATA), "--solutions", str(ckpt)))
    assert rows["silu_and_mul"][1:4] == ["0.500", "0.086 (bare)", "0.200"]
    assert "triton passed" in rows["silu_and_mul"][4]
    assert rows["rms_norm"][1].endswith("(bare)")
    # A column the bare run failed on and a grading then measured: the failure note goes too.
    failed = tmp_path / "bare-failed.json"
    failed.write_text(json.dumps({"shapes": [
        {"problem": "silu_and_mul", "shape": shape.id, "phase": shape.phase,
         "triton": {"error": "CompilationError"}, "torch": {"median_us": t_us * 4},
         "reference": {"median_us": t_us * 8}}]}))
    row = _rows(_table("--bare", str(failed), "--solutions", str(ckpt)))["silu_and_mul"]
    assert row[1:4] == ["0.500", "0.250 (bare)", "0.200"] and row[4] == "triton passed"


def test_docs_graded_table_is_the_scripts_output() -> None:
    third = REPO / "docs" / "data" / "h200-2026-12-01"
    fourth = REPO / "docs" / "data" / "h200-2026-12-01-session4"
    sixth = REPO / "docs" / "data" / "h200-2026-12-02-session6"
    ours = _rows(_table("--bare", str(DATA),
                        "--solutions", str(fourth / "llm-solutions-checkpoint"),
                        str(fourth / "report-llm-solutions-2.json"),
                        str(sixth / "report-sol3.json"),
                        "--torch", str(third / "report-llm-inference-torch.json"),
                        str(fourth / "report-llm-torch.json"),
                        str(fourth / "report-llm-torch-softmax.json"),
                        str(sixth / "report-torch2.json"), str(sixth / "checkpoint-torch3"),
                        str(sixth / "report-torch4.json")))
    doc = (REPO / "docs" / "llm-inference.md").read_text()
    section = doc[doc.index("## Graded in containers on the H200"):]
    documented = _rows(section[: section.index("What it says")])
    assert documented == ours
    # The whole suite, three ways, every figure a container's: nothing left from the bare run.
    assert len(ours) == len(load_suite(REPO / "problem_bundles" / "llm-inference").problems)
    assert not any("(bare)" in cell or cell == "–" for cells in ours.values() for cell in cells)
