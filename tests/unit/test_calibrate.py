"""`grader hardware calibrate`: the profile it writes (measurement itself needs a GPU)."""

from __future__ import annotations

import datetime as dt
import tomllib

import pytest

from grader.errors import UsageError
from grader.scoring.calibrate import Calibration, measure, profile_toml, with_measured
from grader.scoring.hardware import HardwareProfile, list_hardware, load_hardware


@pytest.mark.parametrize("profile", list_hardware(), ids=lambda p: p.name)
def test_every_profile_round_trips_through_toml(profile: HardwareProfile) -> None:
    assert HardwareProfile.model_validate(tomllib.loads(profile_toml(profile))) == profile


def test_measured_table_replaced_and_read_back(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cal = Calibration(device="NVIDIA H200", copy_bytes_per_s=4.31e12, bf16_flops_per_s=7.93e14,
                      launch_floor_s=4.1e-6)
    new = with_measured(load_hardware("h200"), cal, today=dt.date(2026, 11, 29))
    path = tmp_path / "h200.toml"
    path.write_text(profile_toml(new))
    back = load_hardware(str(path))
    assert back.measured is not None and back.measured.date == "2026-11-29"
    assert back.memory_bandwidth(use_measured=True).value == 4.31e12
    assert back.peak("bf16", use_measured=True).value == 7.93e14  # type: ignore[union-attr]
    assert back.measured.launch_floor is not None and back.measured.launch_floor.value == 4.1e-6
    assert back.peak("bf16").value == load_hardware("h200").peak("bf16").value  # type: ignore[union-attr]


def test_measure_refuses_without_a_gpu() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(UsageError, match="needs a CUDA GPU"):
        measure()
