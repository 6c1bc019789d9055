"""The speed of light of one (problem, shape) on one piece of hardware.

    T_roofline = max(Σ_d FLOPs_d / peak_d, bytes / bandwidth)

A problem declares one `flops` expression and a list of dtypes, so its FLOPs are charged to one
compute dtype: the first of its dtypes that the tensor cores compute in (float32 → fp32,
float16 → fp16, bfloat16 → bf16, float8_* → fp8, int8 → int8; int32/int64/bool are skipped as
index/mask types). float32 maps to the fp32 (CUDA-core) peak, not tf32: TF32 rounds the inputs
to a 10-bit mantissa, which a float32 problem's tolerance does not allow, so the fp32 peak is
the honest ceiling. `roofline_time` takes FLOPs split by dtype for callers that have the split.
"""

from __future__ import annotations

from collections.abc import Mapping

from grader.errors import ProblemError
from grader.formats.expr import work
from grader.formats.problem import Problem, Shape
from grader.model.scores import Ceiling, PeakDType, Regime, Roofline
from grader.scoring.hardware import HardwareProfile

DTYPE_PEAK: dict[str, PeakDType] = {
    "float32": "fp32",
    "float16": "fp16",
    "bfloat16": "bf16",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
    "int8": "int8",
}




def compute_dtype(problem: Problem) -> PeakDType:
    """The peak a problem's FLOPs are charged to: its first compute dtype (see module doc)."""
    for dtype in problem.dtypes:
        if dtype in DTYPE_PEAK:
            return DTYPE_PEAK[dtype]
    raise ProblemError(f"problem {problem.id}: field dtypes: {problem.dtypes} has no compute "
                       f"dtype", hint=f"list one of {', '.join(DTYPE_PEAK)} first")


def _peak(profile: HardwareProfile, dtype: PeakDType, use_measured: bool) -> tuple[float, Ceiling]:
    peak = profile.peak(dtype, use_measured=use_measured)
    if peak is None:
        raise ProblemError(f"hardware {profile.name}: field peak_flops.{dtype}: missing; the "
                           f"chip has no {dtype} peak", hint="score this problem on other hardware")
    measured = bool(use_measured and profile.measured and dtype in profile.measured.peak_flops)
    return peak.value, "measured" if measured else "datasheet"


def _bandwidth(profile: HardwareProfile, use_measured: bool) -> tuple[float, Ceiling]:
    measured = bool(use_measured and profile.measured and profile.measured.bandwidth)
    return profile.memory_bandwidth(use_measured=use_measured).value, (
        "measured" if measured else "datasheet")


def roofline_time(flops_by_dtype: Mapping[PeakDType, float], nbytes: float,
                  profile: HardwareProfile, *, use_measured: bool = False) -> float:
    """`max(Σ_d flops_d / peak_d, bytes / bandwidth)` in seconds."""
    if nbytes <= 0 or any(f < 0 for f in flops_by_dtype.values()):
        raise ProblemError(f"roofline: bytes must be > 0 and FLOPs >= 0, got {nbytes!r} bytes "
                           f"and {dict(flops_by_dtype)!r}")
    t_compute = sum(f / _peak(profile, d, use_measured)[0] for d, f in flops_by_dtype.items())
    return max(t_compute, nbytes / _bandwidth(profile, use_measured)[0])


def roofline_values(flops: float, nbytes: float, dtype: PeakDType, profile: HardwareProfile,
                    *, use_measured: bool = False) -> Roofline:
    """The roofline of an operation of `flops` FLOPs (all in `dtype`) moving `nbytes` bytes."""
    if not nbytes > 0 or not flops >= 0:
        raise ProblemError(f"roofline: bytes must be > 0 and FLOPs >= 0, got {nbytes!r} bytes "
                           f"and {flops!r} FLOPs")
    peak, flops_ceiling = _peak(profile, dtype, use_measured)
    bandwidth, bandwidth_ceiling = _bandwidth(profile, use_measured)
    t_compute, t_memory = flops / peak, nbytes / bandwidth
    intensity, ridge = flops / nbytes, peak / bandwidth
    return Roofline(
        hardware=profile.name, dtype=dtype, flops=flops, bytes=nbytes,
        peak_flops_per_s=peak, bandwidth_bytes_per_s=bandwidth,
        flops_ceiling=flops_ceiling, bandwidth_ceiling=bandwidth_ceiling,
        t_compute_s=t_compute, t_memory_s=t_memory, t_s=max(t_compute, t_memory),
        intensity=intensity, ridge=ridge,
        regime=_regime(max(t_compute, t_memory), intensity, ridge, profile),
    )


def _regime(t_s: float, intensity: float, ridge: float, profile: HardwareProfile) -> Regime:
    """launch when the roofline is below the profile's measured launch floor (one kernel
    launch between CUDA events takes longer than the work itself: no kernel can show its
    roofline there, and S measures launch latency); else by intensity against the ridge. At
    the ridge both limits are equal: compute-bound (the chip's peak is reached)."""
    floor = profile.measured.launch_floor if profile.measured else None
    if floor is not None and t_s < floor.value:
        return "launch"
    return "compute" if intensity >= ridge else "memory"


def roofline(problem: Problem, shape: Shape, profile: HardwareProfile, *,
             use_measured: bool = False) -> Roofline:
    """The roofline of `shape` of `problem`, from the problem's `flops` and `bytes` expressions."""
    where = f"problem {problem.id}, shape {shape.id}"
    try:
        flops, nbytes = work(problem, shape)
    except ProblemError as exc:
        raise ProblemError(f"{where}: {exc.message}", hint=exc.hint) from None
    if not nbytes > 0 or not flops >= 0:
        raise ProblemError(f"{where}: field flops/bytes: got {flops:g} FLOPs and {nbytes:g} "
                           f"bytes; bytes must be > 0 and FLOPs >= 0")
    return roofline_values(flops, nbytes, compute_dtype(problem), profile,
                           use_measured=use_measured)
