"""The report renderers: HTML, Markdown, JUnit and the JSON round trip, on hostile input."""

from __future__ import annotations

import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections import Counter
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest

from grader.detect.findings import Finding, Layer, Severity
from grader.errors import UsageError
from grader.formats.problem import Phase
from grader.report.html import render_html
from grader.report.junit import render_junit
from grader.report.markdown import md_text, render_markdown
from grader.report.model import (
    Comparison,
    Environment,
    KernelTime,
    ProblemResult,
    Report,
    ShapeResult,
    SubmissionSummary,
    SuiteSummary,
    Summary,
    Timing,
    Trace,
)
from grader.report.render import FORMATS, clean_text, load_report, write_reports
from grader.verdicts import Verdict, worst

HOSTILE = "</pre><script>alert('x')</script>{{ 7*7 }}\"'\x00\x01\x07\x1b[31m\ufffe"
BIG_STDERR = "Traceback (most recent call last):\n" + ("</pre><script>bad()</script>\n" * 4000)
VOID = {"meta", "br", "hr", "img", "input", "link", "wbr", "col", "area", "base", "source"}


def _comparisons(ok: bool) -> list[Comparison]:
    err = 1e-6 if ok else 0.5
    return [
        Comparison(max_abs_err=err, max_rel_err=err * 2, mismatched=0 if ok else 17,
                   total=4096, atol=1e-5, rtol=1e-5)
        for _ in range(3)
    ]


def _timing(us: float, cpu: bool) -> Timing:
    method = "wall-clock (cpu interpreter: not a performance number)" if cpu else "cuda-events"
    return Timing(median_us=us, iqr_us=us / 20, cv=0.03, samples=50, method=method)


def _shape(
    sid: str, verdict: Verdict, *, phase: Phase = "prefill", us: float | None = None,
    trace: Trace | None = None, error: str | None = None, detail: str = "",
    findings: list[Finding] | None = None, cpu: bool = True,
) -> ShapeResult:
    correct = verdict in (Verdict.PASSED, Verdict.FALLBACK)
    return ShapeResult(
        id=sid, phase=phase, smoke=sid.startswith("smoke"),
        params={"n": 4096, "dtype": "float32"}, verdict=verdict, detail=detail,
        error_excerpt=error,
        comparisons=_comparisons(correct) if verdict in (
            Verdict.PASSED, Verdict.FALLBACK, Verdict.INCORRECT) else [],
        timing=_timing(us, cpu) if us is not None else None,
        trace=trace, findings=findings or [],
    )


def make_report(*, hostile: bool = False, is_performance: bool = False) -> Report:
    """A realistic report: 3 problems; passed, fallback, incorrect and timeout shapes."""
    name = "<script>alert(1)</script>" if hostile else "team-a/triton-v2"
    kname = f"evil_kernel{HOSTILE}" if hostile else "add_kernel"
    stderr = BIG_STDERR if hostile else "warning: slow path\n"
    fb_finding = Finding(
        rule="FB001", severity=Severity.FALLBACK, layer=Layer.STATIC,
        message=f"calls torch.matmul{HOSTILE if hostile else ''}", file="kernels/matmul.py",
        line=12, column=4, snippet=f"    return torch.matmul(a, b)  # {HOSTILE if hostile else ''}",
    )
    dyn_finding = Finding(
        rule="DY002", severity=Severity.FALLBACK, layer=Layer.DYNAMIC,
        message="92% of device time in cuBLAS", file=None, line=None,
    )
    vector_add = ProblemResult(
        id="vector_add", operator="elementwise_add", verdict=Verdict.PASSED,
        detail="all shapes passed", kernel_file="kernels/vector_add.py",
        image="sha256:" + "a" * 64, wall_s=12.5,
        shapes=[
            _shape("smoke_1k", Verdict.PASSED, us=120.0, trace=Trace(
                triton_launches={kname: 3}, device_kernels=[
                    KernelTime(name=kname, kind="own_triton", device_us=300.0, calls=3)],
                dsl_share=1.0)),
            _shape("decode_64k", Verdict.PASSED, phase="decode", us=980.5,
                   trace=Trace(triton_launches={kname: 3}, dsl_share=1.0)),
        ],
    )
    matmul = ProblemResult(
        id="matmul", operator="gemm", verdict=Verdict.FALLBACK,
        detail="the work ran in cuBLAS", kernel_file="kernels/matmul.py",
        findings=[fb_finding], stderr_excerpt=stderr, wall_s=30.0,
        shapes=[
            _shape("smoke_64", Verdict.FALLBACK, us=55.0, detail=f"delegated {kname}",
                   findings=[dyn_finding], trace=Trace(
                       torch_ops={"aten::mm": 3, kname: 1},
                       device_kernels=[KernelTime(name=f"cublas_{kname}", kind="vendor",
                                                  device_us=90.0, calls=3)],
                       dsl_share=0.08)),
            _shape("prefill_4k", Verdict.FALLBACK, us=410.0, detail="aten::mm ran"),
        ],
    )
    rmsnorm = ProblemResult(
        id="rmsnorm", operator="rms_norm", verdict=Verdict.TIMEOUT,
        detail="killed after 60 s", kernel_file="kernels/rmsnorm.py",
        shapes=[
            _shape("smoke_128", Verdict.PASSED, us=40.0, trace=Trace(dsl_share=1.0)),
            _shape("prefill_4k", Verdict.INCORRECT, detail="17 elements off",
                   error=f"AssertionError {HOSTILE}" if hostile else None),
            _shape("prefill_8k", Verdict.TIMEOUT, error=stderr),
        ],
    )
    problems = [vector_add, matmul, rmsnorm]
    shapes = [s for p in problems for s in p.shapes]
    for p in problems:
        assert p.verdict is worst([s.verdict for s in p.shapes])
    counts = Counter(s.verdict for s in shapes)
    correct = counts[Verdict.PASSED] + counts[Verdict.FALLBACK]
    return Report(
        created_at=datetime(2025, 3, 1, 12, 30, tzinfo=UTC),
        submission=SubmissionSummary(name=name, suite="demo", dsl="triton",
                                     bundle_sha256="b" * 64),
        suite=SuiteSummary(id="demo", version="1.0", weights_version="2025-01"),
        environment=Environment(
            grader_version="0.1.0", hardware="cpu-interpreter",
            device="cpu (triton interpreter)" if not is_performance else "NVIDIA H200",
            is_performance=is_performance, policy="default",
            images={"runtime": "sha256:" + "c" * 64, "vector_add": "sha256:" + "d" * 64},
            seed_commitment="e" * 64, docker="27.3.1",
        ),
        problems=problems,
        summary=Summary(
            problems=len(problems), shapes=len(shapes), verdicts=dict(counts),
            correct_shapes=correct, passed_shapes=counts[Verdict.PASSED],
            correctness_rate=correct / len(shapes),
            dsl_adoption_rate=counts[Verdict.PASSED] / len(shapes),
            illusion_gap=counts[Verdict.FALLBACK] / len(shapes),
        ),
    )


class StrictChecker(HTMLParser):
    """Records every tag; flags scripts, unbalanced nesting and external references."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.problems: list[str] = []
        self.tags: Counter[str] = Counter()
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1
        self._check_attrs(tag, attrs)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1
        self._check_attrs(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.stack[-1:]}")
        else:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def _check_attrs(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if key.startswith("on"):
                self.problems.append(f"event handler {key} on <{tag}>")
            external = value and not value.startswith("#")
            if key in ("src", "href", "action", "xlink:href") and external:
                self.problems.append(f"external reference {key}={value!r}")


def _parse(html: str) -> StrictChecker:
    checker = StrictChecker()
    checker.feed(html)
    checker.close()
    return checker


@pytest.fixture(params=[False, True], ids=["plain", "hostile"])
def report(request: pytest.FixtureRequest) -> Report:
    return make_report(hostile=request.param)


# --- HTML ---------------------------------------------------------------------------------


def test_html_is_well_formed_and_self_contained(report: Report) -> None:
    html = render_html(report)
    checker = _parse(html)
    assert checker.problems == []
    assert checker.stack == []
    assert checker.tags["script"] == 0
    assert checker.tags["link"] == 0 and checker.tags["img"] == 0
    assert not re.search(r"<script", html, re.IGNORECASE)
    assert "http://" not in html and "https://" not in html
    assert "Content-Security-Policy" in html


def test_html_shows_problems_verdicts_and_summary(report: Report) -> None:
    html = render_html(report)
    for problem in report.problems:
        assert problem.id in html
        assert f">{problem.verdict.value}<" in html
        for shape in problem.shapes:
            assert shape.id in html
    assert "v-ok" in html and "v-warn" in html and "v-bad" in html and "v-limit" in html
    assert "Illusion gap" in html and "28.6%" in html  # 2 fallback of 7 shapes
    assert "FB001" in html and "DY002" in html and "kernels/matmul.py:12:4" in html
    assert "aten::mm" in html
    assert "<svg" in html  # timings exist
    assert "e" * 64 in html  # seed commitment


def test_html_banner_only_for_the_cpu_interpreter() -> None:
    assert 'id="not-performance"' in render_html(make_report(is_performance=False))
    html = render_html(make_report(is_performance=True))
    assert 'id="not-performance"' not in html
    assert "not performance numbers" not in html


def test_html_without_timings_has_no_chart() -> None:
    base = make_report()
    problems = [
        p.model_copy(update={"shapes": [s.model_copy(update={"timing": None}) for s in p.shapes]})
        for p in base.problems
    ]
    html = render_html(base.model_copy(update={"problems": problems}))
    assert "<svg" not in html
    assert _parse(html).problems == []


def test_html_escapes_hostile_text() -> None:
    html = render_html(make_report(hostile=True))
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # the submission name, escaped
    assert "&lt;/pre&gt;&lt;script&gt;" in html
    assert "{{ 7*7 }}" in html  # shown literally, never evaluated as a template
    assert "\x00" not in html and "\x01" not in html and "\x1b" not in html
    assert "\ufffe" not in html
    assert "alert('x')" not in html  # quotes are escaped too
    text = "".join(_parse(html).text)
    assert "<script>alert(1)</script>" in text  # ...and a reader sees the name as typed


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium")
def test_html_hostile_page_in_a_real_browser(tmp_path: Path) -> None:
    """The browser's own parse of the hostile page holds no script element."""
    page = tmp_path / "report.html"
    page.write_text(render_html(make_report(hostile=True)), encoding="utf-8")
    dom = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
         page.as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout
    assert "Grading report:" in dom and "illusion" in dom.lower()
    assert "<script" not in dom.lower()


def test_html_truncates_huge_excerpts() -> None:
    html = render_html(make_report(hostile=True))
    assert len(BIG_STDERR) > 100_000
    assert len(html) < 100_000
    assert "earlier characters omitted" in html


def test_html_with_no_problems() -> None:
    base = make_report()
    empty = base.model_copy(update={
        "problems": [],
        "summary": Summary(problems=0, shapes=0, verdicts={}, correct_shapes=0,
                           passed_shapes=0, correctness_rate=0, dsl_adoption_rate=0,
                           illusion_gap=0),
    })
    html = render_html(empty)
    assert "no shapes graded" in html
    assert _parse(html).problems == []


# --- Markdown -----------------------------------------------------------------------------


def test_markdown_summary(report: Report) -> None:
    md = render_markdown(report)
    assert "7 shapes" in md and "3 passed" in md and "2 fallback" in md
    assert "illusion gap 28.6%" in md
    for problem in report.problems:
        assert problem.id.replace("_", "\\_") in md
    assert "✅ passed" in md and "🟡 fallback" in md and "⏱️ timeout" in md
    assert "CPU interpreter" in md


def test_markdown_escapes_entry_text() -> None:
    assert md_text("a|b") == "a\\|b"
    assert md_text("`x`") == "\\`x\\`"
    assert md_text("line1\nline2") == "line1 line2"
    assert md_text("<script>") == "&lt;script&gt;"
    assert md_text("[x](javascript:y)") == "\\[x\\](javascript:y)"
    assert md_text("@org/team") == "&#64;org/team"
    assert len(md_text("x" * 10_000)) <= 300
    md = render_markdown(make_report(hostile=True))
    assert "<script" not in md and "\x00" not in md
    for line in md.splitlines():
        if line.startswith("|"):
            # every unescaped pipe is a column separator: the row keeps its column count
            cells = re.split(r"(?<!\\)\|", line)
            assert len(cells) in (6, 7, 8), line


# --- JUnit --------------------------------------------------------------------------------


def test_junit_structure(report: Report) -> None:
    xml = render_junit(report)
    root = ET.fromstring(xml.encode())
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["vector_add", "matmul", "rmsnorm"]
    cases = root.findall("testsuite/testcase")
    assert len(cases) == 7
    assert cases[0].get("name") == "vector_add[smoke_1k]"
    assert cases[0].get("classname") == "grader.demo.vector_add"
    failures = root.findall("testsuite/testcase/failure")
    assert len(failures) == 4
    assert {f.get("type") for f in failures} == {"fallback", "incorrect", "timeout"}
    assert failures[0].get("message") == Verdict.FALLBACK.message
    assert root.get("tests") == "7" and root.get("failures") == "4" and root.get("errors") == "0"
    assert suites[1].get("failures") == "2" and suites[2].get("failures") == "2"


def test_junit_hostile_text_is_valid_xml() -> None:
    xml = render_junit(make_report(hostile=True))
    root = ET.fromstring(xml.encode())  # would raise on NUL or other forbidden characters
    assert "\x00" not in xml and "\x1b" not in xml
    err = root.find("testsuite[@name='matmul']/system-err")
    assert err is not None and err.text is not None and len(err.text) < 5000
    body = root.find(".//failure[@type='incorrect']")
    assert body is not None and "</pre><script>" in (body.text or "")  # as text, not markup


def test_junit_infra_error_and_missing_problem() -> None:
    base = make_report()
    infra = base.problems[0].model_copy(update={
        "verdict": Verdict.INFRA_ERROR,
        "shapes": [base.problems[0].shapes[0].model_copy(
            update={"verdict": Verdict.INFRA_ERROR, "detail": "docker died"})],
    })
    missing = ProblemResult(id="softmax", operator="softmax", verdict=Verdict.MISSING,
                            detail="no kernels/softmax.py")
    report = base.model_copy(update={"problems": [infra, missing]})
    root = ET.fromstring(render_junit(report).encode())
    assert len(root.findall(".//error[@type='infra_error']")) == 1
    missing_case = root.find("testsuite[@name='softmax']/testcase")
    assert missing_case is not None and missing_case.get("name") == "softmax"
    assert missing_case.find("failure[@type='missing']") is not None
    assert root.find(".//skipped") is None


# --- JSON and write_reports ---------------------------------------------------------------


def test_write_reports_and_round_trip(tmp_path: Path, report: Report) -> None:
    written = write_reports(report, tmp_path / "out", list(FORMATS))
    assert set(written) == set(FORMATS)
    assert {p.name for p in written.values()} == {
        "report.json", "report.html", "report.md", "report.junit.xml"}
    assert load_report(written["json"]) == report
    assert written["html"].read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_write_reports_subset_and_unknown(tmp_path: Path) -> None:
    written = write_reports(make_report(), tmp_path, ["md"])
    assert list(written) == ["md"] and not (tmp_path / "report.json").exists()
    with pytest.raises(UsageError, match="unknown report format"):
        write_reports(make_report(), tmp_path, ["pdf"])


@pytest.mark.parametrize("content", ["", "not json", '{"schema_version": "1"}',
                                     '{"schema_version": "99"}'])
def test_load_report_rejects_invalid_files(tmp_path: Path, content: str) -> None:
    path = tmp_path / "report.json"
    path.write_text(content)
    with pytest.raises(UsageError, match="not a valid grader report") as info:
        load_report(path)
    assert info.value.hint


def test_load_report_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read report file"):
        load_report(tmp_path / "nope.json")


def test_clean_text() -> None:
    assert clean_text("a\x00b\tc\nd\x7f") == "ab\tc\nd\x7f"
    assert clean_text("x" * 10, 4) == "xxxx\n[… 6 more characters omitted]"
    assert clean_text("abcdef", 2, tail=True).endswith("\nef")
    assert clean_text("\ud800ok") == "ok"
