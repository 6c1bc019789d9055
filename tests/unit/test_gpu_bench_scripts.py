"""The pure parts of the GPU-host scripts: what bench/cuda_base.py copies of an interpreter's
environment, how bench/clocks.py names NVML's clock-event reasons, and how
bench/gpu_session.sh names a round's files (the measuring itself needs the GPU host:
docs/benchmarks.md, "Seventh session")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from suite_checks import load_module

from grader.paths import REPO


def test_the_base_keeps_torchs_packages_and_drops_the_rest_of_site_packages(
        tmp_path: Path) -> None:
    bench = load_module(REPO / "bench" / "cuda_base.py", "_test")
    for name in ("torch", "torch-2.11.0.dist-info", "triton", "nvidia", "numpy.libs",
                 "typing_extensions.py", "jax", "jaxlib-0.11.2.dist-info", "cupy", "pandas"):
        (tmp_path / name).mkdir()
    kept = {p.name for p in bench.site_members(tmp_path)}
    assert kept == {"torch", "torch-2.11.0.dist-info", "triton", "nvidia", "numpy.libs",
                    "typing_extensions.py"}


def test_an_environment_outside_usr_is_copied_but_its_site_packages() -> None:
    bench = load_module(REPO / "bench" / "cuda_base.py", "_test")
    paths, site = bench.environment_paths(sys.executable)
    assert f"{site.relative_to('/')}/torch" in paths  # this machine's CPU torch
    assert str(site.relative_to("/")) not in paths  # not the whole of site-packages
    assert not any(p.startswith(f"{site.relative_to('/')}/pytest") for p in paths)
    if not sys.base_prefix.startswith("/usr"):  # the interpreter itself and its stdlib
        assert any(p.endswith("/os.py") for p in paths)


def test_clock_event_reasons_are_named() -> None:
    bench = load_module(REPO / "bench" / "clocks.py", "_test")
    assert bench.reason_names(0x4 | 0x1) == ["sw_power_cap"]  # 0x1: idle, not a slowdown
    assert bench.reason_names(0x8 | 0x40) == ["hw_slowdown", "hw_thermal"]
    assert bench.reason_names(0) == []


def _round_name(base: str, only: str) -> str:
    script = (REPO / "bench" / "gpu_session.sh").read_text()
    body = script[script.index("round_name() {"):script.index("run_round() {")]
    res = subprocess.run(["bash", "-c", f'{body}\nround_name "$1" "$2"', "_", base, only],
                         capture_output=True, text=True, check=True)
    return res.stdout.strip()


def test_a_rounds_files_are_named_by_its_problems_and_a_long_list_by_a_digest() -> None:
    """A list of 19 problems made a folder name past the file system's 255 bytes, and the
    step failed before its round started (2026-12-06, on the H100)."""
    assert _round_name("round-atrex-bench", "") == "round-atrex-bench"
    assert _round_name("round-llm", "rope,l2_norm") == "round-llm-rope-l2_norm"
    many = ",".join(f"operator_number_{i}" for i in range(19))
    name = _round_name("round-atrex-bench", many)
    assert name.startswith("round-atrex-bench-19p-") and len(name) < 40
    assert name != _round_name("round-atrex-bench", many.replace("_1,", "_x,"))
