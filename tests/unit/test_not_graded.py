"""A run that graded nothing still writes report.md, report.html and report.junit.xml that
say why (issue 34, friction 2: a CI job whose suite was not found published nothing), never
over another run's reports, and with the error's text made inert. No Docker."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from grader.errors import ProblemError
from grader.grading.config import GradingOptions, Presentation, RunOptions
from grader.grading.runner import grade_bundle
from grader.report.not_graded import write_not_graded
from grader.report.summaries import ErrorInfo

PWN = "<script>alert(1)</script> `code` [x](http://e) @team"


def test_a_run_that_cannot_find_its_suite_writes_why(tmp_path: Path) -> None:
    entry = tmp_path / "entry"
    (entry / "kernels").mkdir(parents=True)
    (entry / "kernels" / "k.py").write_text("def kernel(x):\n    return x\n")
    (entry / "submission.toml").write_text(
        '[submission]\nname = "e"\nsuite = "nowhere"\ndsl = "triton"\n\n'
        '[problems.k]\nfile = "kernels/k.py"\n')
    out = tmp_path / "reports"
    cfg = RunOptions(grading=GradingOptions(bundle=entry, out_dir=out),
                     presentation=Presentation(formats=("json", "html", "md", "junit"),
                                               quiet=True))
    with pytest.raises(ProblemError, match="suite 'nowhere' not found"):
        grade_bundle(cfg)
    junit = ET.parse(out / "report.junit.xml").getroot()
    error = junit.find(".//testcase/error")
    assert error is not None and error.get("type") == "ProblemError"
    assert junit.get("errors") == "1" and "nowhere" in (error.text or "")
    assert "not graded" in (out / "report.md").read_text()
    assert "not graded" in (out / "report.html").read_text()
    assert not (out / "report.json").exists()  # no report to record


def test_never_over_another_run_s_reports_and_inert(tmp_path: Path) -> None:
    err = ErrorInfo(kind="UsageError", exit_code=2, message=PWN, hint=PWN)
    (tmp_path / "report.json").write_text("{}")
    assert write_not_graded(err, tmp_path, ("md", "html", "junit")) == {}
    fresh = tmp_path / "fresh"
    written = write_not_graded(err, fresh, ("json", "md", "html", "junit"))
    assert set(written) == {"md", "html", "junit"}
    for path in written.values():
        assert "<script" not in path.read_text()
    assert "[x](http" not in written["md"].read_text()  # no link of the error's making
    assert write_not_graded(err, tmp_path / "none", ("json",)) == {}
