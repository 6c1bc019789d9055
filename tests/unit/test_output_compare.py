"""grader.judge.outputs: the trusted comparison of outputs, and its chunked pass over large ones.

Every statistic must be the same whatever the chunk size (the pass works on CHUNK elements at a
time) and however many processes share the chunks (PROCESSES spans, from SPREAD_FROM elements),
and each failure must be found wherever in the output it sits.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from grader.harness import tensors
from grader.judge import outputs as cmp
from grader.paths import PROBLEM_BUNDLES
from grader.suite.load import load_suite

SOFTMAX = load_suite(PROBLEM_BUNDLES / "llm-inference").problems["softmax"].problem  # bf16
TOL = SOFTMAX.tolerance_for("bfloat16")


def _pair(n: int = 10_000, noise: float = 0.01) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    e = torch.randn(n, generator=gen).to(torch.bfloat16)
    jitter = torch.randn(n, generator=gen) * noise
    return e, (e.float() + jitter).to(torch.bfloat16)


def _spread_over(monkeypatch: pytest.MonkeyPatch, processes: int) -> None:
    """Outputs of any size compared in `processes` spans, by real processes where more than
    one (the pool is started once per test process)."""
    monkeypatch.setattr(cmp, "PROCESSES", processes)
    monkeypatch.setattr(cmp, "SPREAD_FROM", 0)


def _by_hand(e: torch.Tensor, a: torch.Tensor) -> tuple[int, float, float]:
    """Mismatches, max abs and max rel error, computed the obvious way, whole, in float64."""
    e64, a64 = e.double(), a.double()
    diff = (a64 - e64).abs()
    bad = int((diff > TOL.atol + TOL.rtol * e64.abs()).sum())
    return bad, float(diff.max()), float((diff / e64.abs().clamp_min(1e-12)).max())


@pytest.mark.parametrize("processes", [1, 3, 8])
@pytest.mark.parametrize("chunk", [1, 7, 1000, 4096, 1 << 22])
def test_statistics_do_not_depend_on_the_chunk(chunk: int, processes: int,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    e, a = _pair()
    a[::97] += 1.0  # some elements far outside the tolerance
    monkeypatch.setattr(cmp, "CHUNK", chunk)
    _spread_over(monkeypatch, processes)
    out = cmp.compare([e.reshape(100, 100)], [a.reshape(100, 100)], SOFTMAX)
    bad, worst_abs, worst_rel = _by_hand(e, a)
    assert bad > 0 and not out.ok
    assert out.comparison.mismatched == bad and out.comparison.total == e.numel()
    assert out.comparison.max_abs_err == worst_abs and out.comparison.max_rel_err == worst_rel
    assert f"{bad} of {e.numel()} elements outside" in out.detail


def test_within_tolerance_passes_with_its_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    e, a = _pair(noise=0.001)
    monkeypatch.setattr(cmp, "CHUNK", 333)
    out = cmp.compare([e], [a], SOFTMAX)
    assert out.ok and out.detail == "within tolerance"
    assert (out.comparison.max_abs_err, out.comparison.max_rel_err) == _by_hand(e, a)[1:]


@pytest.mark.parametrize("processes", [1, 4])
@pytest.mark.parametrize("where", [0, 4999, 9999])
def test_non_finite_values_are_counted_in_any_chunk(where: int, processes: int,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    e, a = _pair()
    a[where] = float("nan")
    a[(where + 5000) % 10_000] = float("inf")
    monkeypatch.setattr(cmp, "CHUNK", 1000)
    _spread_over(monkeypatch, processes)
    out = cmp.compare([e], [a], SOFTMAX)
    assert not out.ok and out.detail == "output 0: 2 NaN or Inf values"


@pytest.mark.parametrize("processes", [1, 4])
def test_all_zeros_fail_unless_the_reference_is_zero_too(processes: int,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cmp, "CHUNK", 1000)
    _spread_over(monkeypatch, processes)
    e = torch.zeros(10_000, dtype=torch.bfloat16)
    e[9_999] = 1.0  # the reference's only nonzero value, in the last chunk
    out = cmp.compare([e], [torch.zeros_like(e)], SOFTMAX)
    assert not out.ok and "all zeros where the reference is not" in out.detail
    assert cmp.compare([torch.zeros_like(e)], [torch.zeros_like(e)], SOFTMAX).ok
    # One nonzero value anywhere makes it an ordinary comparison (here within tolerance).
    a = torch.zeros_like(e)
    a[9_999] = 1.0
    assert cmp.compare([e], [a], SOFTMAX).ok


def test_fp8_outputs_and_exact_dtypes() -> None:
    quant = load_suite(PROBLEM_BUNDLES / "llm-inference").problems["fp8_per_token_quant"].problem
    x = torch.linspace(-400, 400, 5000).to(torch.float8_e4m3fn)
    assert cmp.compare([x], [x.clone()], quant).ok
    ids = torch.arange(50, dtype=torch.int32)
    wrong = ids.clone()
    wrong[7] = 0
    out = cmp.compare([x, ids], [x.clone(), wrong], quant)
    assert not out.ok and out.detail == ("output 1: 1 of 50 elements differ (exact dtype); "
                                         "first: output 1[7]: got 0, expected 7")


def test_empty_and_mismatched_structure() -> None:
    empty = torch.empty(0, 4, dtype=torch.bfloat16)
    assert cmp.compare([empty], [empty.clone()], SOFTMAX).ok
    e, a = _pair(10)
    assert "returned 2 outputs" in cmp.compare([e], [a, a], SOFTMAX).detail
    assert "dtype" in cmp.compare([e], [a.float()], SOFTMAX).detail
    assert "shape" in cmp.compare([e], [a.reshape(2, 5)], SOFTMAX).detail


def test_a_references_masked_infinities_match_the_same_infinities(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """issue 20: a top-k filter's reference writes -inf where it masks; an entry that writes
    the same -inf there is correct, and one that writes anything else is not."""
    monkeypatch.setattr(cmp, "CHUNK", 1000)
    logits = torch.randn(4, 2500)
    threshold = torch.topk(logits, 50, dim=-1).values[..., -1:]
    e = logits.masked_fill(logits < threshold, float("-inf"))
    same = e.clone()
    same[e.isfinite()] += 1e-6
    out = cmp.compare([e], [same], SOFTMAX)
    assert out.ok, out.detail
    assert out.comparison.max_abs_err < 1e-5  # the infinities are out of the statistics
    zeroed = e.clone()
    zeroed[0, e[0].isinf()] = 0.0  # a finite value where the reference masked
    out = cmp.compare([e], [zeroed], SOFTMAX)
    assert not out.ok and f"{int(e[0].isinf().sum())} of" in out.detail
    flipped = e.clone()
    flipped[1, e[1].isinf()] = float("inf")  # the wrong infinity
    out = cmp.compare([e], [flipped], SOFTMAX)
    assert not out.ok and out.detail == f"output 0: {int(e[1].isinf().sum())} NaN or Inf values"


def test_rocm_fp8_outputs_compare_with_the_fp8_tolerance() -> None:
    quant = load_suite(PROBLEM_BUNDLES / "llm-inference").problems["fp8_per_token_quant"].problem
    x = torch.linspace(-200, 200, 3000).to(torch.float8_e4m3fnuz)
    assert cmp.compare([x], [x.clone()], quant).ok
    out = cmp.compare([x], [(x.float() * 2).to(torch.float8_e4m3fnuz)], quant)
    assert not out.ok and out.comparison.rtol == quant.tolerance_for("float8_e4m3fn").rtol


@pytest.mark.parametrize("processes", [1, 5])
@pytest.mark.parametrize("chunk", [1, 7, 4096, 1 << 22])
def test_a_mismatch_names_its_worst_elements(chunk: int, processes: int,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 34: a mismatch said how many elements were off but not which, nor by how much;
    like torch.testing.assert_close it names the worst ones' indices, got and expected, the
    furthest outside the tolerance first, wherever the chunks and spans fall."""
    monkeypatch.setattr(cmp, "CHUNK", chunk)
    _spread_over(monkeypatch, processes)
    e = torch.linspace(-1, 1, 6000).to(torch.bfloat16).reshape(20, 300)
    a = e.clone()
    a[19, 299] = 4.0  # the worst, in the last chunk
    a[0, 5] += 1.0
    a[7, 100] -= 2.0
    a[3, 3] += 0.5  # the fourth: past the three named
    out = cmp.compare([e.clone(), e], [e.clone(), a], SOFTMAX)
    assert not out.ok and out.comparison.mismatched == 4
    want = [((19, 299), 4.0), ((7, 100), float(e[7, 100]) - 2.0), ((0, 5), float(e[0, 5]) + 1)]
    named = out.detail.split("; worst: ")[1].split("; ")
    assert len(named) == 3
    for text, (index, got) in zip(named, want, strict=True):
        r, c = index
        assert text == (f"output 1[{r}, {c}]: got {float(torch.tensor(got).to(torch.bfloat16)):.6g}"
                        f", expected {float(e[r, c]):.6g}")


def test_equal_excesses_name_the_first_elements_whatever_span_finishes_first(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Spans finish in any order; of elements equally far outside the tolerance, the first
    ones by position are named, every time."""
    monkeypatch.setattr(cmp, "CHUNK", 100)
    _spread_over(monkeypatch, 8)
    e = torch.zeros(4000, dtype=torch.bfloat16)
    a = e.clone()
    a[[3900, 2500, 1200, 10]] = 1.0  # four equal excesses, in four spans
    for _ in range(5):
        out = cmp.compare([e], [a], SOFTMAX)
        named = out.detail.split("; worst: ")[1].split("; ")
        assert [t.split(":")[0] for t in named] == ["output 0[10]", "output 0[1200]",
                                                   "output 0[2500]"]


def test_index_of_an_element() -> None:
    assert cmp._unravel(0, (3, 4)) == (0, 0)
    assert cmp._unravel(7, (3, 4)) == (1, 3)
    assert cmp._unravel(23, (2, 3, 4)) == (1, 2, 3)
    assert cmp._unravel(5, (6,)) == (5,)


@pytest.fixture
def processes(monkeypatch: pytest.MonkeyPatch) -> Iterator[cmp._Processes]:
    """Comparing processes of the test's own, stopped after it."""
    procs = cmp._Processes()
    monkeypatch.setattr(cmp, "_PROCESSES", procs)
    yield procs
    if (pool := procs._pool) is not None:
        pool.shutdown()


def test_a_large_output_is_compared_by_processes_with_the_same_statistics(
        monkeypatch: pytest.MonkeyPatch, processes: cmp._Processes) -> None:
    """From SPREAD_FROM elements the spans go to comparing processes (the outputs shared with
    them, not copied), and what comes back merges into the statistics of one pass."""
    monkeypatch.setattr(cmp, "CHUNK", 1000)
    e, a = _pair(50_000)
    a[::97] += 1.0
    spans = [(0, 20_000), (20_000, 40_000), (40_000, 50_000)]
    parts = cmp._spread(e, a, spans, TOL.atol, TOL.rtol, 0, (50_000,))
    assert parts is not None and e.is_shared() and a.is_shared()
    whole = cmp._span_stats(e, a, 0, 50_000, TOL.atol, TOL.rtol, 0, (50_000,), 1000)
    assert cmp._merged(parts) == whole and whole.mismatched == _by_hand(e, a)[0]


def test_comparing_processes_that_die_cost_only_their_speed(
        monkeypatch: pytest.MonkeyPatch, processes: cmp._Processes) -> None:
    """A comparing process that dies (killed, out of memory) fails no comparison: that one
    runs on the judge's thread, the next starts new processes, and after RESTARTS failures
    the judge stops starting them."""
    procs = processes
    monkeypatch.setattr(cmp, "CHUNK", 1000)
    _spread_over(monkeypatch, 2)
    e, a = _pair(20_000)
    a[::97] += 1.0
    bad = _by_hand(e, a)[0]
    assert cmp.compare([e], [a], SOFTMAX).comparison.mismatched == bad
    pool = procs.pool()
    assert pool is not None
    for p in list(pool._processes.values()):  # the pool's own record of its processes
        p.kill()
        p.join()
    assert cmp.compare([e], [a], SOFTMAX).comparison.mismatched == bad
    assert procs.failed == 1 and procs.pool() is not pool
    assert cmp._spread(e, a, [(0, 10_000), (10_000, 20_000)], TOL.atol, TOL.rtol, 0,
                       (20_000,)) is not None
    procs.failed = cmp.RESTARTS
    procs.drop(procs.pool())  # type: ignore[arg-type]
    assert procs.pool() is None
    assert cmp._spread(e, a, [(0, 10_000), (10_000, 20_000)], TOL.atol, TOL.rtol, 0,
                       (20_000,)) is None
    assert cmp.compare([e], [a], SOFTMAX).comparison.mismatched == bad


def test_the_judge_loads_large_outputs_into_shared_memory(tmp_path: Path) -> None:
    """tensors.load puts a tensor of `shared_from` elements or more in shared memory (what
    the comparing processes take without a copy), smaller ones in plain memory, the same
    values either way."""
    big, small = torch.arange(5000, dtype=torch.float32), torch.ones(10, dtype=torch.bfloat16)
    path = tmp_path / "c.out"
    tensors.save(path, [big, small, 3])
    got = tensors.load(path, shared_from=1000)
    assert got[0].is_shared() and not got[1].is_shared() and got[2] == 3
    assert torch.equal(got[0], big) and torch.equal(got[1], small)
    assert not any(t.is_shared() for t in tensors.load(path)[:2])
