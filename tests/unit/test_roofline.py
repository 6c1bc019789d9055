"""The safe expression evaluator and the roofline, against hand-computed cases."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from grader.errors import ProblemError
from grader.formats.expr import MAX_LENGTH, evaluate
from grader.formats.problem import Problem, Shape
from grader.scoring.hardware import load_hardware
from grader.scoring.roofline import compute_dtype, roofline, roofline_time, roofline_values
from grader.suite.load import load_suite

DEMO = load_suite(Path(__file__).resolve().parents[2] / "problem_bundles" / "demo")
H200 = load_hardware("h200")


def shape_of(problem: str, shape: str) -> tuple[Problem, Shape]:
    p = DEMO.problems[problem].problem
    return p, next(s for s in p.shapes if s.id == shape)


# --- the expression evaluator -------------------------------------------------------------


@pytest.mark.parametrize(("expr", "params", "value"), [
    ("2*M*N*K", {"M": 4096, "N": 4096, "K": 4096}, 137438953472.0),
    ("2*(M*K + K*N + M*N)", {"M": 8, "N": 14336, "K": 4096}, 117735424.0),
    ("4*tokens*hidden", {"tokens": 2048, "hidden": 4096, "eps": 1e-5}, 33554432.0),
    ("3*4*n", {"n": 4099}, 49188.0),
    ("2 + 3 * 4 ** 2", {}, 50.0),  # precedence: ** before * before +
    ("-x + +x - (-2)", {"x": 7}, 2.0),
    ("7 // 2 + 7 % 2 + 7 / 2", {}, 7.5),
    ("min(a, b, 3) + max(a, b)", {"a": 5, "b": 9}, 12.0),
    ("ceil(n / 128) * 128", {"n": 4099}, 4224.0),
    ("floor(2.9) + log2(1024) + sqrt(16)", {}, 16.0),
    ("2**-1", {}, 0.5),
    ("n * 1e-3", {"n": 1000}, 1.0),
])
def test_evaluates(expr: str, params: dict[str, object], value: float) -> None:
    assert evaluate(expr, params) == value


@pytest.mark.parametrize(("expr", "params", "message"), [
    ("__import__('os').system('touch /tmp/pwned')", {}, "may be called"),
    ("open('/etc/passwd')", {}, "may be called"),
    ("n.__class__", {"n": 1}, "Attribute is not allowed"),
    ("(lambda: 1)()", {}, "may be called"),
    ("[n for n in range(9)]", {}, "ListComp is not allowed"),
    ("x[0]", {"x": 1}, "Subscript is not allowed"),
    ("'a' * 3", {}, "is not a number"),
    ("True + 1", {}, "is not a number"),
    ("n if n else 1", {"n": 1}, "IfExp is not allowed"),
    ("n < 3", {"n": 1}, "Compare is not allowed"),
    ("n and 3", {"n": 1}, "BoolOp is not allowed"),
    ("n << 3", {"n": 1}, "BinOp is not allowed"),
    ("~n", {"n": 1}, "UnaryOp is not allowed"),
    ("max(*x)", {"x": 1}, "starred"),
    ("sqrt(x=4)", {}, "keyword"),
    ("sqrt(4, 9)", {}, "takes 1"),
    ("max(4)", {}, "takes 2+"),
    ("m", {"n": 1}, "unknown name 'm'"),
    ("flag * 2", {"flag": True}, "not a number"),
    ("dtype * 2", {"dtype": "bf16"}, "not a number"),
    ("9**9**9", {}, "exponent"),
    ("2**64 * 2**64 * 2**64", {}, "exceeds"),
    ("10.0**300 * 10.0**300", {}, "exceeds"),
    ("1e400", {}, "not a finite"),
    ("(-8) ** 0.5", {}, "not a finite real"),
    ("n / 0", {"n": 1}, "division by zero"),
    ("n % 0", {"n": 1}, "division by zero"),
    ("sqrt(-1)", {}, "sqrt() failed"),
    ("log2(0)", {}, "log2() failed"),
    ("2 *", {}, "not a valid expression"),
    ("   ", {}, "empty"),
    ("x = 1", {}, "not a valid expression"),
])
def test_refuses(expr: str, params: dict[str, object], message: str) -> None:
    with pytest.raises(ProblemError) as err:
        evaluate(expr, params)
    assert message in str(err.value)
    assert repr(expr.strip())[:40] in str(err.value) or "empty" in str(err.value)


def test_refuses_long_and_deep_expressions() -> None:
    with pytest.raises(ProblemError, match="longer than"):
        evaluate("1+" * MAX_LENGTH + "1", {})
    with pytest.raises(ProblemError, match="syntax nodes"):
        evaluate("+".join(["n"] * 150), {"n": 1})


def test_never_executes(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    with pytest.raises(ProblemError):
        evaluate(f"__import__('pathlib').Path('{marker}').touch()", {})
    assert not marker.exists()


# --- the roofline -------------------------------------------------------------------------


def test_matmul_prefill_on_h200_is_compute_bound() -> None:
    r = roofline(*shape_of("matmul", "llama3_8b_oproj_prefill"), H200)
    flops, nbytes = 2 * 4096**3, 2 * 3 * 4096**2
    assert (r.flops, r.bytes) == (flops, nbytes)
    assert r.dtype == "bf16" and r.peak_flops_per_s == 989.5e12
    assert r.t_compute_s == pytest.approx(flops / 989.5e12)  # 138.9 µs
    assert r.t_memory_s == pytest.approx(nbytes / 4.8e12)  # 21.0 µs
    assert r.t_s == r.t_compute_s == pytest.approx(1.38897e-4, rel=1e-4)
    assert r.intensity == pytest.approx(4096 / 3)
    assert r.ridge == pytest.approx(989.5 / 4.8)
    assert r.regime == "compute"
    assert (r.flops_ceiling, r.bandwidth_ceiling, r.hardware) == ("datasheet", "datasheet", "h200")


def test_matmul_decode_is_memory_bound() -> None:
    r = roofline(*shape_of("matmul", "llama3_8b_up_decode"), H200)
    nbytes = 2 * (8 * 4096 + 4096 * 14336 + 8 * 14336)
    assert r.bytes == nbytes and r.t_s == pytest.approx(nbytes / 4.8e12)
    assert r.regime == "memory" and r.intensity == pytest.approx(7.98, abs=0.01)


def test_vector_add_uses_fp32_peak_and_bandwidth() -> None:
    r = roofline(*shape_of("vector_add", "residual_prefill"), H200)
    assert r.dtype == "fp32" and r.peak_flops_per_s == 67e12  # not the tf32 peak
    assert r.t_s == pytest.approx(12 * 8388608 / 4.8e12)  # 20.97 µs
    assert r.regime == "memory" and r.intensity == pytest.approx(1 / 12)


def test_rmsnorm_on_a100() -> None:
    r = roofline(*shape_of("rmsnorm", "llama3_8b_prefill"), load_hardware("a100-sxm"))
    assert r.t_s == pytest.approx(2 * (2 * 2048 * 4096 + 4096) / 2.039e12)
    assert r.regime == "memory"


def test_measured_ceilings_when_asked() -> None:
    problem, shape = shape_of("matmul", "llama3_8b_oproj_prefill")
    r = roofline(problem, shape, H200, use_measured=True)
    assert (r.flops_ceiling, r.bandwidth_ceiling) == ("measured", "measured")
    assert r.t_s == pytest.approx(2 * 4096**3 / 7.73e14)
    assert r.ridge == pytest.approx(7.73e14 / 4.194e12)
    # fp32 has no measurement: its ceiling stays the datasheet's, the bandwidth is measured.
    r32 = roofline(*shape_of("vector_add", "residual_prefill"), H200, use_measured=True)
    assert (r32.flops_ceiling, r32.bandwidth_ceiling) == ("datasheet", "measured")
    # A profile without measurements falls back to the datasheet.
    r100 = roofline(problem, shape, load_hardware("h100-sxm"), use_measured=True)
    assert r100.flops_ceiling == "datasheet"


def test_regime_at_the_ridge_is_compute() -> None:
    r = roofline_values(989.5e12, 4.8e12, "bf16", H200)
    assert r.t_compute_s == pytest.approx(r.t_memory_s) and r.regime == "compute"


def test_below_the_launch_floor_is_launch_bound() -> None:
    # 1 MB at 4.8 TB/s: 0.2 µs, under the H200's measured 4.3 µs launch floor.
    small = roofline_values(1e6, 1e6, "bf16", H200)
    assert small.regime == "launch" and small.t_s == pytest.approx(1e6 / 4.8e12)
    # The floor only classifies: the roofline time and the other regimes are unchanged.
    assert roofline_values(1e6, 1e9, "bf16", H200).regime == "memory"  # 208 µs
    # A profile that knows no launch floor never says launch.
    assert roofline_values(1e6, 1e6, "bf16", load_hardware("h100-sxm")).regime == "memory"


def test_roofline_time_sums_compute_over_dtypes() -> None:
    t = roofline_time({"bf16": 989.5e12, "fp32": 67e12}, 1.0, H200)
    assert t == pytest.approx(2.0)  # one second at each peak
    assert roofline_time({"bf16": 1.0}, 4.8e12, H200) == pytest.approx(1.0)  # memory-bound


def _problem(**kw: object) -> Problem:
    base: dict[str, object] = {
        "id": "p", "operator": "op", "dtypes": ["float32"], "flops": "n", "bytes": "8*n",
        "shapes": [{"id": "s", "params": {"n": 10}, "phase": "decode"}],
    }
    return Problem.model_validate({**base, **kw})


@pytest.mark.parametrize(("dtypes", "peak"), [
    (["float32"], "fp32"), (["bfloat16"], "bf16"), (["float16"], "fp16"),
    (["float8_e4m3fn", "bfloat16"], "fp8"), (["float8_e5m2"], "fp8"), (["int8"], "int8"),
    (["int64", "bool", "bfloat16", "float32"], "bf16"),  # index/mask dtypes are skipped
])
def test_compute_dtype(dtypes: list[str], peak: str) -> None:
    assert compute_dtype(_problem(dtypes=dtypes)) == peak


def test_no_compute_dtype_is_an_error() -> None:
    with pytest.raises(ProblemError, match="no compute dtype"):
        compute_dtype(_problem(dtypes=["int32", "int64"]))


def test_a_chip_without_the_dtype_is_an_error() -> None:
    p = _problem(dtypes=["float8_e4m3fn"])
    with pytest.raises(ProblemError, match=r"a100-sxm: field peak_flops\.fp8"):
        roofline(p, p.shapes[0], load_hardware("a100-sxm"))


@pytest.mark.parametrize(("flops", "nbytes", "message"), [
    ("n", "0*n", "bytes must be > 0"),
    ("-n", "8*n", "FLOPs >= 0"),
    ("n", "m", "unknown name 'm'"),
])
def test_bad_expressions_name_problem_and_shape(flops: str, nbytes: str, message: str) -> None:
    p = _problem(flops=flops, bytes=nbytes)
    with pytest.raises(ProblemError) as err:
        roofline(p, p.shapes[0], H200)
    assert "problem p, shape s" in str(err.value) and message in str(err.value)


def test_zero_flops_is_memory_bound() -> None:
    p = _problem(flops="0")
    h100 = load_hardware("h100-sxm")  # no launch floor: 80 bytes stay memory-bound
    r = roofline(p, p.shapes[0], h100)
    assert r.regime == "memory" and r.t_compute_s == 0 and math.isclose(r.t_s, 80 / 3.35e12)
