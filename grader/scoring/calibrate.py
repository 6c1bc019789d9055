"""`grader hardware calibrate`: measure the local GPU's achievable ceilings (a large
device-to-device copy, a large bf16 matmul) and write them into a profile's `[measured]` table.

The datasheet stays the default ceiling; measured ones are used only when asked, and the
physical floor (scoring/apply.py) always uses the datasheet's, the more generous.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass
from itertools import takewhile
from pathlib import Path
from typing import Any

from grader.errors import UsageError
from grader.scoring.hardware import HardwareProfile, Measured, Sourced


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


def _value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return repr(v)
    if isinstance(v, float):
        # The shortest form that reads back exactly: 4.8e+12 rather than 4800000000000.0.
        text = next(t for t in (f"{v:.{p}g}" for p in range(1, 18)) if float(t) == v)
        return text if any(c in text for c in ".en") else text + ".0"  # n: nan, inf
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)  # JSON string escapes are valid TOML ones
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def _tables(data: dict[str, Any], prefix: str, out: list[str]) -> None:
    scalars = {k: v for k, v in data.items() if not isinstance(v, dict)}
    if prefix and scalars:
        out.append(f"\n[{prefix}]")
    out.extend(f"{k} = {_value(v)}" for k, v in scalars.items())
    for k, v in data.items():
        if isinstance(v, dict):
            _tables(v, f"{prefix}.{k}" if prefix else k, out)


def comments_of(path: Path) -> list[str]:
    """The comment lines that open a profile file (none if it does not exist), but the line
    profile_toml adds itself."""
    if not path.is_file():
        return []
    lines = takewhile(lambda line: line.startswith("#"), path.read_text().splitlines())
    return [line for line in lines if "written by grader hardware calibrate" not in line]


def profile_toml(profile: HardwareProfile, header: list[str] | None = None) -> str:
    """The profile as a TOML file that `load_hardware` reads back to an equal profile;
    `header`: comment lines to open it with (e.g. those of the base profile's file)."""
    lines = [*(header or []), f"# Hardware profile {profile.name}; [measured] written by "
             "grader hardware calibrate."]
    _tables(profile.model_dump(mode="json", exclude_none=True), "", lines)
    return "\n".join(lines) + "\n"
