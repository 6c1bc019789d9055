"""One way to point at a suite (issue 34, friction 1): an id or a folder, --suites (a folder
of suites or one suite's own), $GRADER_SUITES, the round remembering its own, and an error of
the round's options that is never the host's failure. No Docker."""

from __future__ import annotations

import io
import os
import shutil
import tarfile
from pathlib import Path

import pytest

from grader.errors import ProblemError, UsageError
from grader.grading import factory
from grader.grading.checkpoint import commitment
from grader.grading.config import GradingOptions, Presentation, RunOptions
from grader.grading.grader import Grader
from grader.grading.runner import grade_bundle
from grader.intake.packing import packed
from grader.intake.tools import create_bundle
from grader.paths import PROBLEM_BUNDLES, REPO
from grader.round import entry as round_entry
from grader.round.model import Manifest, ManifestEntry, SuiteRef
from grader.round.reproduce import VerifyRequest, find_bundle
from grader.round.store import RoundDir
from grader.round.suite import entries_suite, round_suite
from grader.suite.load import find_suite
from grader.suite.roots import ENV, suite_roots

EXAMPLE = REPO / "examples" / "triton"


def _own_suite(tmp_path: Path, name: str = "mine") -> Path:
    """A copy of the demo suite under an id of its own, in a folder of the user's."""
    home = tmp_path / "suites" / name
    shutil.copytree(PROBLEM_BUNDLES / "demo", home)
    toml = home / "suite.toml"
    toml.write_text(toml.read_text().replace('id = "demo"', f'id = "{name}"'))
    return home


def _submission(tmp_path: Path, suite: str) -> Path:
    folder = tmp_path / f"entry-{suite}"
    shutil.copytree(EXAMPLE, folder)
    manifest = folder / "submission.toml"
    manifest.write_text(manifest.read_text().replace('suite = "demo"', f'suite = "{suite}"'))
    return folder


def test_roots_in_order_suite_folder_suites_env_then_the_checkout(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = _own_suite(tmp_path)
    other, env_a, env_b = tmp_path / "other", tmp_path / "env-a", tmp_path / "env-b"
    monkeypatch.setenv(ENV, f"{env_a}{os.pathsep}{env_b}")
    got = suite_roots((other, home), suite=str(home))
    # a suite's own folder given as --suites stands for its parent: not listed twice
    assert got == (home.parent.resolve(), other, env_a, env_b, PROBLEM_BUNDLES)
    monkeypatch.delenv(ENV)
    assert suite_roots() == (PROBLEM_BUNDLES,)


def test_every_run_config_looks_where_grader_suites_says(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = _own_suite(tmp_path)
    monkeypatch.setenv(ENV, str(home.parent))
    cfg = GradingOptions(bundle=Path("b.tar"), out_dir=tmp_path)
    assert find_suite("mine", list(cfg.suite_roots)).directory == home
    assert find_suite("demo", list(cfg.suite_roots)).directory == PROBLEM_BUNDLES / "demo"


def test_a_suite_not_found_names_both_ways_to_point_at_it() -> None:
    with pytest.raises(ProblemError) as err:
        find_suite("nowhere", list(suite_roots()))
    assert "--suites" in (err.value.hint or "") and ENV in (err.value.hint or "")


def test_a_bundle_with_a_suite_folder_is_checked_against_the_suite_it_names(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = _own_suite(tmp_path)
    bundle = tmp_path / "mine.tar"
    create_bundle(_submission(tmp_path, "mine"), bundle)
    with packed(bundle, problems=(), suite=str(home)) as got:  # `grader run B --suite DIR`
        assert got == bundle
    # `grader run FOLDER --suite DIR`: checked on the bundle the run opens, before grading
    # (no engine: the refusal comes before any container).
    monkeypatch.setattr(factory, "get_engine", object)
    monkeypatch.setattr(Grader, "reap_dead", lambda self: None)
    monkeypatch.setattr(Grader, "reap", lambda self: None)
    with pytest.raises(UsageError, match="a submission for suite 'demo', not 'mine'"):
        grade_bundle(RunOptions(grading=GradingOptions(bundle=EXAMPLE, out_dir=tmp_path / "out"),
                                presentation=Presentation(quiet=True), suite=str(home)))


def test_a_round_finds_its_suite_from_its_entries_or_from_what_it_recorded(
        tmp_path: Path) -> None:
    home = _own_suite(tmp_path)
    entry = _submission(tmp_path, "mine")
    rd = RoundDir(tmp_path / "round")
    # `grader round A B` without --suite: the one suite every entry names.
    assert round_suite(rd, None, (home.parent,), (entry,)).directory == home
    assert entries_suite((entry,)) == "mine"
    with pytest.raises(UsageError, match="the entries name 2: demo, mine"):
        entries_suite((entry, EXAMPLE))
    # `grader round commit --suite DIR`, then `grader round A B` with no --suite nor --suites:
    # the round's folder says where its suite is.
    rd.save_suite(home)
    manifest = Manifest(round_id="r", created_at="2026-12-04T00:00:00Z", grader_version="0",
                        suite=SuiteRef(id="mine", version="1", weights_version="1",
                                       digest="d" * 64),
                        settings={"policy": "triton", "device": "cpu", "runtime": "cpu",
                                  "hardware": "auto", "shapes": "auto"},
                        seed_commitment=commitment(b"s"), entries=[])
    rd.create(manifest, b"s")
    assert round_suite(rd, None, (), ()).directory == home
    # The folder gone (the round copied to another host): found by id under the roots.
    shutil.move(home, tmp_path / "moved" / "mine")
    assert round_suite(rd, None, (tmp_path / "moved",), ()).id == "mine"
    with pytest.raises(ProblemError, match="suite 'mine' not found"):
        round_suite(rd, None, (), ())


def test_an_error_of_the_round_s_options_is_never_the_host_s_failure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 34: an unfound suite was recorded as each entry's `failed` outcome, then
    "2 entries not graded (the grader's failure)", exit 30, "hint: fix the host"."""
    def unfound(*_: object) -> None:
        raise ProblemError("suite 'mine' not found")

    monkeypatch.setattr(round_entry, "run_grader", unfound)
    cfg = GradingOptions(bundle=tmp_path / "b.tar", out_dir=tmp_path / "out")
    with pytest.raises(ProblemError, match="not found"):
        round_entry.grade_entry("a", cfg, None, print)

    def engine_gone(*_: object) -> None:
        raise OSError("the engine went away")

    monkeypatch.setattr(round_entry, "run_grader", engine_gone)
    got = round_entry.grade_entry("a", cfg, None, print)
    assert got.outcome.status == "failed" and "engine went away" in (got.outcome.error or "")


def _retar(src: Path, dest: Path) -> None:
    """The same files as `src`, in a tar of other bytes (members in another order)."""
    with tarfile.open(src) as tin, tarfile.open(dest, "w") as tout:
        members = [(m, tin.extractfile(m)) for m in tin.getmembers()]
        for m, f in reversed(members):
            m.mtime = 12345
            tout.addfile(m, io.BytesIO(f.read()) if f else None)


def test_verify_accepts_the_bundle_the_participant_submitted(tmp_path: Path) -> None:
    """Issue 34, friction 8: `grader verify REPORT --bundle B` refused the bundle a round
    had graded its own copy of; a folder, or a tar holding the same files, is accepted and
    the round's copy is graded again. Another bundle is still refused."""
    from grader.model.results import Environment, Report, SubmissionSummary, SuiteSummary, Summary
    from grader.round.entries import sha256_file

    rd = RoundDir(tmp_path / "round")
    rd.bundles.mkdir(parents=True)
    copy = rd.bundles / "a.tar"
    create_bundle(EXAMPLE, copy)
    rd.create(Manifest(round_id="r", created_at="2026-12-04T00:00:00Z", grader_version="0",
                       suite=SuiteRef(id="demo", version="1", weights_version="1",
                                      digest="d" * 64),
                       settings={"policy": "triton", "device": "cpu", "runtime": "cpu",
                                 "hardware": "auto", "shapes": "auto"},
                       seed_commitment=commitment(b"s"),
                       entries=[ManifestEntry(name="a", source=str(EXAMPLE), bundle="bundles/a.tar",
                                              sha256=sha256_file(copy))]), b"s")
    rep = Report(created_at="2026-12-04T00:00:00Z",
                 submission=SubmissionSummary(name="a", suite="demo", dsl="triton",
                                              bundle_sha256=sha256_file(copy)),
                 suite=SuiteSummary(id="demo", version="1", weights_version="1"),
                 environment=Environment(grader_version="0", hardware="cpu-interpreter",
                                         device="cpu", is_performance=False, policy="triton",
                                         seed_commitment=commitment(b"s")),
                 problems=[], summary=Summary(problems=0, shapes=0, verdicts={},
                                              correct_shapes=0, passed_shapes=0,
                                              correctness_rate=0, dsl_adoption_rate=0,
                                              illusion_gap=0))
    in_round = (rd, "a")
    submitted = tmp_path / "submitted.tar"
    _retar(copy, submitted)
    assert sha256_file(submitted) != sha256_file(copy)
    req = VerifyRequest(report=rd.report_file("a"), secret_hex="00", bundle=submitted)
    path, note = find_bundle(req, rep, in_round, tmp_path / "w1")
    assert path == copy and note is not None and "graded again" in note
    folder = VerifyRequest(report=rd.report_file("a"), secret_hex="00", bundle=EXAMPLE)
    assert find_bundle(folder, rep, in_round, tmp_path / "w2")[1] is None  # packs the same
    other = tmp_path / "other.tar"
    create_bundle(_submission(tmp_path, "mine"), other)
    with pytest.raises(UsageError, match="its files differ from the round's copy"):
        find_bundle(VerifyRequest(report=rd.report_file("a"), secret_hex="00", bundle=other),
                    rep, in_round, tmp_path / "w3")

