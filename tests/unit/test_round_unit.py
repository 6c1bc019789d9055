"""`grader round` without Docker: entry names, the leaderboard (ranks, ties, refused and
failed entries), its renderings fed hostile text, resuming, the reference cache's files, and
`grader round verify` catching each kind of tampering with a round folder."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from grader.errors import EXIT_CODES, RoundMismatch
from grader.grading.checkpoint import commitment
from grader.grading.grader import summarize
from grader.grading.reuse import batch_key
from grader.grading.settings import GradingSettings
from grader.model.results import (
    Environment,
    ProblemResult,
    Report,
    ShapeResult,
    SubmissionSummary,
    SuiteSummary,
)
from grader.model.runs import Case
from grader.paths import PROBLEM_BUNDLES, REPO
from grader.report.render import write_reports
from grader.round.board import build_board
from grader.round.conduct import finish, pending
from grader.round.entries import find_entries, safe_name, sha256_file
from grader.round.model import (
    PREPARED_BY,
    Manifest,
    ManifestEntry,
    Outcome,
    Prepared,
    PreparedRef,
    RefUse,
    Settings,
    SuiteRef,
)
from grader.round.refcache import META, ReferenceCache, host_reserve
from grader.round.render import board_html, board_markdown
from grader.round.request import suite_digest
from grader.round.store import RoundDir
from grader.round.verify import require, verify_round
from grader.sandbox import capped
from grader.suite.load import find_suite
from grader.verdicts import Verdict, worst

SECRET = bytes(range(32))
PWN = "<script>document.title='PWNED'</script><img src=x onerror=alert(1)>"
# The checkout's demo suite: verify_round finds it by id (grader/suite/roots.py).
SUITE = SuiteRef(id="demo", version="0.2.0", weights_version="0.1.0",
                 digest=suite_digest(find_suite("demo", [PROBLEM_BUNDLES])))
SETTINGS = Settings(policy="triton", device="cpu", runtime="cpu", hardware="auto",
                    shapes="auto", problems=("vector_add",))


def _report(name: str, verdicts: list[Verdict], sha: str) -> Report:
    shapes = [ShapeResult(id=f"s{i}", phase="decode", smoke=True, params={"n": 4},
                          verdict=v, detail="d") for i, v in enumerate(verdicts)]
    problems = [ProblemResult(id="vector_add", operator="add", verdict=worst(verdicts),
                              shapes=shapes)]
    return Report(
        created_at=datetime(2026, 1, 5, tzinfo=UTC),
        submission=SubmissionSummary(name=name, suite="demo", dsl="triton", bundle_sha256=sha),
        suite=SuiteSummary(id="demo", version="0.2.0", weights_version="0.1.0"),
        environment=Environment(grader_version="0.1.0", hardware="cpu-interpreter",
                                device="cpu", is_performance=False, policy="triton",
                                seed_commitment=commitment(SECRET)),
        problems=problems, summary=summarize(problems))


def _round(tmp_path: Path) -> tuple[RoundDir, Manifest]:
    """A round folder as `grader round` leaves it: two tied entries, a fallback one, one
    refused at intake and one whose grading failed."""
    rd = RoundDir(tmp_path / "round")
    rd.bundles.mkdir(parents=True)
    entries, graded = [], {"a": [Verdict.PASSED], "b": [Verdict.PASSED],
                           "c": [Verdict.FALLBACK], "f": []}
    for name in graded:
        (rd.bundles / f"{name}.tar").write_bytes(name.encode() * 100)
        entries.append(ManifestEntry(name=name, source=f"/src/{name}", bundle=f"bundles/{name}.tar",
                                     sha256=sha256_file(rd.bundles / f"{name}.tar"),
                                     declared_name=PWN if name == "c" else name))
    entries.append(ManifestEntry(name="r", source="/src/r", refused=f"unreadable {PWN}",
                                 renamed_from="r r"))
    manifest = Manifest(round_id="abc", created_at=datetime(2026, 1, 5, tzinfo=UTC),
                        grader_version="0.1.0", suite=SUITE, settings=SETTINGS,
                        seed_commitment=commitment(SECRET), entries=entries)
    rd.create(manifest, SECRET)
    for i, (name, verdicts) in enumerate(graded.items()):
        if not verdicts:
            rd.save_outcome(Outcome(name=name, status="failed", error="engine down"))
            continue
        e = entries[i]
        assert e.sha256 is not None
        write_reports(_report(name, verdicts, e.sha256), rd.entry_dir(name), ["json"])
        rd.save_outcome(Outcome(name=name, status="graded", report_sha256=rd.report_sha256(name),
                                references=[RefUse(problem="vector_add", key="k" * 64, cases=2,
                                                   computed=name == "a")]))
    finish(rd, manifest)
    return rd, manifest


def test_entry_names_are_safe_and_unique(tmp_path: Path) -> None:
    for d in ("one", "two"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "team.tar").write_bytes(b"x")
    (tmp_path / "one" / "x y<z>.tar").write_bytes(b"x")
    (tmp_path / "one" / "notes.txt").write_text("not an entry")
    found = find_entries([tmp_path / "one", tmp_path / "two" / "team.tar"])
    assert [f.name for f in found] == ["team", "x-y-z", "team-2"]
    assert [f.renamed_from for f in found] == [None, "x y<z>", "team"]
    assert safe_name("../..") == "entry" and safe_name("a" * 200) == "a" * 64


def test_board_ranks_ties_and_lists_the_entries_not_graded(tmp_path: Path) -> None:
    rd, _ = _round(tmp_path)
    board = json.loads((rd.root / "leaderboard.json").read_text())
    rows = [(r["rank"], r["entry"], r["status"]) for r in board["rows"]]
    assert rows == [(1, "a", "graded"), (1, "b", "graded"), (3, "c", "graded"),
                    (None, "f", "failed"), (None, "r", "refused")]
    assert board["ties"] == [["a", "b"]]
    assert board["rows"][2]["verdicts"] == {"fallback": 1}
    assert board["rows"][0]["problems"] == {"vector_add": None}  # these reports are unscored
    [ref] = board["references"]
    assert ref["computed_by"] == ["a"] and ref["reused_by"] == 2
    assert any("renamed from 'r r'" in n for n in board["notes"])


def test_renderings_keep_hostile_entry_text_inert(tmp_path: Path) -> None:
    rd, manifest = _round(tmp_path)
    page = (rd.root / "leaderboard.html").read_text()
    assert "<script" not in page.lower() and "<img" not in page.lower()
    assert "&lt;script&gt;" in page and "Content-Security-Policy" in page
    md = (rd.root / "leaderboard.md").read_text()
    assert "<script" not in md and "<img" not in md
    board = build_board(manifest, {}, {})  # nothing graded yet: every entry listed, unranked
    assert all(r.rank is None for r in board.rows)
    assert "not graded yet" in board_markdown(board) and "<script" not in board_html(board)


def test_verify_accepts_the_round_and_names_each_tampering(tmp_path: Path) -> None:
    rd, _ = _round(tmp_path)
    got = verify_round(rd.root, suite_roots=[])
    assert not got.wrong, got.wrong
    assert "suite digest matches" in got.ok  # the checkout's, found by the manifest's id
    require(got)
    # A report edited after grading, a bundle swapped, a leaderboard reordered, a wrong secret.
    rep = rd.report_file("c")
    rep.write_text(rep.read_text().replace('"fallback"', '"passed"'))
    (rd.bundles / "b.tar").write_bytes(b"another bundle")
    board = json.loads((rd.root / "leaderboard.json").read_text())
    board["rows"][0]["rank"], board["rows"][2]["rank"] = 3, 1
    (rd.root / "leaderboard.json").write_text(json.dumps(board))
    got = verify_round(rd.root, suite_roots=[], secret_hex=bytes(32).hex())
    text = "\n".join(got.wrong)
    for expected in ("c: report.json", "b: bundle sha256", "leaderboard.json differs",
                     "seed secret does not match"):
        assert expected in text, text
    with pytest.raises(RoundMismatch):
        require(got)


def test_resume_grades_only_what_is_not_done(tmp_path: Path) -> None:
    rd, manifest = _round(tmp_path)
    assert [e.name for e in pending(manifest, rd)] == ["f"]  # failed: the grader's failure
    rd.report_file("b").write_text("{ truncated")
    (rd.outcomes / "c.json").unlink()
    assert [e.name for e in pending(manifest, rd)] == ["b", "c", "f"]


def _key(seed: int = 7) -> str:
    """A batch's key as a worker makes it (grading.reuse.batch_key), for one case."""
    shape = SimpleNamespace(id="s", params={"n": 4})
    case = Case(id="s.0", shape=shape, seed=seed)  # type: ignore[arg-type]
    suite = SimpleNamespace(id="demo", info=SimpleNamespace(version="0.2.0"))
    return batch_key(suite, "vector_add", "img:1", [case],  # type: ignore[arg-type]
                     SimpleNamespace(device="cpu", timing=None), "cpu")  # type: ignore[arg-type]


def test_reference_cache_keeps_a_whole_folder_once(tmp_path: Path) -> None:
    ref = tmp_path / "ref"
    ref.mkdir()
    (ref / "s.0.ref").write_bytes(b"ref")
    (ref / ".recipe.tar").write_bytes(b"tar")
    (ref / "result.json").write_text("{}")
    os.symlink("/etc/passwd", ref / "link.ref")  # never copied: regular files only
    cache = ReferenceCache(tmp_path / "cache", "first")
    key = _key()
    assert cache.folder(key) is None
    cache.keep(key, ref, problem="vector_add", cases=["s.0"])
    kept = cache.folder(key)
    assert kept is not None
    assert sorted(p.name for p in kept.iterdir()) == [".recipe.tar", "meta.json", "result.json",
                                                       "s.0.ref"]
    assert (tmp_path / "cache").stat().st_mode & 0o077 == 0
    (ref / "s.0.ref").write_bytes(b"changed")
    cache.for_entry("second").keep(key, ref, problem="vector_add", cases=["s.0"])
    assert (kept / "s.0.ref").read_bytes() == b"ref"  # the first one stays
    assert json.loads((kept / "meta.json").read_text())["computed_by"] == "first"
    cache.reused(key, problem="vector_add", cases=1)
    assert [u.computed for u in cache.uses] == [True, False]
    assert _key(seed=8) != key  # another seed: another key
    assert not any(p.name.startswith(".part") for p in (tmp_path / "cache").iterdir())


@pytest.mark.skipif(not capped.can_mount(), reason="needs root to mount a tmpfs")
def test_a_reference_too_large_for_the_cache_is_not_kept_and_costs_nothing(
        tmp_path: Path) -> None:
    """A reference folder larger than the cache's free room is refused before a byte is
    copied (ENOSPC, for the worker to say): the round loses that batch's reuse, nothing
    else."""
    ref = tmp_path / "ref"
    ref.mkdir()
    (ref / "s.0.ref").write_bytes(b"\0" * (3 << 20))
    with capped.capped_dir(1 << 20, owner=os.getuid()) as small:
        cache = ReferenceCache(small / "cache", "first")
        with pytest.raises(OSError, match="3145728 bytes to keep"):
            cache.keep(_key(), ref, problem="vector_add", cases=["s.0"])
        assert cache.folder(_key()) is None
        assert [p.name for p in (small / "cache").iterdir()] == []


def test_the_host_keeps_a_tenth_of_a_small_disk_and_8_gib_of_a_large_one() -> None:
    assert host_reserve(20 << 30) == 2 << 30
    assert host_reserve(252 * 10**9) == 8 << 30  # the GPU host's: not 25 GB


@pytest.mark.skipif(not capped.can_mount(), reason="needs root to mount a tmpfs")
def test_a_keep_leaves_a_tenth_of_the_disk_to_the_host(tmp_path: Path) -> None:
    """A folder that would fit the free room but eat into the host's share (RESERVE of the
    file system: reports, checkpoints and images live there) is refused too; one that leaves
    it is kept."""
    ref = tmp_path / "ref"
    ref.mkdir()
    with capped.capped_dir(10 << 20, owner=os.getuid()) as disk:
        cache = ReferenceCache(disk / "cache", "first")
        # 9.5 MiB: within the free room, not within it less the host's tenth
        (ref / "s.0.ref").write_bytes(b"\0" * (9 << 20 | 512 << 10))
        with pytest.raises(OSError, match="left to the host"):
            cache.keep(_key(), ref, problem="vector_add", cases=["s.0"])
        assert cache.folder(_key()) is None
        (ref / "s.0.ref").write_bytes(b"\0" * (4 << 20))  # within its problem's share too
        cache.keep(_key(), ref, problem="vector_add", cases=["s.0"])
        assert cache.folder(_key()) is not None


@pytest.mark.skipif(not capped.can_mount(), reason="needs root to mount a tmpfs")
def test_a_problem_keeps_at_most_its_share_of_the_room(tmp_path: Path) -> None:
    """A problem's kept folders take at most PROBLEM_SHARE of the room left when its first
    batch came, by their own sizes: its batches past that are computed again, and the
    problems after it still have room; each entry decides for the batches it computes."""
    ref = tmp_path / "ref"
    ref.mkdir()
    (ref / "s.0.ref").write_bytes(b"\0" * (1 << 20))
    with capped.capped_dir(10 << 20, owner=os.getuid()) as disk:  # room: 9 MiB
        cache = ReferenceCache(disk / "cache", "first")
        for k in "abcd":  # 4 MiB of its 4.5
            cache.keep(k * 64, ref, problem="big", cases=["s.0"])
        with pytest.raises(OSError, match=r"past its problem's share of the room \(4194304 of"):
            cache.keep("e" * 64, ref, problem="big", cases=["s.0"])
        for k in "fg":  # 5 MiB of room left: 2.5 MiB for the next problem
            cache.keep(k * 64, ref, problem="small", cases=["s.0"])
        with pytest.raises(OSError, match="left to the problems after it"):
            cache.keep("h" * 64, ref, problem="small", cases=["s.0"])
        assert [cache.folder(k * 64) is not None for k in "abcdefgh"] == [True] * 4 + [
            False, True, True, False]
        later = cache.for_entry("second")  # 3 MiB of room now: 1.5 MiB for "big"
        later.keep("e" * 64, ref, problem="big", cases=["s.0"])
        assert later.folder("e" * 64) is not None
        later.keep("a" * 64, ref, problem="big", cases=["s.0"])  # kept already: nothing new
        with pytest.raises(OSError, match="past its problem's share"):
            later.keep("i" * 64, ref, problem="big", cases=["s.0"])
        (disk / "filler").write_bytes(b"\0" * (2 << 20))  # no room left: the disk says so
        with pytest.raises(OSError, match="left to the host"):
            later.keep("j" * 64, ref, problem="other", cases=["s.0"])


@pytest.mark.skipif(not capped.can_mount(), reason="needs root to mount a tmpfs")
def test_a_keep_that_fails_gives_its_share_back(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder whose copy fails counts nothing against its problem's share: the next batch
    of that problem is kept as if it had not been tried, and nothing half-copied stays."""
    from grader.round import refcache

    ref = tmp_path / "ref"
    ref.mkdir()
    (ref / "s.0.ref").write_bytes(b"\0" * (3 << 20))
    real_copy = refcache.tensors.copy_file

    def failing(src: Path, dst: Path) -> None:
        real_copy(src, dst)
        raise OSError(errno.EIO, "input/output error")

    with capped.capped_dir(10 << 20, owner=os.getuid()) as disk:  # room 9 MiB: 4.5 a problem
        cache = ReferenceCache(disk / "cache", "first")
        monkeypatch.setattr(refcache.tensors, "copy_file", failing)
        with pytest.raises(OSError, match="input/output error"):
            cache.keep("a" * 64, ref, problem="p", cases=["s.0"])
        monkeypatch.setattr(refcache.tensors, "copy_file", real_copy)
        cache.keep("b" * 64, ref, problem="p", cases=["s.0"])  # 3 MiB: within 4.5 again
        assert cache.folder("a" * 64) is None and cache.folder("b" * 64) is not None
        assert [p.name for p in (disk / "cache").iterdir()] == ["b" * 64]


def test_cli_has_round_and_verify() -> None:
    res = subprocess.run([sys.executable, "-m", "grader", "round", "--help"],
                         capture_output=True, text=True, cwd=REPO, check=False)
    assert res.returncode == 0 and "verify" in res.stdout and "grade" in res.stdout
    res = subprocess.run([sys.executable, "-m", "grader", "round", "verify", str(REPO / "docs")],
                         capture_output=True, text=True, cwd=REPO, check=False)
    assert res.returncode == EXIT_CODES["UsageError"], res.stderr
    assert "no round in it" in res.stderr
    res = subprocess.run([sys.executable, "-m", "grader", "round", "--suite", "demo", "-o",
                          str(REPO / "build" / "nowhere")],
                         capture_output=True, text=True, cwd=REPO, check=False)
    assert res.returncode == EXIT_CODES["UsageError"] and "no entries" in res.stderr


def test_round_grading_options_reach_every_entry_s_run(tmp_path: Path) -> None:
    """`grader round grade`'s speed knobs are `grader run`'s, carried in the round's grading
    (to each entry, on this host or a Ray node); how the round is shown is staged beside it
    (issue 33), apart from what the round grades and commits to."""
    from dataclasses import fields

    import click

    from grader.cli.round import _staged, grade
    from grader.round.request import RoundPresentation, RoundRequest

    with click.Context(grade):
        req, show = _staged(paths=(), suite="demo", out_dir=tmp_path, suite_roots=(),
                            policy="triton", device="cpu", runtime="cpu", python=None,
                            cuda_base=None, hardware="auto", shapes="auto", problems=(),
                            seeds=None, timeout=None, seed_secret=None, gpus="0", jobs=1,
                            no_shared_references=False, start_ahead="on", ahead_depth=4,
                            time_beside="on", ray="auto", formats="md,html",
                            quiet=True, log_format="json")
    sched = req.run.scheduling
    assert sched.start_ahead == "on" and sched.ahead_depth == 4 and sched.ray == "auto"
    assert sched.time_beside == "on" and sched.beside(1, cores=2)
    assert req.run.settings == GradingSettings()  # the one settings type, as `grader run`'s
    assert show == RoundPresentation(formats=("md", "html"), quiet=True, log_format="json")
    assert show.entry_formats == ("json", "md", "html")
    assert not {f.name for f in fields(RoundRequest)} & {f.name for f in fields(show)}


def test_broken_and_foreign_bundles_are_refused_not_fatal(tmp_path: Path) -> None:
    from grader.intake.tools import create_bundle
    from grader.round.entries import Found, stage

    (tmp_path / "junk.tar").write_bytes(b"\x00not a tar" * 100)
    create_bundle(REPO / "examples" / "triton", tmp_path / "ok.tar")
    out = tmp_path / "bundles"
    out.mkdir()
    junk = stage(Found(name="junk", source=tmp_path / "junk.tar"), out, "demo")
    assert junk.bundle is None and junk.error
    foreign = stage(Found(name="ok", source=tmp_path / "ok.tar"), out, "llm-inference")
    assert foreign.bundle is None and "not 'llm-inference'" in (foreign.error or "")
    good = stage(Found(name="ok", source=tmp_path / "ok.tar"), out, "demo")
    assert good.error is None and good.sha256 == sha256_file(out / "ok.tar")
    assert good.declared_name == "triton-example"


def test_on_several_gpus_the_first_entry_takes_all_and_the_rest_one_each(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first entry fills the reference cache with its problems spread over every GPU;
    the others are graded side by side, one GPU each (grade_entry faked: no Docker here)."""
    import threading

    from grader.grading.config import GradingOptions, Scheduling
    from grader.grading.progress import Progress
    from grader.round import conduct
    from grader.round.entry import EntryResult
    from grader.round.request import RoundPresentation

    seen: list[tuple[str, tuple[int, ...]]] = []
    lock = threading.Lock()

    def fake(name: str, req: GradingOptions, cache: Path | None, progress: object) -> EntryResult:
        with lock:
            seen.append((name, req.scheduling.gpus))
        assert cache == rd.references and req.seed_secret == SECRET.hex()
        return EntryResult(report=None, outcome=Outcome(name=name, status="failed", error="fake"))

    monkeypatch.setattr(conduct, "grade_entry", fake)
    rd = RoundDir(tmp_path / "r")
    rd.outcomes.mkdir(parents=True)
    todo = [ManifestEntry(name=n, source=n, bundle=f"bundles/{n}.tar", sha256="0" * 64)
            for n in ("a", "b", "c", "d")]
    req = conduct.RoundRequest(paths=(), suite="demo", out_dir=rd.root, run=GradingOptions(
        bundle=Path("-"), out_dir=rd.root, settings=GradingSettings(device="cuda", runtime="host"),
        scheduling=Scheduling(gpus=(0, 1, 2))))
    conduct.grade_here(req, RoundPresentation(), rd, todo, SECRET, Progress())
    assert seen[0] == ("a", (0, 1, 2))
    assert sorted(n for n, _ in seen[1:]) == ["b", "c", "d"]
    assert all(len(g) == 1 and g[0] in (0, 1, 2) for _, g in seen[1:])
    assert sorted(p.stem for p in rd.outcomes.iterdir()) == ["a", "b", "c", "d"]


def test_a_reference_the_host_cannot_keep_is_said_and_the_batch_goes_on(tmp_path: Path) -> None:
    """The worker asks the round's store to keep a batch's reference; when the host cannot
    (ENOSPC), the progress says so and the grading goes on: only the reuse is lost."""
    from grader.grading.reuse import RoundReferences

    class Full:
        def folder(self, key: str) -> Path | None:
            return None

        def light(self, key: str) -> dict[str, int]:
            return {}

        def keep(self, key: str, ref_dir: Path, *, problem: str, cases: list[str],
                 outputs: list[str]) -> str:
            asked.append(problem)
            raise OSError(errno.ENOSPC, "No space left on device")

        def reused(self, key: str, *, problem: str, cases: int) -> None:
            raise AssertionError("nothing was reused")

    said: list[str] = []
    asked: list[int] = []
    problem = find_suite("demo", [PROBLEM_BUNDLES]).problems["vector_add"].problem
    shape = problem.shapes[0]
    case = Case(id=f"{shape.id}.0", shape=shape, seed=7)
    suite = SimpleNamespace(id="demo", info=SimpleNamespace(version="0.2.0"))
    refs = RoundReferences(Full(), suite, SimpleNamespace(device="cpu", timing=None),  # type: ignore[arg-type]
                           GradingSettings().runtime, said.append)
    plan = SimpleNamespace(sp=SimpleNamespace(id="vector_add", problem=problem), image="img:1",
                           part_cases=lambda k: [case], label=lambda k: "vector_add",
                           parts=[[shape], [shape]], per_shape={shape.id: 2})
    assert refs.folder(plan, 0, reuse=True) is None  # type: ignore[arg-type]
    refs.keep(plan, 0, tmp_path)  # type: ignore[arg-type]
    assert said == ["vector_add: cannot keep its reference for the round: "
                    "[Errno 28] No space left on device"]
    assert asked == ["vector_add"]


def test_board_names_the_prepare_as_the_computer_of_what_it_kept(tmp_path: Path) -> None:
    """References computed before the entries (`grader round prepare`) are listed as the
    prepare's; only those it kept: a batch it found kept, or could not keep, was not its."""
    rd, manifest = _round(tmp_path)
    outcomes = {e.name: o for e in manifest.entries if (o := rd.outcome(e.name))}
    reports = {n: r for n in outcomes if (r := rd.report(n))}
    batch = {"problem": "vector_add", "cases": 2}
    prepared = Prepared(created_at=datetime(2026, 1, 5, tzinfo=UTC), grader_version="0.1.0",
                        wall_s=3.0, batches=[
                            PreparedRef(key="p" * 64, status="kept", **batch),
                            PreparedRef(key="k" * 64, status="kept already", **batch),
                            PreparedRef(key="n" * 64, status="not kept", **batch)])
    board = build_board(manifest, outcomes, reports, prepared=prepared)
    assert [(r.key[0], r.computed_by, r.reused_by) for r in board.references] == [
        ("k", ["a"], 2), ("p", [PREPARED_BY], 0)]
    rd.save_prepared(prepared)
    assert rd.prepared() == prepared
    rd.prepared_file.write_text("{not json")
    assert rd.prepared() is None  # the board then lists what the entries computed


@pytest.mark.skipif(not capped.can_mount(), reason="needs root to mount a tmpfs")
def test_a_folder_past_the_room_is_kept_light_without_its_outputs(tmp_path: Path) -> None:
    """A batch's folder past its problem's share is kept without its correctness cases'
    expected outputs when those are named (its result, recipe and checked calls' samples
    stay), and the folder says what it lacks; one with nothing to leave out is refused as
    before, and one that fits is kept whole."""
    ref = tmp_path / "ref"
    ref.mkdir()
    (ref / "s.0.ref").write_bytes(b"\0" * (6 << 20))  # the correctness case's outputs
    (ref / "s.t0.ref").write_bytes(b"\1" * 1024)  # a checked timed call's samples
    (ref / "result.json").write_text("{}")
    with capped.capped_dir(10 << 20, owner=os.getuid()) as disk:  # room 9 MiB, share 4.5
        cache = ReferenceCache(disk / "cache", "first")
        kind = cache.keep(_key(), ref, problem="vector_add", cases=["s.0", "s.t0"],
                          outputs=["s.0"])
        folder = cache.folder(_key())
        assert kind == "light" and folder is not None
        assert sorted(p.name for p in folder.iterdir()) == [META, "result.json", "s.t0.ref"]
        assert cache.light(_key()) == {"s.0": 6 << 20}
        with pytest.raises(OSError, match="past its problem's share"):
            cache.keep(_key(8), ref, problem="vector_add", cases=["s.0"])
        assert cache.folder(_key(8)) is None
        (ref / "s.0.ref").write_bytes(b"\0" * 1024)
        assert cache.keep(_key(9), ref, problem="rmsnorm", cases=["s.0"],
                          outputs=["s.0"]) == "whole"
        assert cache.light(_key(9)) == {}
        assert [u.computed for u in cache.uses] == [True, True, True]
