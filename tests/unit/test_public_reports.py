"""Public reports (`--public`, issue 18): each renderer leaves the entry's output out except for
compile and runtime errors, and never shows it for an entry the policy or the evidence caught;
report.json keeps everything."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

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
from grader.report.html import render_html
from grader.report.junit import render_junit
from grader.report.markdown import render_markdown
from grader.report.public import NOTE, public_view
from grader.report.render import render_sarif, write_reports
from grader.verdicts import Verdict

# What each problem's entry printed; the marker says whether a public report may show it.
HIDDEN_TABLE = "[hidden] notes = 'the shapes we really grade'"
CASES: list[tuple[str, Verdict, list[Verdict], bool, str]] = [
    # (problem, problem verdict, shape verdicts, static violation, marker)
    ("pv", Verdict.POLICY_VIOLATION, [Verdict.POLICY_VIOLATION], False, "SECRET-PV"),
    ("tamper", Verdict.TAMPERING, [Verdict.TAMPERING], False, "SECRET-TAMPER"),
    ("wrong", Verdict.INCORRECT, [Verdict.INCORRECT], False, "SECRET-INCORRECT"),
    ("slow", Verdict.TIMEOUT, [Verdict.TIMEOUT], False, "SECRET-TIMEOUT"),
    # Read at import, printed, then raised: compile_error, but the analyser saw the read.
    ("ce_flagged", Verdict.COMPILE_ERROR, [Verdict.COMPILE_ERROR], True, "SECRET-CE-FLAGGED"),
    # A runtime error on one shape, a violation on another.
    ("mixed", Verdict.RUNTIME_ERROR, [Verdict.RUNTIME_ERROR, Verdict.POLICY_VIOLATION], False,
     "SECRET-MIXED"),
    ("ce", Verdict.COMPILE_ERROR, [Verdict.COMPILE_ERROR], False, "SHOWN-CE"),
    ("rt", Verdict.RUNTIME_ERROR, [Verdict.RUNTIME_ERROR], False, "SHOWN-RT"),
]
SECRETS = [c[4] for c in CASES if c[4].startswith("SECRET")]
SHOWN = [c[4] for c in CASES if c[4].startswith("SHOWN")]


def _violation() -> Finding:
    return Finding(rule="SB003", severity=Severity.VIOLATION, layer=Layer.STATIC,
                   message="uses `builtins.open`", file="kernels/x.py", line=3)


def make_report() -> Report:
    problems = []
    for pid, verdict, shape_verdicts, flagged, marker in CASES:
        shapes = [ShapeResult(id=f"s{i}", phase="prefill", smoke=True, params={"n": 8},
                              verdict=v, detail=v.message,
                              error_excerpt=f"Traceback ... {marker}-shape{i} {HIDDEN_TABLE}")
                  for i, v in enumerate(shape_verdicts)]
        problems.append(ProblemResult(
            id=pid, operator="add", verdict=verdict, detail=verdict.message,
            kernel_file=f"kernels/{pid}.py", shapes=shapes,
            findings=[_violation()] if flagged else [],
            stderr_excerpt=f"{marker}-stderr {HIDDEN_TABLE}"))
    n = sum(len(p.shapes) for p in problems)
    return Report(
        created_at=datetime(2026, 12, 2, tzinfo=UTC),
        submission=SubmissionSummary(name="team", suite="demo", dsl="triton",
                                     bundle_sha256="0" * 64),
        suite=SuiteSummary(id="demo", version="1", weights_version="1"),
        environment=Environment(grader_version="0.1.0", hardware="cpu-interpreter",
                                device="cpu (Triton interpreter)", is_performance=False,
                                policy="triton", seed_commitment="a" * 64),
        problems=problems,
        summary=Summary(problems=len(problems), shapes=n, verdicts={}, correct_shapes=0,
                        passed_shapes=0, correctness_rate=0, dsl_adoption_rate=0,
                        illusion_gap=0))


def _public(render: object) -> str:
    return render(public_view(make_report()), public=True)  # type: ignore[operator]


@pytest.mark.parametrize("render", [render_html, render_junit, render_markdown, render_sarif],
                         ids=["html", "junit", "md", "sarif"])
def test_a_public_rendering_carries_no_output_of_a_caught_or_silent_entry(render: object
                                                                          ) -> None:
    kwargs = {} if render in (render_junit, render_sarif) else {"public": True}
    text = render(public_view(make_report()), **kwargs)  # type: ignore[operator]
    for marker in SECRETS:
        assert marker not in text, marker
    # The hidden table only where an honest error excerpt carries it (shown by design).
    assert text.count("[hidden]") <= sum(text.count(m) for m in SHOWN)


@pytest.mark.parametrize("render", [render_html, render_junit, render_markdown, render_sarif],
                         ids=["html", "junit", "md", "sarif"])
def test_compile_and_runtime_errors_of_honest_entries_are_still_shown(render: object) -> None:
    """Every format carries the entry's error and the end of its output (issue 23)."""
    kwargs = {} if render in (render_junit, render_sarif) else {"public": True}
    text = render(public_view(make_report()), **kwargs)  # type: ignore[operator]
    for marker in SHOWN:
        assert f"{marker}-shape0" in text and f"{marker}-stderr" in text, marker
    # And without --public every excerpt is there: the public view is what removed them.
    full = render(make_report())  # type: ignore[operator]
    for marker in SECRETS + SHOWN:
        assert marker in full, marker


@pytest.mark.parametrize("render", [render_html, render_markdown], ids=["html", "md"])
def test_a_public_report_says_it_is_one(render: object) -> None:
    assert NOTE.split(" (")[0] in _public(render)
    assert NOTE.split(" (")[0] not in render(make_report())  # type: ignore[operator]


def test_the_public_view_keeps_everything_but_the_excerpts() -> None:
    report = make_report()
    public = public_view(report)
    strip = {"stderr_excerpt", "error_excerpt"}

    def without(r: Report) -> object:
        data = r.model_dump(mode="json")
        for p in data["problems"]:
            for k in strip:
                p.pop(k, None)
            for s in p["shapes"]:
                s.pop("error_excerpt")
        return data

    assert without(public) == without(report)
    kept = {p.id for p in public.problems if p.stderr_excerpt}
    assert kept == {"ce", "rt"}


def test_json_stays_the_record_and_the_others_are_public(tmp_path: Path) -> None:
    written = write_reports(make_report(), tmp_path, ["json", "html", "md", "junit", "sarif"],
                            public=True)
    record = json.loads(written["json"].read_text())
    stderr = {p["id"]: p["stderr_excerpt"] for p in record["problems"]}
    assert all(m in stderr[pid] for pid, *_, m in CASES)
    for fmt in ("html", "md", "junit", "sarif"):
        text = written[fmt].read_text()
        assert not [m for m in SECRETS if m in text], fmt


def test_grader_report_public_on_the_command_line(tmp_path: Path) -> None:
    src = tmp_path / "report.json"
    src.write_text(make_report().model_dump_json())
    out = tmp_path / "pub"
    res = subprocess.run([sys.executable, "-m", "grader", "report", str(src), "--format",
                          "html,junit,md", "--public", "-o", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    for name in ("report.html", "report.junit.xml", "report.md"):
        text = (out / name).read_text()
        assert not [m for m in SECRETS if m in text], name
    assert "SHOWN-RT-stderr" in (out / "report.html").read_text()
