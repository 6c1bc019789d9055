"""`grader roofline derive`: the demo problems' expressions agree with running the references.

matmul and vector_add agree exactly; rmsnorm's derivation also counts the per-row `+ eps` and
`rsqrt` (2 per token), which its expression `4*tokens*hidden` leaves out: 1/(2*hidden) relative,
under 0.3% for every demo shape, inside check()'s 1% tolerance.
"""

from __future__ import annotations

import contextlib
import importlib.util
import textwrap
import tomllib
import types
from pathlib import Path

import pytest
import torch

from grader.errors import ProblemError
from grader.scoring import derive as derive_mod
from grader.scoring.derive import (
    DEFAULT_RTOL,
    check,
    derive,
    output_bytes_on_meta,
    unique_bytes,
)

DEMO = Path(__file__).resolve().parents[2] / "problem_bundles" / "demo"


@pytest.mark.parametrize(("shape", "m", "n", "k"), [
    ("smoke_64x48x80", 64, 48, 80), ("smoke_decode_5x96x64", 5, 96, 64)])
def test_matmul_flops_are_exactly_2mnk(shape: str, m: int, n: int, k: int) -> None:
    d = derive(DEMO / "matmul", shape)
    assert d.flops == 2 * m * n * k
    assert d.by_op["aten.mm"].rule == "flop_counter" and d.by_op["aten.mm"].flops == 2 * m * n * k
    assert d.by_op["aten._to_copy"].flops == 0  # dtype conversions are free
    assert (d.bytes_read, d.bytes_written) == (2 * (m * k + k * n), 2 * m * n)
    assert d.bytes == 2 * (m * k + k * n + m * n)


def test_vector_add_is_exact() -> None:
    d = derive(DEMO / "vector_add", "smoke_4099")
    assert d.flops == 4099 and d.by_op["aten.add"].rule == "pointwise"
    assert d.bytes == 3 * 4 * 4099


@pytest.mark.parametrize(("shape", "tokens", "hidden"), [
    ("smoke_8x256", 8, 256), ("smoke_5x200", 5, 200)])
def test_rmsnorm_counts_elementwise_and_reduction(shape: str, tokens: int, hidden: int) -> None:
    d = derive(DEMO / "rmsnorm", shape)
    th = tokens * hidden
    # x*x, *rsqrt, *w: 3 multiplies per element; mean: one per input element; + eps and rsqrt
    # once per row.
    assert d.by_op["aten.mul"].flops == 3 * th and d.by_op["aten.mul"].calls == 3
    assert d.by_op["aten.mean"].rule == "reduction" and d.by_op["aten.mean"].flops == th
    assert d.by_op["aten.add"].flops == tokens and d.by_op["aten.rsqrt"].flops == tokens
    assert d.flops == 4 * th + 2 * tokens
    assert abs(d.flops - 4 * th) / d.flops < 0.003  # within the documented tolerance
    assert d.bytes == 2 * (2 * th + hidden)  # eps is a Python float: no bytes


@pytest.mark.parametrize("problem", ["vector_add", "rmsnorm", "matmul"])
def test_demo_expressions_agree_on_smoke_shapes(problem: str) -> None:
    rows = check(DEMO / problem, shapes=_smoke(problem))
    assert rows and all(r.ok for r in rows), rows
    for r in rows:
        assert r.expr_bytes == r.derived_bytes
        if problem != "rmsnorm":
            assert r.expr_flops == r.derived_flops


@pytest.mark.parametrize("problem", ["vector_add", "rmsnorm", "matmul"])
def test_demo_expressions_agree_on_every_shape_on_meta(problem: str) -> None:
    """The meta device allocates and computes nothing, so the full shapes take no time."""
    rows = check(DEMO / problem, device="meta")
    assert len(rows) == len(_all(problem)) and all(r.ok for r in rows), rows


def _shapes(problem: str) -> list[dict[str, object]]:
    return tomllib.loads((DEMO / problem / "problem.toml").read_text())["shapes"]


def _smoke(problem: str) -> list[str]:
    return [str(s["id"]) for s in _shapes(problem) if s.get("smoke")]


def _all(problem: str) -> list[str]:
    return [str(s["id"]) for s in _shapes(problem)]


def _bundle(tmp_path: Path, flops: str, reference: str) -> Path:
    d = tmp_path / "scale"
    d.mkdir(parents=True)
    (d / "problem.toml").write_text(textwrap.dedent(f"""
        id = "scale"
        operator = "scale"
        dtypes = ["float32"]
        flops = "{flops}"
        bytes = "8*n"
        [[shapes]]
        id = "s"
        params = {{ n = 1000 }}
        phase = "decode"
    """))
    (d / "reference.py").write_text(textwrap.dedent(reference))
    return d


REFERENCE = """
    import torch
    def reference(x):
        return x * 2.0
    def make_inputs(seed, device, *, n):
        return (torch.ones(n, device=device),)
"""


def test_check_flags_a_wrong_expression(tmp_path: Path) -> None:
    d = _bundle(tmp_path, "3*n", REFERENCE)
    (row,) = check(d)
    assert (row.expr_flops, row.derived_flops, row.ok) == (3000, 1000, False)
    assert row.expr_bytes == row.derived_bytes == 8000
    assert check(_bundle(tmp_path / "b", "1.005*n", REFERENCE), rtol=DEFAULT_RTOL)[0].ok


def test_sum_reduction_counts_input_elements(tmp_path: Path) -> None:
    ref = REFERENCE.replace("return x * 2.0", "return x.sum(dim=0, keepdim=True)")
    d = derive(_bundle(tmp_path, "n", ref), "s")
    assert d.flops == 1000 and d.by_op["aten.sum"].rule == "reduction"
    assert (d.bytes_read, d.bytes_written) == (4000, 4)


def test_a_failing_reference_is_a_problem_error(tmp_path: Path) -> None:
    d = _bundle(tmp_path, "n", REFERENCE.replace("return x * 2.0", "raise ValueError('boom')"))
    with pytest.raises(ProblemError, match="the reference failed: ValueError: boom"):
        derive(d, "s")


def test_unknown_shape(tmp_path: Path) -> None:
    with pytest.raises(ProblemError, match="no shape 'nope'"):
        derive(DEMO / "vector_add", "nope")


def test_unique_bytes_counts_each_storage_once() -> None:
    x = torch.zeros(100, dtype=torch.float32)
    assert unique_bytes([x, x, x.view(10, 10)]) == 400
    assert unique_bytes([x[:60], x[40:]]) == 400  # overlapping views: the union
    assert unique_bytes([x[:10], x[90:]]) == 80  # disjoint views of one storage
    assert unique_bytes([x, torch.zeros(3, dtype=torch.bfloat16)]) == 406
    assert unique_bytes([x.view(10, 10).t()]) == 400  # a transposed view covers the same bytes
    assert unique_bytes([torch.zeros(0)]) == 0
    assert unique_bytes([x.expand(1, 100), torch.zeros(1).expand(50)]) == 404  # stride 0


# -- outputs counted on meta where the reference reads values ---------------------------------
def _module(tmp_path: Path, name: str, source: str) -> types.ModuleType:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# A state update by index, as Atrex-Bench's chunk_gated_delta_rule_state: the indices read as
# a list (meta has no values), outputs sized by the parameters alone.
GATHER = """
    import torch

    def make_inputs(seed, device, *, rows, width, chunks):
        state = torch.randn(rows, width, device=device)
        idx = torch.arange(rows, device=device)
        return state, idx

    class Model(torch.nn.Module):
        def __init__(self, chunks):
            super().__init__()
            self.chunks = chunks

        def forward(self, state, idx):
            picked = state.index_select(0, torch.tensor(idx.tolist(), device=state.device))
            first = int(idx[0].item())
            per_chunk = torch.empty(self.chunks, *picked.shape, dtype=torch.bfloat16,
                                    device=state.device)
            for c in range(self.chunks):
                per_chunk[c] = (picked * (c + first)).to(torch.bfloat16)
            return {"per_chunk": per_chunk, "final": picked.clone()}
"""


def test_outputs_of_a_value_reading_reference_are_counted_on_meta(tmp_path: Path) -> None:
    ref = _module(tmp_path, "gather_ref", GATHER)
    params = {"rows": 64, "width": 1000, "chunks": 6}
    with pytest.raises(NotImplementedError, match="meta"):  # meta alone has no values
        derive_mod.count(ref, params, {"chunks": 6}, device="meta")
    got = output_bytes_on_meta(ref, params, {"chunks": 6})
    want = 6 * 64 * 1000 * 2 + 64 * 1000 * 4  # bf16 per chunk, the float32 final state
    assert got == want
    # the same count as a real run on the CPU, which has the values
    assert derive_mod.count(ref, params, {"chunks": 6}, device="cpu")[2] == want


def test_the_zero_value_count_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ref = _module(tmp_path, "gather_bounded", GATHER)
    # a long loop: stopped once its budget of ops is spent, never run to its end; a budget
    # shared by several runs (a problem's shapes) is spent by all of them
    with pytest.raises(ProblemError, match="ops allowed for counting on meta are spent"):
        output_bytes_on_meta(ref, {"rows": 8, "width": 4, "chunks": 100}, {"chunks": 100},
                             budget=derive_mod.OpBudget(50))
    shared = derive_mod.OpBudget(60)
    small = {"rows": 8, "width": 4, "chunks": 2}
    assert output_bytes_on_meta(ref, small, {"chunks": 2}, budget=shared) == 8 * 4 * (2 * 2 + 4)
    assert 0 < shared.left < 60
    while shared.left > 0:
        with contextlib.suppress(ProblemError):
            output_bytes_on_meta(ref, small, {"chunks": 2}, budget=shared)
    with pytest.raises(ProblemError, match="spent"):
        output_bytes_on_meta(ref, small, {"chunks": 2}, budget=shared)
    # a read of more values out of meta than ZERO_READ_ELEMENTS: no zeros made for it
    monkeypatch.setattr(derive_mod, "ZERO_READ_ELEMENTS", 32)
    with pytest.raises(ProblemError, match="a read of 64 elements out of meta"):
        output_bytes_on_meta(ref, {"rows": 64, "width": 4, "chunks": 1}, {"chunks": 1})
    assert output_bytes_on_meta(ref, {"rows": 32, "width": 4, "chunks": 1}, {"chunks": 1}) == (
        32 * 4 * 2 + 32 * 4 * 4)
