"""Hardware profiles (`hardware/<name>.toml`): the ceilings a roofline is computed against.

Every number carries the source it came from, so a report's roofline can be audited. Peaks are
dense (no 2:4 sparsity). A profile may also carry `measured` ceilings (what a calibration run on
a real device reached); the roofline uses them only when asked.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, model_validator

from grader.errors import ProblemError
from grader.formats._base import Strict, load_toml
from grader.model.scores import PEAK_DTYPES, PeakDType

HARDWARE_DIR = Path(__file__).resolve().parents[2] / "hardware"


_NAME = r"^[a-z0-9][a-z0-9_.-]{0,63}$"
# Every number says where it comes from: a datasheet and what it says, or a measurement.
Source = Annotated[str, StringConstraints(min_length=10, max_length=400)]


class Sourced(Strict):
    """A rate (FLOP/s, bytes/s) and where it comes from."""

    value: float = Field(gt=0)
    source: Source


class SourcedCount(Strict):
    value: int = Field(gt=0)
    source: Source


class ComputeUnits(Strict):
    kind: Literal["SM", "CU"]  # NVIDIA streaming multiprocessors or AMD compute units
    value: int = Field(gt=0)
    source: Source


class Measured(Strict):
    """Ceilings a calibration run reached on a real device (not the datasheet's)."""

    date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    device: str = Field(min_length=1, max_length=200)
    bandwidth: Sourced | None = None
    peak_flops: dict[PeakDType, Sourced] = Field(default_factory=dict)
    # The shortest device time one kernel launch shows between two CUDA events, in seconds:
    # a shape whose roofline is below it is launch-bound (scoring/roofline.py).
    launch_floor: Sourced | None = None


class HardwareProfile(Strict):
    name: str = Field(pattern=_NAME)
    vendor: str = Field(min_length=1, max_length=40)
    description: str = Field(min_length=1, max_length=300)
    # False for the CPU interpreter: its timings and ceilings are not performance numbers.
    is_performance: bool = True
    bandwidth: Sourced  # peak DRAM (HBM/GDDR) bandwidth, bytes/s
    l2_bytes: SourcedCount | None = None
    compute_units: ComputeUnits | None = None
    # Dense peak FLOP/s (int8: operations/s) per dtype; a dtype the chip lacks is absent.
    peak_flops: dict[PeakDType, Sourced] = Field(min_length=1)
    measured: Measured | None = None

    @model_validator(mode="after")
    def _finite(self) -> HardwareProfile:
        rates = [self.bandwidth.value, *(p.value for p in self.peak_flops.values())]
        if not all(math.isfinite(r) for r in rates):
            raise ValueError("every rate must be a finite number")
        return self

    def peak(self, dtype: PeakDType, *, use_measured: bool = False) -> Sourced | None:
        """The FLOP/s ceiling for `dtype` (the measured one if asked and known), or None."""
        if use_measured and self.measured and dtype in self.measured.peak_flops:
            return self.measured.peak_flops[dtype]
        return self.peak_flops.get(dtype)

    def memory_bandwidth(self, *, use_measured: bool = False) -> Sourced:
        if use_measured and self.measured and self.measured.bandwidth:
            return self.measured.bandwidth
        return self.bandwidth


def profile_path(name_or_path: str | Path) -> Path:
    """The file of a profile: `hardware/<name>.toml`, or the path given."""
    text = str(name_or_path)
    path = Path(text)
    if path.suffix == ".toml" or "/" in text:
        return path
    if not re.match(_NAME, text):
        raise ProblemError(f"hardware profile name {text!r} is not valid",
                           hint="names are lower-case letters, digits, '.', '_' and '-'")
    return HARDWARE_DIR / f"{text}.toml"


def load_hardware(name_or_path: str | Path) -> HardwareProfile:
    """A profile by name (`h200`, looked up in hardware/) or by path to a TOML file."""
    path = profile_path(name_or_path)
    if not path.is_file():
        known = ", ".join(p.stem for p in sorted(HARDWARE_DIR.glob("*.toml")))
        raise ProblemError(f"{path}: no such hardware profile", hint=f"known profiles: {known}")
    profile = load_toml(path, HardwareProfile, ProblemError)
    if profile.name != path.stem:
        raise ProblemError(f"{path}: field name: is {profile.name!r} but the file is "
                           f"{path.stem!r}", hint="name a profile file after its name field")
    return profile


def list_hardware(directory: Path = HARDWARE_DIR) -> list[HardwareProfile]:
    """Every profile in `directory`, sorted by name (an invalid file raises ProblemError)."""
    return [load_hardware(p) for p in sorted(directory.glob("*.toml"))]


def _si(value: float, unit: str) -> str:
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M")):
        if value >= factor:
            return f"{value / factor:,.4g} {prefix}{unit}"
    return f"{value:,.4g} {unit}"


def hardware_text(profile: HardwareProfile) -> str:
    """A plain-text description of a profile with every number's source (`grader hardware show`)."""
    lines = [f"{profile.name}: {profile.description}", f"  vendor: {profile.vendor}"]
    if not profile.is_performance:
        lines.append("  NOT A PERFORMANCE PROFILE: results measured against it are not "
                     "performance numbers")
    lines.append(f"  bandwidth: {_si(profile.bandwidth.value, 'B/s')}  "
                 f"[{profile.bandwidth.source}]")
    if profile.l2_bytes:
        lines.append(f"  L2: {profile.l2_bytes.value / 2**20:,.4g} MiB  "
                     f"[{profile.l2_bytes.source}]")
    if profile.compute_units:
        cu = profile.compute_units
        lines.append(f"  {cu.kind}s: {cu.value}  [{cu.source}]")
    lines.append("  dense peaks:")
    for dtype in PEAK_DTYPES:
        peak = profile.peak_flops.get(dtype)
        unit = "OP/s" if dtype == "int8" else "FLOP/s"
        text = f"{_si(peak.value, unit)}  [{peak.source}]" if peak else "not supported"
        lines.append(f"    {dtype:>5}: {text}")
    if profile.measured:
        m = profile.measured
        lines.append(f"  measured on {m.device}, {m.date}:")
        if m.bandwidth:
            lines.append(f"    bandwidth: {_si(m.bandwidth.value, 'B/s')}  [{m.bandwidth.source}]")
        for dtype, peak in m.peak_flops.items():
            lines.append(f"    {dtype:>5}: {_si(peak.value, 'FLOP/s')}  [{peak.source}]")
    return "\n".join(lines)
