"""The llm-inference suite as a whole: it loads, its weights are the script's output, and
every problem has a solution."""

from __future__ import annotations

import subprocess
import sys
import tomllib

import pytest

from grader.formats.submission import Manifest
from grader.paths import PROBLEM_BUNDLES, REPO
from grader.scoring.derive import check
from grader.suite.load import load_suite

SUITE = PROBLEM_BUNDLES / "llm-inference"


def test_suite_has_at_least_twenty_problems() -> None:
    # shapes, phases and smoke shapes per problem: test_llm_solutions.py
    assert len(load_suite(SUITE).problems) >= 20


def test_weights_are_what_the_script_writes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    before = (SUITE / "weights.toml").read_text()
    res = subprocess.run([sys.executable, str(SUITE / "make_weights.py")], capture_output=True,
                         text=True, cwd=REPO, check=False)
    after = (SUITE / "weights.toml").read_text()
    (SUITE / "weights.toml").write_text(before)
    assert res.returncode == 0, res.stderr
    assert after == before, "weights.toml is stale: run make_weights.py"
    weights = load_suite(SUITE).weights.weights
    assert abs(sum(w.weight for w in weights) - 1.0) < 1e-4
    assert all(w.shape for w in weights)


@pytest.mark.parametrize("folder", ["llm-inference", "llm-inference-torch"])
def test_every_problem_has_a_solution(folder: str) -> None:
    """Our Triton solutions, and the pure-PyTorch baseline entry."""
    manifest = Manifest.model_validate(
        tomllib.loads((REPO / "solutions" / folder / "submission.toml").read_text()))
    assert set(manifest.problems) == set(load_suite(SUITE).problems)
    for entry in manifest.problems.values():
        assert (REPO / "solutions" / folder / entry.file).is_file()


# Problems whose semantic bytes are, by design, below what derive counts: derive sees every
# input tensor whole, these read only part of one (their problem.toml says so, and why).
PARTIAL_READS = {
    "embedding": "reads T rows of the V x H table",
    "reshape_and_cache": "writes T slots of the caches; its where() on the slots counts as FLOPs",
    "paged_attention_decode": "reads each sequence's blocks, not the whole cache",
    "fused_moe": "reads the weights of the min(E, T*k) experts used, not all E",
}


PROBLEMS = load_suite(SUITE).problems


@pytest.mark.parametrize("pid", sorted(PROBLEMS))
def test_expressions_agree_with_derive_on_smoke_shapes(pid: str) -> None:
    bundle = PROBLEMS[pid]
    smoke = [s.id for s in bundle.problem.shapes if s.smoke]
    rows = check(bundle.directory, shapes=smoke, device="cpu")
    assert len(rows) == len(smoke)
    if pid not in PARTIAL_READS:
        assert all(r.ok for r in rows), rows
        return
    assert "derive" in (bundle.directory / "problem.toml").read_text()  # the why is written
    for r in rows:  # where every part is read (fused_moe with T*k >= E) the two agree
        assert 0 < r.expr_bytes <= r.derived_bytes, r


@pytest.mark.parametrize("params", [
    {"B": 3, "ctx": 37, "max_ctx": 64, "block_size": 16},
    {"B": 40, "ctx": 50, "max_ctx": 200, "block_size": 8},
    {"B": 1, "ctx": 90, "max_ctx": 128, "block_size": 16},
])
def test_paged_block_tables_are_the_bits_they_were(params: dict[str, int]) -> None:
    """paged_attention_decode's block tables are filled from offsets into one random order
    (the list slicing it replaced was quadratic in the blocks: 18-25 ms a draw of the largest
    shapes, every timed call's). The same seed must still give the same inputs, bit for bit."""
    import math

    import torch

    from grader.scoring.derive import load_reference

    ref = load_reference(PROBLEM_BUNDLES / "llm-inference" / "paged_attention_decode")
    p = {**params, "heads": 2, "kv_heads": 1, "head_dim": 8}
    _q, _k, _v, tables, lens = ref.make_inputs(7, "cpu", **p)[:5]
    # the tables as the loop before built them, from the same generator's draws
    gen = torch.Generator(device="cpu").manual_seed(7)
    lengths = ref.context_lengths(gen, batch=p["B"], total=p["B"] * p["ctx"],
                                  max_len=p["max_ctx"])
    n_blocks = [math.ceil(n / p["block_size"]) for n in lengths]
    free = (torch.randperm(sum(n_blocks), generator=gen) + 1).tolist()
    want = torch.zeros(p["B"], math.ceil(p["max_ctx"] / p["block_size"]), dtype=torch.int32)
    for b, n in enumerate(n_blocks):
        want[b, :n] = torch.tensor(free[:n], dtype=torch.int32)
        free = free[n:]
    assert torch.equal(tables, want) and tables.dtype == torch.int32
    assert lens.tolist() == lengths
