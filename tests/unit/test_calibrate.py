"""`grader hardware calibrate`: the profile it writes (measurement itself needs a GPU).

The profile's file is edited in place: what it writes reads back through the project's own
loader as the base profile with the new `[measured]` table, and keeps every comment and every
other line of the file it started from.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from grader.errors import GraderError, UsageError
from grader.scoring import calibrate
from grader.scoring.calibrate import (
    Calibration,
    calibrated_profile,
    measure,
    measured_text,
    with_measured,
)
from grader.scoring.hardware import HARDWARE_DIR, load_hardware

DAY = dt.date(2026, 11, 29)
CAL = Calibration(device="NVIDIA H200", copy_bytes_per_s=4.31e12, bf16_flops_per_s=7.93e14,
                  launch_floor_s=4.1e-6)
PROFILES = sorted(HARDWARE_DIR.glob("*.toml"))


def written(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.stem)
def test_every_profile_calibrated_reads_back_and_keeps_its_file(path: Path,
                                                                tmp_path: Path) -> None:
    text = calibrated_profile(path, CAL, today=DAY)
    back = load_hardware(written(tmp_path, path.stem, text))
    assert back == with_measured(load_hardware(path), CAL, today=DAY)
    # Everything above [measured] (the comments and every datasheet number as written) is
    # byte for byte the base file's.
    base = path.read_text(encoding="utf-8")
    assert text.startswith(base.split("\n[measured]")[0].rstrip("\n") + "\n")
    assert [line for line in base.splitlines() if line.startswith("#")] == [
        line for line in text.splitlines() if line.startswith("#")]


BASE = """\
# A test profile: the comments below must survive a calibration.
name = "testgpu"   # matches the file name
vendor = "NVIDIA"
description = "a profile written for this test"

[bandwidth]
value = 1.0e12     # as the datasheet spells it
source = "a datasheet that says 1 TB/s"

[peak_flops.bf16]
# dense, half the sparse figure
value = 2e14
source = "a datasheet that says 400 TFLOPS with sparsity"

[measured]         # by hand, before calibrate existed
date = "2020-01-01"
device = "an older board"
# the copy test
[measured.bandwidth]
value = 9e11       # slower than today
source = "an old measurement, long ago"

[measured.peak_flops.fp8]
value = 1e14       # fp8: goes with its table
source = "an fp8 number calibrate does not measure"
"""


def test_comments_inside_and_around_measured_are_kept(tmp_path: Path) -> None:
    path = written(tmp_path, "testgpu", BASE)
    text = calibrated_profile(path, CAL, today=DAY)
    (tmp_path / "out").mkdir()
    back = load_hardware(written(tmp_path / "out", "testgpu", text))
    assert back.measured is not None and back.measured.date == "2026-11-29"
    assert back.memory_bandwidth(use_measured=True).value == 4.31e12
    assert back.peak("bf16", use_measured=True).value == 7.93e14  # type: ignore[union-attr]
    assert "fp8" not in back.measured.peak_flops  # the table is the calibration's, entirely
    assert back.measured.launch_floor is not None and back.measured.launch_floor.value == 4.1e-6
    # Every comment stays, but those of the fp8 table the calibration does not measure.
    for line in BASE.splitlines():
        if "#" in line:
            assert (line.split("#", 1)[1] in text) == ("fp8" not in line), line
    assert 'value = 1.0e12     # as the datasheet spells it' in text
    assert "value = 4.31e+12       # slower than today" in text  # the new value, in place
    assert "value = 7.93e+14" in text and "value = 4.1e-06" in text


def test_a_profile_without_measured_gets_one_at_the_end(tmp_path: Path) -> None:
    base = BASE.split("\n[measured]")[0] + "\n"
    text = calibrated_profile(written(tmp_path, "testgpu", base), CAL, today=DAY)
    assert text.startswith(base)
    assert "\n[measured] # written by grader hardware calibrate\n" in text


def test_without_a_measurement_the_table_goes(tmp_path: Path) -> None:
    path = written(tmp_path, "testgpu", BASE)
    profile = load_hardware(path).model_copy(update={"measured": None})
    text = measured_text(BASE, profile, str(path))
    assert "[measured" not in text and "# A test profile" in text
    assert load_hardware(written(tmp_path, "testgpu", text)) == profile


def test_a_text_that_would_not_read_back_is_refused(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    path = written(tmp_path, "testgpu", BASE)
    # A writer that loses the bf16 number: the check after writing catches it.
    monkeypatch.setattr(calibrate, "_number", lambda v: calibrate.tomlkit.value("1.0"))
    with pytest.raises(GraderError, match="does not read back"):
        calibrated_profile(path, CAL, today=DAY)


def test_measure_refuses_without_a_gpu() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(UsageError, match="needs a CUDA GPU"):
        measure()
