"""Hardware profiles: every shipped profile loads, every number has a source, the CPU profile
says it is not performance, and a bad file names the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.errors import ProblemError
from grader.model.scores import PEAK_DTYPES
from grader.scoring.hardware import (
    HARDWARE_DIR,
    HardwareProfile,
    hardware_text,
    list_hardware,
    load_hardware,
)

SHIPPED = ["a100-sxm", "b200", "cpu-interpreter", "h100-sxm", "h20", "h200", "l40s", "mi300x"]
GPUS = [n for n in SHIPPED if n != "cpu-interpreter"]


def test_every_shipped_profile_loads() -> None:
    assert [p.name for p in list_hardware()] == SHIPPED
    assert HARDWARE_DIR == Path(__file__).resolve().parents[2] / "hardware"


@pytest.mark.parametrize("name", GPUS)
def test_gpu_profiles_are_performance_with_sourced_numbers(name: str) -> None:
    p = load_hardware(name)
    assert p.is_performance
    assert p.compute_units is not None and p.compute_units.source
    assert p.bandwidth.source and 5e11 < p.bandwidth.value < 1e13
    for dtype, peak in p.peak_flops.items():
        assert len(peak.source) > 20, (name, dtype)
    expected = set(PEAK_DTYPES) - ({"fp8"} if name == "a100-sxm" else set())
    assert set(p.peak_flops) == expected


@pytest.mark.parametrize("name", GPUS)
def test_dense_peaks_are_ordered_by_precision(name: str) -> None:
    """Dense tensor-core peaks: fp8 >= bf16 == fp16 >= tf32 >= fp32 on every chip listed."""
    peak = {d: v.value for d, v in load_hardware(name).peak_flops.items()}
    assert peak["bf16"] == peak["fp16"]
    assert peak["bf16"] >= peak["tf32"] >= peak["fp32"]
    if "fp8" in peak:
        assert peak["fp8"] >= peak["bf16"]


def test_known_datasheet_values() -> None:
    h100 = load_hardware("h100-sxm")
    assert h100.peak_flops["bf16"].value == 989.5e12  # 1,979 with sparsity, halved
    assert "sparsity" in h100.peak_flops["bf16"].source
    assert h100.bandwidth.value == 3.35e12
    assert h100.l2_bytes is not None and h100.l2_bytes.value == 50 * 2**20
    assert load_hardware("h200").bandwidth.value == 4.8e12
    assert load_hardware("a100-sxm").peak_flops["bf16"].value == 312e12
    assert load_hardware("mi300x").compute_units.kind == "CU"  # type: ignore[union-attr]
    assert load_hardware("b200").l2_bytes is None  # unpublished: left out, not guessed


def test_h200_measured_ceilings() -> None:
    h200 = load_hardware("h200")
    assert h200.measured is not None and h200.measured.date == "2026-11-29"
    assert h200.memory_bandwidth(use_measured=True).value == 4.194e12
    assert h200.memory_bandwidth().value == 4.8e12
    assert h200.peak("bf16", use_measured=True).value == 7.73e14  # type: ignore[union-attr]
    assert h200.peak("bf16").value == 989.5e12  # type: ignore[union-attr]
    # No measurement for fp16: the datasheet stands in.
    assert h200.peak("fp16", use_measured=True).value == 989.5e12  # type: ignore[union-attr]
    assert "2026-11-29" in h200.measured.bandwidth.source  # type: ignore[union-attr]


def test_cpu_interpreter_says_it_is_not_performance() -> None:
    cpu = load_hardware("cpu-interpreter")
    assert cpu.is_performance is False
    assert "NOT A PERFORMANCE" in cpu.description.upper()
    assert "NOT A PERFORMANCE PROFILE" in hardware_text(cpu)
    assert all("not" in p.source.lower() for p in cpu.peak_flops.values())


def test_hardware_text_lists_every_number_and_source() -> None:
    text = hardware_text(load_hardware("a100-sxm"))
    assert "2.039 TB/s" in text and "A100 80GB SXM" in text
    assert "fp8: not supported" in text
    assert "SMs: 108" in text
    assert "measured" in hardware_text(load_hardware("h200"))


def test_load_by_path(tmp_path: Path) -> None:
    src = (HARDWARE_DIR / "h100-sxm.toml").read_text()
    path = tmp_path / "h100-sxm.toml"
    path.write_text(src)
    assert load_hardware(path) == load_hardware("h100-sxm")
    assert load_hardware(str(path)).name == "h100-sxm"


def test_unknown_profile_lists_the_known_ones() -> None:
    with pytest.raises(ProblemError) as err:
        load_hardware("tpu-v9")
    assert "tpu-v9" in str(err.value) and "h200" in str(err.value.hint)


def test_invalid_name_is_refused() -> None:
    with pytest.raises(ProblemError, match="not valid"):
        load_hardware("H200 !")


def _profile(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


GOOD = """
name = "toy"
vendor = "ACME"
description = "a toy accelerator"
[bandwidth]
value = 1e12
source = "ACME datasheet: 1 TB/s"
[peak_flops.bf16]
value = 1e14
source = "ACME datasheet: 100 TFLOPS dense"
"""


def test_minimal_profile_loads(tmp_path: Path) -> None:
    p = load_hardware(_profile(tmp_path, "toy", GOOD))
    assert isinstance(p, HardwareProfile) and p.is_performance and p.measured is None
    assert p.peak("fp32") is None


@pytest.mark.parametrize(("text", "field"), [
    (GOOD + "sparsity = true\n", "sparsity"),  # extra fields are refused
    (GOOD.replace("value = 1e12", "value = -1e12"), "bandwidth.value"),
    (GOOD.replace('source = "ACME datasheet: 1 TB/s"', 'source = ""'), "bandwidth.source"),
    (GOOD.replace("[peak_flops.bf16]", "[peak_flops.fp4]"), "peak_flops"),
    (GOOD.replace('vendor = "ACME"\n', ""), "vendor"),
    (GOOD + "[measured]\ndate = 'yesterday'\ndevice = 'x'\n", "measured.date"),
])
def test_bad_profile_names_file_and_field(tmp_path: Path, text: str, field: str) -> None:
    path = _profile(tmp_path, "toy", text)
    with pytest.raises(ProblemError) as err:
        load_hardware(path)
    assert str(path) in str(err.value) and field in str(err.value)


def test_name_must_match_file(tmp_path: Path) -> None:
    with pytest.raises(ProblemError, match="field name"):
        load_hardware(_profile(tmp_path, "other", GOOD))


def test_list_hardware_of_a_folder(tmp_path: Path) -> None:
    _profile(tmp_path, "toy", GOOD)
    _profile(tmp_path, "abc", GOOD.replace('"toy"', '"abc"'))
    assert [p.name for p in list_hardware(tmp_path)] == ["abc", "toy"]
