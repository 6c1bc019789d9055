"""A round's commitment (`grader round commit`) and `grader verify REPORT` without Docker:
what a round is compared with before it grades, what `grader round verify` says of a
commitment swapped or of reports graded with other images, and how a re-grade is compared
with its report (verdicts; timings and scores only on the same kind of GPU)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from grader.errors import UsageError
from grader.grading.checkpoint import commitment
from grader.grading.grader import summarize
from grader.grading.settings import GradingSettings
from grader.model.results import (
    Environment,
    ProblemResult,
    Report,
    ShapeResult,
    SubmissionSummary,
    SuiteSummary,
    Timing,
)
from grader.paths import PROBLEM_BUNDLES
from grader.report.render import write_reports
from grader.round.commit import differences, report_differences, write_commitment
from grader.round.conduct import finish
from grader.round.model import (
    Commitment,
    ImageRef,
    Manifest,
    ManifestEntry,
    Outcome,
    Settings,
    SuiteRef,
)
from grader.round.reproduce import (
    VerifyRequest,
    check_secret,
    compare,
    find_bundle,
    round_of,
    settings_of_report,
)
from grader.round.request import suite_digest
from grader.round.store import RoundDir
from grader.round.verify import verify_round
from grader.suite.load import load_suite
from grader.verdicts import Verdict, worst

SECRET = bytes(range(32))
# The checkout's demo suite: verify_round finds it by id (grader/suite/roots.py).
SUITE = SuiteRef(id="demo", version="0.2.0", weights_version="0.1.0",
                 digest=suite_digest(load_suite(PROBLEM_BUNDLES / "demo")))
SETTINGS = Settings(policy="triton", device="cpu", runtime="cpu", hardware="auto",
                    shapes="auto", problems=("vector_add",))
IMAGES = {"runtime": ImageRef(tag="grader-runtime-cpu:aaaa", id="sha256:" + "1" * 64),
          "vector_add": ImageRef(tag="grader-problem-demo-vector_add:bbbb",
                                 id="sha256:" + "2" * 64)}
COMMITTED = Commitment(created_at=datetime(2026, 1, 5, tzinfo=UTC), grader_version="0.1.0",
                       suite=SUITE, settings=SETTINGS, seed_commitment=commitment(SECRET),
                       images=IMAGES)


def _report(verdicts: list[Verdict], *, sha: str = "0" * 64, gpu: str | None = None,
            medians: list[float] | None = None, images: dict[str, ImageRef] = IMAGES,
            shape_ids: list[str] | None = None) -> Report:
    ids = shape_ids or [f"s{i}" for i in range(len(verdicts))]
    shapes = [ShapeResult(id=ids[i], phase="decode", smoke=True, params={"n": 4}, verdict=v,
                          detail="d", timing=None if medians is None else Timing(
                              median_us=medians[i], iqr_us=0.5, cv=0.01, samples=50,
                              method="cuda-events"))
              for i, v in enumerate(verdicts)]
    problems = [ProblemResult(id="vector_add", operator="add", verdict=worst(verdicts),
                              shapes=shapes, image=images["vector_add"].tag)]
    return Report(
        created_at=datetime(2026, 1, 5, tzinfo=UTC),
        submission=SubmissionSummary(name="a", suite="demo", dsl="triton", bundle_sha256=sha),
        suite=SuiteSummary(id="demo", version="0.2.0", weights_version="0.1.0"),
        environment=Environment(
            grader_version="0.1.0", hardware="h200" if gpu else "cpu-interpreter",
            device=f"cuda: {gpu}" if gpu else "cpu (Triton interpreter)",
            is_performance=gpu is not None, policy="triton",
            images={k: v.id for k, v in images.items()}, seed_commitment=commitment(SECRET)),
        problems=problems, summary=summarize(problems))


def test_a_round_differs_from_its_commitment_by_each_thing_committed() -> None:
    same = {"suite": SUITE, "settings": SETTINGS, "secret": SECRET, "images": IMAGES,
            "grader_version": "0.1.0"}
    assert differences(COMMITTED, **same) == []  # type: ignore[arg-type]
    other = {
        "secret": bytes(32),
        "suite": SUITE.model_copy(update={"digest": "e" * 64}),
        "settings": SETTINGS.model_copy(update={"policy": "permissive"}),
        "images": {**IMAGES, "vector_add": IMAGES["vector_add"].model_copy(
            update={"id": "sha256:" + "3" * 64})},
        "grader_version": "0.2.0"}
    for key, value in other.items():
        found = differences(COMMITTED, **{**same, key: value})  # type: ignore[arg-type]
        assert len(found) == 1, (key, found)
    assert "setting policy: 'permissive', committed 'triton'" in differences(
        COMMITTED, **{**same, "settings": other["settings"]})  # type: ignore[arg-type]
    # images None: not compared (nothing to ask)
    assert differences(COMMITTED, **{**same, "images": None}) == []  # type: ignore[arg-type]


def test_report_images_against_the_commitment() -> None:
    assert report_differences(COMMITTED, _report([Verdict.PASSED])) == []
    rebuilt = {**IMAGES, "runtime": IMAGES["runtime"].model_copy(
        update={"id": "sha256:" + "9" * 64})}
    rep = _report([Verdict.PASSED], images=rebuilt)
    assert ["runtime: image id sha256:999999999999, committed sha256:111111111111"] == \
        report_differences(COMMITTED, rep)
    assert report_differences(COMMITTED, rep, ids=False) == []  # a Ray node's own ids
    changed = {**IMAGES, "vector_add": ImageRef(tag="grader-problem-demo-vector_add:cccc",
                                                id=IMAGES["vector_add"].id)}
    assert "vector_add: image grader-problem-demo-vector_add:cccc" in report_differences(
        COMMITTED, _report([Verdict.PASSED], images=changed), ids=False)[0]


def _committed_round(tmp_path: Path) -> RoundDir:
    rd = RoundDir(tmp_path / "round")
    sha = write_commitment(rd, COMMITTED, SECRET)
    rd.bundles.mkdir(parents=True)
    (rd.bundles / "a.tar").write_bytes(b"a" * 100)
    from grader.round.entries import sha256_file

    bundle_sha = sha256_file(rd.bundles / "a.tar")
    manifest = Manifest(round_id="abc", created_at=datetime(2026, 1, 5, tzinfo=UTC),
                        grader_version="0.1.0", suite=SUITE, settings=SETTINGS,
                        seed_commitment=commitment(SECRET), commitment_sha256=sha,
                        entries=[ManifestEntry(name="a", source="/src/a", sha256=bundle_sha,
                                               bundle="bundles/a.tar", declared_name="a")])
    rd.create(manifest, SECRET)
    write_reports(_report([Verdict.PASSED], sha=bundle_sha), rd.entry_dir("a"), ["json"])
    rd.save_outcome(Outcome(name="a", status="graded", report_sha256=rd.report_sha256("a")))
    finish(rd, manifest)
    return rd


def test_round_verify_checks_the_commitment_and_each_report_s_images(tmp_path: Path) -> None:
    rd = _committed_round(tmp_path)
    got = verify_round(rd.root, suite_roots=[])
    assert not got.wrong, got.wrong
    assert any("commitment matches the manifest" in ok for ok in got.ok)
    assert any("a: images are the committed ones" in ok for ok in got.ok)
    published = tmp_path / "published.json"
    published.write_bytes(rd.commitment_file.read_bytes())
    assert not verify_round(rd.root, suite_roots=[], commitment_file=published).wrong
    # A commitment rewritten after the round, and a report graded with another image.
    doc = json.loads(rd.commitment_file.read_text())
    doc["settings"]["policy"] = "permissive"
    rd.commitment_file.write_text(json.dumps(doc))
    got = verify_round(rd.root, suite_roots=[])
    assert any("is not the one the round started under" in w for w in got.wrong), got.wrong
    assert not verify_round(rd.root, suite_roots=[], commitment_file=published).wrong
    other = {**IMAGES, "runtime": IMAGES["runtime"].model_copy(
        update={"id": "sha256:" + "9" * 64})}
    manifest = rd.load_manifest()
    write_reports(_report([Verdict.PASSED], sha=manifest.entries[0].sha256 or "",
                          images=other), rd.entry_dir("a"), ["json"])
    rd.save_outcome(Outcome(name="a", status="graded", report_sha256=rd.report_sha256("a")))
    board = finish(rd, manifest)
    assert any("graded with images other than the committed" in n for n in board.notes)
    got = verify_round(rd.root, suite_roots=[], commitment_file=published)
    assert [w for w in got.wrong if w.startswith("a: images")], got.wrong
    # Graded on a Ray node: its image ids are that node's; only the tags are compared.
    rd.save_outcome(Outcome(name="a", status="graded", report_sha256=rd.report_sha256("a"),
                            node="n1"))
    finish(rd, manifest)
    got = verify_round(rd.root, suite_roots=[], commitment_file=published)
    assert not got.wrong and any("tags only" in ok for ok in got.ok), got.wrong


def test_a_round_without_a_commitment_says_so(tmp_path: Path) -> None:
    rd = _committed_round(tmp_path)
    manifest = rd.load_manifest().model_copy(update={"commitment_sha256": None})
    rd.save_manifest(manifest)
    rd.commitment_file.unlink()
    finish(rd, manifest)
    got = verify_round(rd.root, suite_roots=[])
    assert not got.wrong and "commitment: the round started without one" in got.unchecked


def test_the_secret_is_checked_before_anything_else() -> None:
    rep = _report([Verdict.PASSED])
    assert check_secret(rep, SECRET.hex()) == SECRET
    with pytest.raises(UsageError, match="does not match the report's seed commitment"):
        check_secret(rep, bytes(32).hex())
    with pytest.raises(UsageError, match="not hexadecimal"):
        check_secret(rep, "xyz")


def test_the_bundle_of_a_round_report_and_of_a_lone_one(tmp_path: Path) -> None:
    rd = _committed_round(tmp_path)
    report = rd.report_file("a")
    found = round_of(report)
    assert found is not None and found[1] == "a"
    rep = rd.report("a")
    assert rep is not None
    req = VerifyRequest(report=report, secret_hex=SECRET.hex())
    assert find_bundle(req, rep, found, tmp_path / "w") == (rd.bundles / "a.tar", None)
    lone = tmp_path / "lone" / "report.json"
    lone.parent.mkdir()
    lone.write_bytes(report.read_bytes())
    assert round_of(lone) is None
    with pytest.raises(UsageError, match="--bundle"):
        find_bundle(VerifyRequest(report=lone, secret_hex=SECRET.hex()), rep, None, tmp_path)
    other = tmp_path / "other.tar"
    other.write_bytes(b"b" * 100)
    with pytest.raises(UsageError, match="not the bundle the report graded"):
        find_bundle(VerifyRequest(report=lone, secret_hex=SECRET.hex(), bundle=other), rep,
                    None, tmp_path)


def test_settings_are_read_from_a_report_of_grader_run() -> None:
    suite = load_suite(PROBLEM_BUNDLES / "demo")
    smoke = [s.id for s in suite.problems["vector_add"].problem.shapes if s.smoke]
    rep = _report([Verdict.PASSED] * len(smoke), shape_ids=smoke)
    got = settings_of_report(rep, suite)
    assert (got.device, got.runtime, got.shapes, got.problems, got.policy) == (
        "cpu", "cpu", "auto", ("vector_add",), "triton")
    with pytest.raises(UsageError, match="no --shapes selection"):
        settings_of_report(_report([Verdict.PASSED], shape_ids=["nope"]), suite)


def test_compare_on_the_cpu_is_verdicts_only() -> None:
    rep = _report([Verdict.PASSED, Verdict.INCORRECT])
    got = compare(rep, rep)
    assert not got.mismatches and "verdicts only" in got.timings and "CPU" in got.timings
    assert [ln.where for ln in got.lines] == ["vector_add", "vector_add/s0", "vector_add/s1"]
    tampered = _report([Verdict.PASSED, Verdict.PASSED])
    bad = compare(tampered, rep).mismatches
    assert [(ln.where, ln.text) for ln in bad] == [
        ("vector_add", "the report says passed, graded again incorrect"),
        ("vector_add/s1", "the report says passed, graded again incorrect")]
    fewer = _report([Verdict.PASSED])
    assert [ln.where for ln in compare(rep, fewer).mismatches] == [
        "vector_add", "vector_add/s1"]
    assert "not in the report" in compare(fewer, rep).mismatches[-1].text


def test_compare_on_the_same_gpu_checks_timings_within_the_noise() -> None:
    old = _report([Verdict.PASSED] * 2, gpu="NVIDIA H200", medians=[10.0, 200.0])
    # 10.4: within the IQR (0.5 µs); 203.5: past it, within the drift of two gradings (2%)
    near = _report([Verdict.PASSED] * 2, gpu="NVIDIA H200", medians=[10.4, 203.5])
    got = compare(old, near)
    assert not got.mismatches and "timings and scores" in got.timings
    assert "drift apart (2% of the median" in got.timings
    far = _report([Verdict.PASSED] * 2, gpu="NVIDIA H200", medians=[10.0, 205.0])
    [bad] = compare(old, far).mismatches
    assert bad.where == "vector_add/s1" and "band ±4.10 µs: outside" in bad.text
    assert not compare(old, far, noise_scale=2.0).mismatches
    elsewhere = _report([Verdict.PASSED] * 2, gpu="NVIDIA A100", medians=[30.0, 500.0])
    got = compare(old, elsewhere)
    assert not got.mismatches and "verdicts only" in got.timings and "A100" in got.timings


def test_a_regrade_the_grader_failed_confirms_nothing(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """An infra_error in the re-grade is this host's failure: InfraError (exit 30), never a
    mismatch held against the report (grading faked: no Docker here)."""
    from grader.errors import InfraError
    from grader.round import reproduce

    suite = load_suite(PROBLEM_BUNDLES / "demo")
    smoke = [s.id for s in suite.problems["vector_add"].problem.shapes if s.smoke]
    bundle = tmp_path / "a.tar"
    bundle.write_bytes(b"a" * 100)
    from grader.round.entries import sha256_file

    rep = _report([Verdict.PASSED] * len(smoke), shape_ids=smoke, sha=sha256_file(bundle))
    rep = rep.model_copy(update={"suite": rep.suite.model_copy(
        update={"version": suite.info.version})})
    path = tmp_path / "report.json"
    path.write_text(rep.model_dump_json())
    seen = []

    def fake(req, cache, progress):  # type: ignore[no-untyped-def]
        seen.append(req)
        return _report([Verdict.INFRA_ERROR] * len(smoke), shape_ids=smoke)

    monkeypatch.setattr(reproduce, "run_grader", fake)
    req = VerifyRequest(report=path, secret_hex=SECRET.hex(), bundle=bundle)
    with pytest.raises(InfraError, match="nothing is confirmed"):
        reproduce.verify_report(req, lambda msg: None)
    [run] = seen
    assert (run.bundle, run.seed_secret, run.settings.device, run.settings.shapes,
            run.settings.problems) == (bundle, SECRET.hex(), "cpu", "auto", ("vector_add",))
    assert type(run.settings) is GradingSettings  # the grading's, not the round's Settings
    monkeypatch.setattr(reproduce, "run_grader", lambda req, cache, progress: rep)
    old, new, got = reproduce.verify_report(req, lambda msg: None)
    assert old == new and not got.mismatches
