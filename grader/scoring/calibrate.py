"""`grader hardware calibrate`: measure the local GPU's achievable ceilings (a large
device-to-device copy, a large bf16 matmul) and write them into a profile's `[measured]` table.

The profile's file is edited in place with tomlkit: only `[measured]` changes, and the file's
comments (which say where each datasheet number comes from) are kept.

The datasheet stays the default ceiling; measured ones are used only when asked, and the
physical floor (scoring/apply.py) always uses the datasheet's, the more generous.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.items import Item, Table

from grader.errors import GraderError, UsageError
from grader.formats._base import parse_toml
from grader.scoring.hardware import (
    HardwareProfile,
    Measured,
    Sourced,
    load_hardware,
    profile_path,
)


@dataclass(frozen=True, kw_only=True)
class Calibration:
    device: str
    copy_bytes_per_s: float  # bytes read plus bytes written, per second
    bf16_flops_per_s: float
    launch_floor_s: float | None = None  # one tiny kernel between CUDA events, as graded


def measure(copy_mib: int = 2048, matmul_n: int = 8192, reps: int = 20) -> Calibration:
    """Median of `reps` timed runs of each, with CUDA events, after a warm-up (needs a GPU)."""
    import torch

    from grader.harness.timing import SPIN_CYCLES

    if not torch.cuda.is_available():
        raise UsageError("calibration needs a CUDA GPU and none is visible",
                         hint="run it on the GPU host whose profile you want to measure")
    src = torch.empty(copy_mib << 20, dtype=torch.uint8, device="cuda").random_(0, 255)
    dst = torch.empty_like(src)
    a = torch.randn(matmul_n, matmul_n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(matmul_n, matmul_n, device="cuda", dtype=torch.bfloat16)

    def median_s(fn: Callable[[], object], before: Callable[[], object] = lambda: None) -> float:
        fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            before()
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        return sorted(times)[len(times) // 2]

    copy_s = median_s(lambda: dst.copy_(src))
    mm_s = median_s(lambda: a @ b)
    # A one-element add, timed as the harness times a kernel (grader/harness/timing.py: a
    # spin first, so the launch is queued before the start event runs).
    one = torch.zeros(1, device="cuda")
    launch_s = median_s(lambda: one.add_(1.0), before=lambda: torch.cuda._sleep(SPIN_CYCLES))
    # Four significant figures: run-to-run noise is larger than the fifth.
    return Calibration(device=torch.cuda.get_device_name(),
                       copy_bytes_per_s=float(f"{2 * src.numel() / copy_s:.4g}"),
                       bf16_flops_per_s=float(f"{2 * matmul_n**3 / mm_s:.4g}"),
                       launch_floor_s=float(f"{launch_s:.2g}"))


def with_measured(profile: HardwareProfile, cal: Calibration,
                  today: dt.date | None = None) -> HardwareProfile:
    """`profile` with its `[measured]` table replaced by `cal`."""
    day = (today or dt.date.today()).isoformat()
    how = f"measured by `grader hardware calibrate` on {cal.device} on {day}"
    measured = Measured(
        date=day, device=cal.device,
        bandwidth=Sourced(value=cal.copy_bytes_per_s,
                          source=f"{how}: device-to-device copy, bytes read plus written"),
        peak_flops={"bf16": Sourced(value=cal.bf16_flops_per_s,
                                    source=f"{how}: bf16 matmul, 2*N^3 FLOPs per product")},
        launch_floor=None if cal.launch_floor_s is None else Sourced(
            value=cal.launch_floor_s,
            source=f"{how}: a one-element add between CUDA events, after a spin, as graded"))
    return profile.model_copy(update={"measured": measured})


def _number(v: float) -> Item:
    """`v` in the shortest form that reads back exactly: 4.8e+12 rather than 4800000000000.0
    (tomlkit writes a float as Python's str does)."""
    text = next(t for t in (f"{v:.{p}g}" for p in range(1, 18)) if float(t) == v)
    return tomlkit.value(text if any(c in text for c in ".e") else f"{text}.0")


def _items(data: dict[str, Any]) -> dict[str, Any]:
    return {k: _items(v) if isinstance(v, dict) else _number(v) if isinstance(v, float) else v
            for k, v in data.items()}


def _table(data: dict[str, Any]) -> Table:
    # A table of tables only is written as its sub-tables' headers alone.
    table = tomlkit.table(is_super_table=all(isinstance(v, dict) for v in data.values()))
    _merge(table, data)
    return table


def _merge(table: Table, data: dict[str, Any]) -> None:
    """Set `table` to `data` key by key, so that what stays keeps its comments and place (a
    key that goes takes its own comments with it)."""
    for key in [k for k in table if k not in data]:
        del table[key]
    for key, value in data.items():
        if not isinstance(value, dict):
            table[key] = value
        elif isinstance(table.get(key), Table):
            _merge(table[key], value)
        else:
            table[key] = _table(value)


def measured_text(text: str, profile: HardwareProfile, source: str) -> str:
    """`text`, a profile's file, with its `[measured]` table set to `profile.measured`, edited
    in place: every comment, and every other key and number as it was written, stay. Refused
    (GraderError) unless the result reads back as `profile`."""
    doc = tomlkit.parse(text)
    if profile.measured is None:
        doc.pop("measured", None)
    else:
        measured = _items(profile.measured.model_dump(exclude_none=True))
        if isinstance(doc.get("measured"), Table):
            _merge(doc["measured"], measured)
        else:
            table = _table(measured)
            table.comment("written by grader hardware calibrate")
            doc["measured"] = table
    out = tomlkit.dumps(doc).rstrip("\n") + "\n"
    if parse_toml(out, HardwareProfile, source, GraderError) != profile:
        raise GraderError(f"{source}: the calibrated profile does not read back as measured",
                          hint="a grader bug: report it with --debug")
    return out


def calibrated_profile(base: str | Path, cal: Calibration, today: dt.date | None = None) -> str:
    """The text of profile `base` (a name or a file) with `cal` as its `[measured]` table."""
    path = profile_path(base)
    profile = with_measured(load_hardware(path), cal, today)
    return measured_text(path.read_text(encoding="utf-8"), profile, str(path))
