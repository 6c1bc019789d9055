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

from grader.errors import UsageError
from grader.formats.problem import Phase, Weights
from grader.model.findings import Finding, Layer, Severity
from grader.model.results import (
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
from grader.report.html import render_html
from grader.report.inert import clean_text
from grader.report.junit import render_junit
from grader.report.markdown import md_text, render_markdown
from grader.report.render import FORMATS, load_report, write_reports
from grader.scoring.hardware import load_hardware
from grader.scoring.roofline import roofline_values
from grader.scoring.scores import ScoreInput, score
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
    assert md_text("@org/team") == "&#64;&#8203;org/team"
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
        "report.json", "report.html", "report.md", "report.junit.xml", "report.sarif"}
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


# --- scores (report.scores) ---------------------------------------------------------------

H200 = load_hardware("h200")
# Roofline time per (problem, shape) of make_report(), seconds; all memory-bound on the H200.
ROOFS = {("vector_add", "smoke_1k"): 10e-6, ("vector_add", "decode_64k"): 490.25e-6,
         ("matmul", "smoke_64"): 5e-6, ("matmul", "prefill_4k"): 100e-6,
         ("rmsnorm", "smoke_128"): 2e-6, ("rmsnorm", "prefill_4k"): 50e-6,
         ("rmsnorm", "prefill_8k"): 90e-6}


def scored_report(*, is_performance: bool = True, hostile: bool = False,
                  over: bool = False) -> Report:
    """make_report() with a ScoreCard computed from its shapes (uniform weights, H200).

    Hand-computed: the scored (non-smoke) shapes are vector_add/decode_64k, passed, S =
    490.25 / 980.5 = 0.5 (reference 2451.25 µs: speed-up 2.5); matmul/prefill_4k fallback, 0;
    rmsnorm prefill_4k incorrect and prefill_8k timeout, 0. S_i: 0.5, 0, 0; S_agg = 0.5 / 3;
    prefill 0, decode 0.5. Funnel over 7 shapes: compiled 7, correct 5, native 3, timed 3.
    """
    base = make_report(is_performance=is_performance, hostile=hostile)
    inputs = []
    for p in base.problems:
        for s in p.shapes:
            t = ROOFS[(p.id, s.id)]
            measured = s.timing.median_us * 1e-6 if s.timing else None
            if over and s.id == "decode_64k":
                measured = t / 2  # S = 2: faster than the hardware allows
            inputs.append(ScoreInput(
                problem=f"{p.id}{HOSTILE}" if hostile else p.id, shape=s.id, phase=s.phase,
                smoke=s.smoke, verdict=s.verdict, measured_s=measured,
                reference_s=2451.25e-6 if s.id == "decode_64k" else None,
                roofline=roofline_values(0.0, t * 4.8e12, "bf16", H200)))
    card = score(inputs, Weights(version="w-2026"), agent_tokens=90_000)
    return base.model_copy(update={"scores": card})


def _svg(html: str) -> ET.Element:
    match = re.search(r'<svg class="chart" id="roofline-chart".*?</svg>', html, re.DOTALL)
    assert match, "no roofline chart"
    return ET.fromstring(match.group(0))  # raises unless the SVG is well-formed XML


def test_html_shows_the_score_card() -> None:
    report = scored_report()
    html = render_html(report)
    checker = _parse(html)
    assert checker.problems == [] and checker.stack == []
    assert 'id="s-agg">0.167<' in html  # 0.5 / 3
    assert 'id="s-agg-prefill">0.000<' in html and 'id="s-agg-decode">0.500<' in html
    assert "2.5×" in html  # speed-up geomean
    assert "fast_1 = 25.0%" in html and "fast_2 = 25.0%" in html  # 1 of 4 scored shapes
    assert "version w-2026 · mode uniform · normalised · coverage 100.0%" in html
    for gate, text in [("compiled", "7/7 · 100.0%"), ("correct", "5/7 · 71.4%"),
                       ("native", "3/7 · 42.9%"), ("timed", "3/7 · 42.9%")]:
        assert f"<div>{gate}</div><div class=\"num\">{text}</div>" in html
    shape_table = html.split('id="shape-scores"')[1].split("</table>")[0]
    assert "vector_add/decode_64k" in shape_table and "490 µs" in shape_table
    assert "980 µs" in shape_table and "<strong>0.500</strong>" in shape_table
    assert "memory" in shape_table and "not scored" in shape_table  # smoke shapes
    assert "every problem weighted equally" in html  # the card's notes
    assert "1 solved · 90,000 tokens" in html  # cost per solved problem
    assert 'id="scores-not-performance"' not in html


def test_html_roofline_chart_is_well_formed_svg() -> None:
    html = render_html(scored_report())
    svg = _svg(html)
    assert svg.tag == "svg"
    labels = [t.text for t in svg.iter("text")]
    # one row per scored shape with a roofline; a dot only where there is a measured time
    for row in ("vector_add/decode_64k", "matmul/prefill_4k", "rmsnorm/prefill_4k",
                "rmsnorm/prefill_8k"):
        assert row in labels
    assert "S=0.5" in labels and "fallback" in labels and "timeout" in labels
    assert len(list(svg.iter("circle"))) == 1 + 2  # legend + two measured shapes
    assert "10 µs" in labels and "1 ms" in labels  # decade ticks of the log axis
    xs = [float(c.get("cx", "nan")) for c in svg.iter("circle")]
    assert all(0 <= x <= float(svg.get("width", "0")) for x in xs)


def test_html_scores_not_performance_label() -> None:
    html = render_html(scored_report(is_performance=False))
    assert 'id="scores-not-performance"' in html and "Not performance" in html
    assert "not a performance number" in html


def test_html_over_roofline_is_shown_as_a_tampering_candidate() -> None:
    html = render_html(scored_report(over=True))
    assert 'id="tampering-candidates"' in html and "vector_add/decode_64k" in html
    assert "over_roofline" in html and 'id="s-agg">0.667<' in html  # S = 2, not capped
    _svg(html)


def test_html_scores_escape_hostile_ids() -> None:
    html = render_html(scored_report(hostile=True))
    checker = _parse(html)
    assert checker.problems == [] and checker.tags["script"] == 0
    assert "alert('x')" not in html and "\x00" not in html
    _svg(html)


def test_html_without_scores_has_no_score_section() -> None:
    html = render_html(make_report())
    assert 'id="scores"' not in html and "roofline-chart" not in html


def test_markdown_shows_the_score_card() -> None:
    md = render_markdown(scored_report())
    assert "**S_agg 0.167** · prefill 0.000 · decode 0.500" in md
    assert "Weights w-2026 (uniform, normalised, coverage 100.0%)" in md
    assert "speed-up geomean 2.5×" in md and "fast_2 25.0%" in md
    assert "compiled 7/7 (100.0%) → correct 5/7 (71.4%) → native 3/7 (42.9%)" in md
    assert "| vector\\_add | 0.500 | – | 0.500 | 1 |" in md
    assert "| vector\\_add/decode\\_64k | memory | 490 µs | 980 µs | 0.500 |" in md
    assert "Not performance" not in md
    assert "Not performance" in render_markdown(scored_report(is_performance=False))
    hostile = render_markdown(scored_report(hostile=True))
    assert "<script" not in hostile and "\x00" not in hostile
    for line in hostile.splitlines():
        if line.startswith("|"):
            assert len(re.split(r"(?<!\\)\|", line)) in (6, 7, 8), line


def test_sarif_format_carries_static_and_dynamic_findings(tmp_path: Path) -> None:
    import json as _json

    from grader.model.findings import Finding, Layer, Severity

    rep = make_report()
    static = Finding(rule="FB001", severity=Severity.FALLBACK, layer=Layer.STATIC,
                     message="calls torch.add", file="kernels/vector_add.py", line=3)
    dynamic = Finding(rule="DY001", severity=Severity.FALLBACK, layer=Layer.DYNAMIC,
                      message="aten.mm ran")
    p0 = rep.problems[0].model_copy(update={
        "findings": [static],
        "shapes": [s.model_copy(update={"findings": [dynamic]}) for s in rep.problems[0].shapes]})
    rep = rep.model_copy(update={"problems": [p0, *rep.problems[1:]]})
    path = write_reports(rep, tmp_path, ["sarif"])["sarif"]
    doc = _json.loads(path.read_text())
    assert doc["version"] == "2.1.0"
    rules = [r["ruleId"] for run in doc["runs"] for r in run["results"]]
    assert rules.count("DY001") == 1 and rules.count("FB001") == 2  # ours, and matmul's
    uris = {loc["physicalLocation"]["artifactLocation"]["uri"] for run in doc["runs"]
            for r in run["results"] for loc in r["locations"]}
    assert "kernels/vector_add.py" in uris
