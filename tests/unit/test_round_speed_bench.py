"""bench/round_speed.py without Docker: each entry's cost read from a round folder (a graded
entry from its report, one cut short from its checkpoint), the table, and the first and
later entries against the targets, and the per-shape spread of one folder graded twice."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from suite_checks import load_module

from grader.grading.checkpoint import CHECKPOINT_DIR, Finished, commitment
from grader.grading.grader import summarize
from grader.model.results import (
    Environment,
    ProblemResult,
    Report,
    ShapeResult,
    SubmissionSummary,
    SuiteSummary,
    Timing,
)
from grader.paths import REPO
from grader.report.render import write_reports
from grader.round.model import Manifest, ManifestEntry, Outcome, RefUse, Settings, SuiteRef
from grader.round.store import RoundDir
from grader.verdicts import Verdict

SECRET = bytes(32)


def _bench():  # type: ignore[no-untyped-def]
    return load_module(REPO / "bench" / "round_speed.py", "_test")


def _problem(pid: str, reference_s: float, median_us: float = 10.0) -> ProblemResult:
    timing = Timing(median_us=median_us, iqr_us=0.1, cv=0.01, samples=10, method="cuda-events",
                    loop_s=1.5)
    shape = ShapeResult(id="s", phase="decode", smoke=False, params={"n": 4},
                        verdict=Verdict.PASSED, timing=timing)
    return ProblemResult(id=pid, operator="op", verdict=Verdict.PASSED, shapes=[shape],
                         phases_s={"image": 0.5, "reference": reference_s,
                                   "reference.inputs": reference_s / 2, "entry": 8.0,
                                   "entry.prepare": 1.0, "entry.job_wait": 2.0,
                                   "entry.timing": 1.5, "entry.standby": 3.0,
                                   "entry_import": 0.2, "judge": 0.25})


def _round(tmp_path: Path, sources: tuple[str, ...] = ("first", "second", "cut", "waiting"),
           second_us: float = 10.0) -> RoundDir:
    rd = RoundDir(tmp_path / "r")
    names = ("first", "second", "cut", "waiting")
    manifest = Manifest(
        round_id="abc", created_at=datetime(2026, 1, 5, tzinfo=UTC), grader_version="0.1.0",
        suite=SuiteRef(id="demo", version="0.2.0", weights_version="0.1.0", digest="d" * 64),
        settings=Settings(policy="triton", device="cuda", runtime="host", hardware="auto",
                          shapes="auto"), seed_commitment=commitment(SECRET),
        entries=[ManifestEntry(name=n, source=src, bundle=f"bundles/{n}.tar", sha256="0" * 64)
                 for n, src in zip(names, sources, strict=True)])
    rd.create(manifest, SECRET)
    for name, ref_s, wall in (("first", 6.0, 250.0), ("second", 0.0, 150.0)):
        us = second_us if name == "second" else 10.0
        problems = [_problem("a", ref_s, us), _problem("b", ref_s, us)]
        rep = Report(created_at=datetime(2026, 1, 5, tzinfo=UTC),
                     submission=SubmissionSummary(name=name, suite="demo", dsl="triton",
                                                  bundle_sha256="0" * 64),
                     suite=SuiteSummary(id="demo", version="0.2.0", weights_version="0.1.0"),
                     environment=Environment(grader_version="0.1.0", hardware="h200",
                                             device="cuda: H200", is_performance=True,
                                             policy="triton",
                                             seed_commitment=commitment(SECRET)),
                     problems=problems, summary=summarize(problems))
        write_reports(rep, rd.entry_dir(name), ["json"])
        rd.save_outcome(Outcome(name=name, status="graded", wall_s=wall,
                                report_sha256=rd.report_sha256(name), references=[
                                    RefUse(problem=p, key=p * 64, cases=2,
                                           computed=name == "first") for p in "ab"]))
    done = rd.entry_dir("cut") / CHECKPOINT_DIR / "problems"
    done.mkdir(parents=True)
    (done / "a.json").write_text(Finished(result=_problem("a", 0.0)).to_json())
    (done / "b.json").write_text("{ half written")
    return rd


def test_costs_from_reports_and_a_checkpoint(tmp_path: Path) -> None:
    bench = _bench()
    costs = {c.name: c for c in bench.entry_costs(_round(tmp_path))}
    first, second, cut, waiting = (costs[n] for n in ("first", "second", "cut", "waiting"))
    assert (first.status, first.wall_s, first.problems, first.shapes) == ("graded", 250.0, 2, 2)
    assert (first.refs_computed, first.refs_reused, second.refs_reused) == (2, 0, 2)
    assert first.parts["ref_container"] == 12.0 and second.parts["ref_container"] == 0.0
    assert first.parts["timed"] == 3.0 and first.parts["entry_import"] == 6.0  # the standbys'
    # the entry container's 8 s less the harness's own count (prepare, wait, timing): 3.5 s
    assert first.parts["entry_start"] == 7.0
    assert (cut.status, cut.wall_s, cut.problems) == ("cut short", None, 1)
    assert (waiting.status, waiting.problems) == ("not started", 0)
    rows = bench.table(list(costs.values()))
    assert rows[0].startswith("| entry | status | wall s") and len(rows) == 6
    assert "| first | graded | 250.0 | 2 | 2 | 2/0 |" in rows[2]


def test_each_entrys_slowest_problems_with_their_verdicts(tmp_path: Path) -> None:
    """What an entry cut short had reached, and where a whole suite's time went."""
    bench = _bench()
    costs = {c.name: c for c in bench.entry_costs(_round(tmp_path))}
    assert costs["cut"].by_problem == [("a", 0.0, "passed")]
    assert costs["waiting"].by_problem == []
    slow = bench.EntryCost(name="later", status="cut short", wall_s=None, by_problem=[
        ("block_scaled_mm", 221.1, "passed"), ("rms_norm", 9.3, "passed"),
        ("fp8_moe", 29.9, "infra_error")])
    slow.by_problem.sort(key=lambda row: -row[1])
    lines = bench.slowest_lines([slow, costs["waiting"]], most=2)
    assert lines == ["later: slowest of 3 problems: block_scaled_mm 221.1 s (passed), "
                     "fp8_moe 29.9 s (infra_error)"]


def test_targets_are_judged_only_for_the_whole_suite_on_a_gpu(tmp_path: Path) -> None:
    bench = _bench()
    costs = bench.entry_costs(_round(tmp_path))
    lines = bench.summary(costs, whole_suite_on_gpu=True)
    assert "first entry (first): 250.0 s" in lines
    assert "one GPU, N entries: about 250.0 + (N - 1) x 150.0 s" in lines
    assert "target first <= 300 s: met" in lines and "target later <= 180 s: met" in lines
    assert "not judged" in bench.summary(costs, whole_suite_on_gpu=False)[-1]
    assert bench.summary([], whole_suite_on_gpu=True) == [
        "no entry finished: nothing to compare with the targets"]
    # all of Atrex-Bench (issue 32): a target for later entries only
    atrex = bench.summary(costs, whole_suite_on_gpu=True, suite="atrex-bench")
    assert "target later <= 600 s: met" in atrex
    assert not any(line.startswith("target first") for line in atrex)


def test_the_spread_of_one_folder_graded_twice(tmp_path: Path) -> None:
    bench = _bench()
    assert bench.spreads(_round(tmp_path / "distinct")) == []  # no folder graded twice
    # the same folder as "first" (10 µs) and "second" (12 µs); "cut" is another folder
    rd = _round(tmp_path / "same", sources=("dir", "dir", "cut", "waiting"), second_us=12.0)
    (spread,) = bench.spreads(rd)
    assert (spread.source, spread.gradings, spread.shapes) == ("dir", 2, 2)
    assert abs(spread.median_cv - 2 ** 0.5 / 11) < 1e-12  # stdev of (10, 12) over 11
    assert spread.max_cv == spread.median_cv and spread.worst[0][2] == [10.0, 12.0]
    assert "2 shapes, median 12.86%" in bench.spread_lines([spread])[0]


def test_after_a_prepare_every_entry_is_a_later_one(tmp_path: Path) -> None:
    """With the references prepared before the round (--prepare), no entry computed any: all
    are measured against the later entries' target, and the cost model starts from the
    prepare's time."""
    bench = _bench()
    costs = bench.entry_costs(_round(tmp_path))
    prepare = bench.Prepare(wall_s=90.0, exit=0, batches={"kept": 3}, bytes={"kept": 25 * 10**8},
                            by_problem_s={"a": 60.0, "b": 30.0},
                            not_kept=["c: not kept: past its problem's share"])
    lines = bench.summary(costs, whole_suite_on_gpu=True, prepare=prepare)
    assert lines[0] == "references prepared before the entries: 90.0 s"
    assert not any(line.startswith(("first entry", "target first")) for line in lines)
    assert "later entries (2): median 200.0 s, max 250.0 s" in lines
    assert "one GPU, N entries: about 90.0 + N x 200.0 s" in lines
    assert "target later <= 180 s: NOT met" in lines
    line = bench.prepare_line(prepare)
    assert line.startswith("prepare: 90.0 s (exit 0); batches: 3 kept (2.5 GB); slowest: a 60.0 s, "
                           "b 30.0 s")
    assert line.endswith("\n  c: not kept: past its problem's share")
