"""`grader round prepare` with the real engine, on the CPU demo suite: a committed round's
references computed before its entries, every entry then graded on them as a later entry is,
with the verdicts of grading it alone under the round's secret; a prepare run again keeps
what it kept; what it refuses; a suite whose reference fails, left to the entries;
references kept light, without their outputs, on a disk with no room for them; and a
problem's next batch whose reference container waited at its gate."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grader.grading.config import GradingOptions
from grader.grading.grader import worker_setup
from grader.grading.prepare import Preparation, prepare_problem
from grader.intake.tools import create_bundle
from grader.model.results import Report
from grader.paths import PROBLEM_BUNDLES, REPO
from grader.round.model import PREPARED_BY
from grader.round.refcache import META, ReferenceCache
from grader.round.store import RoundDir
from grader.sandbox import capped
from grader.suite.load import find_suite

pytestmark = pytest.mark.docker

TWO = ["--suite", "demo", "--problem", "vector_add", "--problem", "rmsnorm"]


def _grader(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grader", *args], capture_output=True,
                          text=True, cwd=REPO, check=False, timeout=300)


def _commit_and_prepare(out: Path, *opts: str) -> str:
    """The round in `out` committed, then prepared; the prepare's standard output."""
    res = _grader("round", "commit", "-o", str(out), *opts, "-q")
    assert res.returncode == 0, res.stderr[-3000:]
    res = _grader("round", "prepare", "-o", str(out), *opts)
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout


def _essence(rep: Report) -> list[Any]:
    return [(p.id, p.verdict, p.detail, [(s.id, s.verdict, s.detail, s.comparisons,
                                          s.error_excerpt) for s in p.shapes])
            for p in rep.problems]


def test_prepared_references_grade_every_entry_as_a_later_one(  # type: ignore[no-untyped-def]
        engine, runtime, tmp_path: Path) -> None:
    out = tmp_path / "r"
    said = _commit_and_prepare(out, *TWO)
    assert "references: 2 kept" in said, said
    rd = RoundDir(out)
    prepared = rd.prepared()
    assert prepared is not None
    assert [(b.problem, b.status) for b in prepared.batches] == [
        ("vector_add", "kept"), ("rmsnorm", "kept")]
    kept = {b.key for b in prepared.batches}
    assert all(b.bytes == sum(f.stat().st_size for f in (out / ".references" / b.key).iterdir()
                              if f.name != META) for b in prepared.batches)
    metas = [json.loads((out / ".references" / k / META).read_text()) for k in kept]
    assert {m["computed_by"] for m in metas} == {PREPARED_BY}
    assert (out / ".references").stat().st_mode & 0o077 == 0

    # Run again: nothing computed, and the record still says the prepare computed them.
    res = _grader("round", "prepare", "-o", str(out), *TWO)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stderr.count("kept already") == 2, res.stderr
    again = rd.prepared()
    assert again is not None and again.batches == prepared.batches
    # A prepare that stopped before its record: the folders still say who computed them.
    rd.prepared_file.unlink()
    res = _grader("round", "prepare", "-o", str(out), *TWO)
    assert res.returncode == 0, res.stderr[-3000:]
    again = rd.prepared()
    assert again is not None
    assert [(b.status, b.detail) for b in again.batches] == [("kept", "by an earlier prepare")] * 2

    bundles = tmp_path / "entries"
    bundles.mkdir()
    create_bundle(REPO / "examples" / "triton", bundles / "triton.tar")
    create_bundle(REPO / "examples" / "torch-fallback", bundles / "fallback.tar")
    res = _grader("round", str(bundles), "-o", str(out), *TWO)
    assert res.returncode == 0, res.stderr[-3000:]
    for name in ("triton", "fallback"):
        outcome = rd.outcome(name)
        assert outcome is not None and outcome.status == "graded"
        # the first entry graded too: on the prepared references, its entry's container alone
        assert {(u.key, u.computed) for u in outcome.references} == {(k, False) for k in kept}
        rep = rd.report(name)
        assert rep is not None
        assert not any(p.phases_s.get("reference") for p in rep.problems), rep.problems
    board = json.loads((out / "leaderboard.json").read_text())
    assert {(r["problem"], tuple(r["computed_by"]), r["reused_by"])
            for r in board["references"]} == {("vector_add", (PREPARED_BY,), 2),
                                               ("rmsnorm", (PREPARED_BY,), 2)}
    res = _grader("round", "verify", str(out))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "leaderboard.json equals the board recomputed" in res.stdout

    # The verdicts and their evidence are those of grading the entry alone under the secret.
    secret = (out / "seed.secret").read_text().strip()
    for name in ("triton", "fallback"):
        alone = tmp_path / f"alone-{name}"
        res = _grader("run", str(bundles / f"{name}.tar"), "-o", str(alone), *TWO[2:],
                      "--seed-secret", secret)
        assert res.returncode == 0, res.stderr[-3000:]
        rep = rd.report(name)
        assert rep is not None
        assert _essence(rep) == _essence(
            Report.model_validate_json((alone / "report.json").read_bytes()))


def test_prepare_refuses_what_the_round_would_not_grade(tmp_path: Path) -> None:
    """No commitment, other options than the committed ones, a round that keeps no
    references: refused before any container runs."""
    out = tmp_path / "r"
    res = _grader("round", "prepare", "-o", str(out), *TWO)
    assert res.returncode == 2 and "no committed round to prepare" in res.stderr, res.stderr
    assert "grader round commit" in res.stderr
    res = _grader("round", "commit", "-o", str(out), *TWO, "-q")
    assert res.returncode == 0, res.stderr[-3000:]
    res = _grader("round", "prepare", "-o", str(out), *TWO, "--seeds", "2")
    assert res.returncode == 6 and "setting seeds_per_shape: 2, committed None" in res.stderr
    res = _grader("round", "prepare", "-o", str(out), *TWO, "--seed-secret", "00" * 32)
    assert res.returncode == 6 and "not the committed secret" in res.stderr, res.stderr
    res = _grader("round", "prepare", "-o", str(out), *TWO, "--no-shared-references")
    assert res.returncode == 2 and "keeps no references" in res.stderr, res.stderr
    assert not (out / ".references").exists() and not (out / "prepared.json").exists()


def test_a_failing_reference_is_left_to_the_entries(  # type: ignore[no-untyped-def]
        engine, runtime, tmp_path: Path) -> None:
    """A reference that raises is not kept: the record says so, and the entry runs it and
    gets the suite's fault as its verdict, as without a prepare."""
    suites = tmp_path / "suites"
    shutil.copytree(PROBLEM_BUNDLES / "demo", suites / "demo")
    ref = suites / "demo" / "vector_add" / "reference.py"
    ref.write_text(ref.read_text() + "\n\ndef reference(*inputs):\n"
                   "    raise RuntimeError('the organiser broke this')\n")
    opts = ["--suite", "demo", "--suites", str(suites), "--problem", "vector_add"]
    out = tmp_path / "r"
    said = _commit_and_prepare(out, *opts)
    assert "vector_add: failed: reference_error" in said, said
    prepared = RoundDir(out).prepared()
    assert prepared is not None and [b.status for b in prepared.batches] == ["failed"]
    assert not (out / ".references").exists()  # nothing was kept
    res = _grader("round", str(REPO / "examples" / "triton"), "-o", str(out), *opts)
    rep = RoundDir(out).report("triton")
    assert rep is not None, res.stderr[-3000:]
    assert {s.verdict for s in rep.problems[0].shapes} == {"reference_error"}


@contextlib.contextmanager
def _small_disk(folder: Path, size: int) -> Iterator[None]:
    """`folder` a tmpfs of `size` bytes for the block: a round's references on a full disk."""
    folder.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs",
                    str(folder)], check=True)
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.mark.skipif(not capped.can_mount(), reason="needs root to mount a tmpfs")
def test_references_without_room_for_their_outputs_are_kept_light(  # type: ignore[no-untyped-def]
        engine, runtime, tmp_path: Path) -> None:
    """A round whose references' disk has room for a batch's result and recipe but not its
    expected outputs keeps it light: the first entry says so, the later one runs its entry
    alone and then a reference container on the correctness cases only, and its verdicts are
    those of grading it alone; a prepare on such a disk says `kept light`."""
    one = ["--suite", "demo", "--problem", "vector_add"]
    bundles = tmp_path / "entries"
    bundles.mkdir()
    create_bundle(REPO / "examples" / "triton", bundles / "triton.tar")
    create_bundle(REPO / "examples" / "torch-fallback", bundles / "fallback.tar")
    out = tmp_path / "r"
    with _small_disk(out / ".references", 48 << 10):
        res = _grader("round", str(bundles), "-o", str(out), *one)
        assert res.returncode == 0, res.stderr[-3000:]
        assert "kept for the round without its expected outputs" in res.stderr, res.stderr
        rd = RoundDir(out)
        [key] = [p.name for p in (out / ".references").iterdir()]
        meta = json.loads((out / ".references" / key / META).read_text())
        assert sorted(meta["light"]) == ["smoke_4099.0", "smoke_4099.1"]
        assert not list((out / ".references" / key).glob("*.ref"))
        first, later = rd.outcome("fallback"), rd.outcome("triton")
        assert first is not None and later is not None
        assert [u.computed for u in first.references] == [True]
        assert [u.computed for u in later.references] == [False]
        assert "reference on its 2 correctness cases" in res.stderr
        rep = rd.report("triton")
        assert rep is not None and rep.problems[0].phases_s["reference_outputs"] > 0
        # its reference container was started beside its entry, and waited at its gate
        assert "reference_outputs.gate" in rep.problems[0].phases_s, rep.problems[0].phases_s
        assert "cannot start its reference ahead" not in res.stderr
        secret = (out / "seed.secret").read_text().strip()
        res = _grader("run", str(bundles / "triton.tar"), "-o", str(tmp_path / "alone"),
                      *one[2:], "--seed-secret", secret)
        assert res.returncode == 0, res.stderr[-3000:]
        alone = Report.model_validate_json((tmp_path / "alone" / "report.json").read_bytes())
        assert _essence(rep) == _essence(alone)
        assert [p.verdict for p in rep.problems] == ["passed"]
    prepared = tmp_path / "p"
    with _small_disk(prepared / ".references", 48 << 10):
        said = _commit_and_prepare(prepared, *one)
        assert "references: 1 kept light" in said, said


def test_a_problems_next_batch_starts_its_reference_ahead(  # type: ignore[no-untyped-def]
        engine, runtime, tmp_path: Path) -> None:
    """A prepare's batches of one problem (rmsnorm's two smoke shapes, one a batch here): the
    second batch's reference container is started gated beside the first's and waits at its
    gate; both are kept whole, and its folder holds what a reference started in its turn
    writes."""
    suite = find_suite("demo", [PROBLEM_BUNDLES])
    cfg = GradingOptions(bundle=Path("-"), out_dir=tmp_path / "out")
    session = f"prep-{uuid.uuid4().hex[:8]}"
    setup = worker_setup(cfg, engine, session)
    said: list[str] = []
    prep = Preparation(suite=suite, settings=cfg.settings.for_suite(suite.info.seeds_per_shape),
                       narrowing=cfg.narrowing, reference_limits=cfg.reference_limits,
                       batch_bytes=1, secret=bytes(range(32)), runtime_tag=runtime.tag,
                       store=ReferenceCache(tmp_path / "refs", PREPARED_BY),
                       progress=lambda msg, *a, **k: said.append(msg))
    try:
        got = prepare_problem(prep, setup, suite.problems["rmsnorm"])
    finally:
        engine.reap(session)
    assert [(b.problem, b.status) for b in got] == [
        ("rmsnorm", "kept"), ("rmsnorm", "kept")], said
    phases = [json.loads((tmp_path / "refs" / b.key / "result.json").read_text())["phases_s"]
              for b in got]
    assert "gate" not in phases[0] and "gate" in phases[1], phases
    first, second = (sorted(p.name for p in (tmp_path / "refs" / b.key).iterdir()) for b in got)
    assert [n for n in first if n.endswith(".ref")] == ["smoke_8x256.0.ref", "smoke_8x256.1.ref"]
    assert [n for n in second if n.endswith(".ref")] == ["smoke_5x200.0.ref", "smoke_5x200.1.ref"]
    assert not any("cannot start its reference ahead" in m for m in said)
