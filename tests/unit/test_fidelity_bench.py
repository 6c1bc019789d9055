"""bench/fidelity.py reads a finished report and a cut grading's checkpoint folder alike (the
measuring itself needs a GPU: docs/benchmarks.md)."""

from __future__ import annotations

import json

from suite_checks import load_module

from grader.paths import REPO

DATA = REPO / "docs" / "data" / "h200-2026-12-01-session4"


def _bench():  # type: ignore[no-untyped-def]
    return load_module(REPO / "bench" / "fidelity.py", "_test")


def test_a_checkpoint_folder_reads_like_its_report() -> None:
    bench = _bench()
    folder = DATA / "llm-solutions-checkpoint"
    report = bench.read_report(folder, "llm-inference")
    assert report["suite"]["id"] == "llm-inference"
    assert [p["id"] for p in report["problems"]] == sorted(f.stem for f in folder.glob("*.json"))
    gemm = next(p for p in report["problems"] if p["id"] == "gemm_bf16")
    raw = json.loads((folder / "gemm_bf16.json").read_text())["result"]
    assert [s["timing"]["median_us"] for s in gemm["shapes"] if s["timing"]] == [
        s["timing"]["median_us"] for s in raw["shapes"] if s["timing"]]


def test_a_report_file_is_read_as_it_is() -> None:
    path = DATA / "report-demo-triton-call2.json"
    assert _bench().read_report(path, "ignored") == json.loads(path.read_text())
