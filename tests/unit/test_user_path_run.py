"""Issue 23, items 3, 4, 5 and 8 without Docker: the output folder, the Markdown report's
evidence and paths, a broken reference blamed on the suite, grading a folder or one file."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from grader.errors import ReferenceFailed, UsageError
from grader.grading.checkpoint import CHECKPOINT_DIR
from grader.grading.outdir import finish, prepare
from grader.grading.runner import check_references, failed_references
from grader.intake.bundle import open_bundle
from grader.intake.packing import packed
from grader.model.findings import Finding, Layer, Severity
from grader.model.results import (
    Environment,
    ProblemResult,
    Report,
    ShapeResult,
    SubmissionSummary,
    SuiteSummary,
    Summary,
)
from grader.paths import PROBLEM_BUNDLES, REPO
from grader.report.entry_paths import with_entry_paths
from grader.report.markdown import render_markdown
from grader.suite.load import find_suite, load_suite
from grader.verdicts import Verdict

EXAMPLE = REPO / "examples" / "triton"
TRACE = ('Traceback (most recent call last):\n  File "/grader/entry/kernel.py", line 3, in '
         '<module>\n    import tritonn\nModuleNotFoundError: No module named \'tritonn\'')


def _report(problems: list[ProblemResult], sha: str = "a" * 64, name: str = "entry") -> Report:
    return Report(
        created_at=datetime(2026, 12, 1, tzinfo=UTC),
        submission=SubmissionSummary(name=name, suite="demo", dsl="triton", bundle_sha256=sha),
        suite=SuiteSummary(id="demo", version="1", weights_version="w1"),
        environment=Environment(grader_version="0", hardware="h200", device="cpu",
                                is_performance=False, policy="triton", seed_commitment="0" * 64),
        problems=problems, summary=Summary(problems=len(problems), shapes=1, verdicts={},
                                           correct_shapes=0, passed_shapes=0,
                                           correctness_rate=0, dsl_adoption_rate=0,
                                           illusion_gap=0))


def _compile_error() -> ProblemResult:
    shape = ShapeResult(id="smoke_1027", phase="decode", smoke=True, params={"n": 1027},
                        verdict=Verdict.COMPILE_ERROR, detail="importing the kernel file failed",
                        error_excerpt=TRACE)
    finding = Finding(rule="FB001", severity=Severity.FALLBACK, layer=Layer.STATIC,
                      message="torch.add computes the result", line=7)
    return ProblemResult(id="vector_add", operator="add", verdict=Verdict.COMPILE_ERROR,
                         kernel_file="kernels/vector_add.py", shapes=[shape], findings=[finding],
                         stderr_excerpt=TRACE)


# --- item 4 ----------------------------------------------------------------------------------

def test_markdown_shows_the_error_and_findings_with_the_participants_path() -> None:
    rep = with_entry_paths(_report([_compile_error()]))
    md = render_markdown(rep)
    assert "/grader/entry" not in md
    assert "kernels/vector\\_add.py" in md  # md_text escapes `_`
    assert "No module named" in md and "tritonn" in md
    assert "**Finding** FB001 (fallback) at kernels/vector\\_add.py:7" in md
    assert rep.problems[0].shapes[0].error_excerpt is not None
    assert 'File "kernels/vector_add.py", line 3' in rep.problems[0].shapes[0].error_excerpt


def test_entry_paths_leave_a_report_without_them_alone() -> None:
    rep = _report([_compile_error().model_copy(update={"kernel_file": None})])
    assert with_entry_paths(rep) is rep


# --- item 3 ----------------------------------------------------------------------------------

def _old_run(out: Path, sha: str) -> None:
    out.mkdir()
    for name in ("report.json", "report.md", "report.junit.xml", "report.html"):
        (out / name).write_text("old")
    (out / "report.json").write_text(_report([], sha=sha, name="old-entry").model_dump_json())
    (out / "notes.txt").write_text("mine")


def test_a_fresh_run_removes_the_earlier_run_reports(tmp_path: Path) -> None:
    _old_run(tmp_path / "r", "b" * 64)
    removed = prepare(tmp_path / "r", "b" * 64, resume=False, force=False)
    assert sorted(p.name for p in removed) == ["report.html", "report.json",
                                               "report.junit.xml", "report.md"]
    assert [p.name for p in (tmp_path / "r").iterdir()] == ["notes.txt"]  # not ours: kept


def test_another_submissions_reports_are_refused_unless_forced(tmp_path: Path) -> None:
    _old_run(tmp_path / "r", "b" * 64)
    with pytest.raises(UsageError, match="old-entry") as err:
        prepare(tmp_path / "r", "c" * 64, resume=False, force=False)
    assert "--force" in (err.value.hint or "")
    assert (tmp_path / "r" / "report.md").exists()  # refused: nothing touched
    prepare(tmp_path / "r", "c" * 64, resume=False, force=True)
    assert not (tmp_path / "r" / "report.md").exists()
    _old_run(tmp_path / "s", "b" * 64)
    assert prepare(tmp_path / "s", "c" * 64, resume=True, force=False) == []


def test_the_checkpoint_goes_after_a_completed_run(tmp_path: Path) -> None:
    passed = ProblemResult(id="vector_add", operator="add", verdict=Verdict.PASSED)
    infra = passed.model_copy(update={"verdict": Verdict.INFRA_ERROR})
    suite_fault = passed.model_copy(update={"verdict": Verdict.REFERENCE_ERROR})
    for rep, keep, gone in ((_report([passed]), False, True), (_report([passed]), True, False),
                            (_report([infra]), False, False),
                            (_report([suite_fault]), False, False)):  # --resume, once fixed
        (tmp_path / CHECKPOINT_DIR / "problems").mkdir(parents=True, exist_ok=True)
        assert finish(tmp_path, rep, keep_checkpoint=keep) is gone
        assert (tmp_path / CHECKPOINT_DIR).exists() is not gone


# --- item 5 ----------------------------------------------------------------------------------

def test_a_reference_that_does_not_parse_is_the_suites_fault(tmp_path: Path) -> None:
    suite_dir = tmp_path / "demo"
    shutil.copytree(PROBLEM_BUNDLES / "demo", suite_dir)
    ref = suite_dir / "rmsnorm" / "reference.py"
    ref.write_text(ref.read_text() + "\ndef broken(:\n")
    suite = load_suite(suite_dir)
    check_references(suite, ["vector_add"])  # only the problems graded are checked
    with pytest.raises(ReferenceFailed) as err:
        check_references(suite, list(suite.problems))
    assert str(ref) in err.value.message and err.value.exit_code == 21 and err.value.hint


def test_a_failed_reference_run_names_the_file() -> None:
    shape = ShapeResult(id="s", phase="decode", smoke=True, params={},
                        verdict=Verdict.REFERENCE_ERROR,
                        detail="the reference run failed on ['c']")
    bad = ProblemResult(id="rmsnorm", operator="rms", verdict=Verdict.REFERENCE_ERROR,
                        shapes=[shape])
    suite = find_suite("demo", [PROBLEM_BUNDLES])
    err = failed_references(_report([bad]), suite)
    assert err is not None and "problem_bundles/demo/rmsnorm/reference.py" in err.message
    assert failed_references(_report([_compile_error()]), suite) is None


# --- item 8 ----------------------------------------------------------------------------------

def _manifest_of(bundle: Path, tmp: Path) -> dict[str, object]:
    sub = open_bundle(bundle, tmp / "open")
    return json.loads(sub.manifest.model_dump_json())


def test_a_folder_is_packed_on_the_fly(tmp_path: Path) -> None:
    with packed(EXAMPLE, problems=(), suite=None) as got:
        m = _manifest_of(got, tmp_path)
        assert set(m["problems"]) == {"vector_add", "rmsnorm", "matmul"}  # type: ignore[arg-type]
    assert not got.exists()  # the packed tar is gone with the block


def test_one_kernel_file_is_packed_with_its_problem_and_suite(tmp_path: Path) -> None:
    kernel = EXAMPLE / "kernels" / "vector_add.py"
    with packed(kernel, problems=("vector_add",), suite=str(PROBLEM_BUNDLES / "demo")) as got:
        m = _manifest_of(got, tmp_path)
        assert m["problems"] == {"vector_add": {"file": "kernels/vector_add.py"}}
        assert m["submission"]["suite"] == "demo"  # type: ignore[index]
    (tmp_path / "again").mkdir()
    with packed(kernel, problems=("vector_add",), suite="demo") as got:
        assert _manifest_of(got, tmp_path / "again")["submission"]["suite"] == "demo"  # type: ignore[index]


@pytest.mark.parametrize(("problems", "suite"), [((), "demo"), (("a", "b"), "demo"),
                                                 (("vector_add",), None)])
def test_one_kernel_file_needs_one_problem_and_a_suite(problems: tuple[str, ...],
                                                      suite: str | None) -> None:
    with pytest.raises(UsageError, match="--problem ID") as err, \
            packed(EXAMPLE / "kernels" / "vector_add.py", problems=problems, suite=suite):
        pass
    assert err.value.hint


def test_a_missing_path_says_what_run_accepts(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no such file") as err, \
            packed(tmp_path / "nope.py", problems=(), suite=None):
        pass
    assert "submission folder" in (err.value.hint or "")
