"""Entry text where CI shows it (issue 24): the job summary rendered by GitHub's own Markdown
library, the JUnit a check-run reporter reads, SARIF for code scanning, and any log line the
runner would read as a workflow command."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest
from test_report_render import HOSTILE, make_report

from grader.model.findings import Finding, Layer, Severity
from grader.model.results import Report
from grader.report.inert import inert_text, sarif_text
from grader.report.junit import render_junit
from grader.report.markdown import md_text, render_markdown
from grader.report.sarif import to_sarif

# What an entry can put in its name, its kernel names, its errors and its stderr.
CI_HOSTILE = (
    "::add-mask::the-log\n  ::error file=kernels/a.py,line=1::forged\r::stop-commands::x\n"
    "</details><details open> @org/security-team admin@example.com www.evil.example "
    "<img src=x onerror=alert(1)> [release notes](https://evil.example/p) "
    "https://evil.example/x \x1b[31mred\x1b[0m \x9b2J \u202egnp.exe "
    "$\\color{red}{\\text{PASSED}}$ {0} [see](1) ![badge](https://evil.example/b.png)"
    "\nx ##[error]forged ##vso[task.setvariable variable=x]y"
)
WORDS = ("</details>", "@org/security-team", "admin@example.com", "<img src=x",
         "[release notes](https://evil.example/p)", "https://evil.example/x",
         "www.evil.example", "::add-mask::the-log")


def _runner_commands(text: str) -> list[str]:
    """The lines GitHub's runner would execute (actions/runner ActionCommand: `::` after
    leading white space, or `##[` anywhere; lines end at CR or LF), and Azure's `##vso[`."""
    return [line for line in re.split(r"\r\n|\r|\n", text)
            if line.lstrip().startswith("::") or re.search(r"##(vso)?\[", line, re.I)]


def _hostile_report() -> Report:
    base = make_report(hostile=True)
    problems = []
    for p in base.problems:
        shapes = [s.model_copy(update={
            "detail": f"{s.detail} {CI_HOSTILE}",
            "error_excerpt": f"Traceback\n{CI_HOSTILE}\n  File \"/x/evil.rs\", line 9"})
            for s in p.shapes]
        problems.append(p.model_copy(update={
            "detail": CI_HOSTILE, "shapes": shapes, "stderr_excerpt": CI_HOSTILE}))
    return base.model_copy(update={
        "problems": problems,
        "submission": base.submission.model_copy(update={"name": CI_HOSTILE})})


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: set[str] = set()
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_job_summary_as_github_renders_it() -> None:
    """cmark-gfm (GitHub's Markdown library) with its extensions and raw HTML let through:
    only our own structure comes out, and every hostile string is there as text."""
    cmarkgfm = pytest.importorskip("cmarkgfm")
    from cmarkgfm.cmark import Options

    md = render_markdown(_hostile_report())
    html = cmarkgfm.github_flavored_markdown_to_html(md, options=Options.CMARK_OPT_UNSAFE)
    page = _Tags()
    page.feed(html)
    assert page.tags <= {"h2", "h3", "p", "table", "thead", "tbody", "tr", "th", "td",
                         "strong", "em", "sub", "blockquote"}, page.tags
    text = "".join(page.text).replace("\u200b", "")
    for word in WORDS:
        assert word in text, word
    assert "\x1b" not in text and "\x9b" not in text and "\u202e" not in text
    assert _runner_commands(md) == []


def test_markdown_cells_on_their_own() -> None:
    assert md_text("https://a.example/x") == "https&#58;//a.example/x"
    assert md_text("see www.a.example") == "see www&#46;a.example"
    assert md_text("$x$") == "\\$x\\$"
    assert md_text("- [ ] todo") == "\\- \\[ \\] todo"
    assert md_text("1. first") == "1\\. first"
    assert md_text("1.5 ms") == "1.5 ms"  # not a list: left alone
    assert md_text("a@b.io") == "a&#64;&#8203;b.io"
    assert md_text("::error::x").startswith(":\u200b:")
    assert _runner_commands(md_text("x ##[error]y")) == []


def test_junit_carries_no_command_and_names_its_file() -> None:
    xml = render_junit(_hostile_report())
    assert _runner_commands(xml) == []
    root = ET.fromstring(xml.encode())
    values = [v for el in root.iter() for v in (el.text or "", *el.attrib.values())]
    for value in values:  # as a reporter reads them, after XML decoding
        assert _runner_commands(value) == [], value
        assert not re.search("[\x1b\x80-\x9f\u202a-\u202e\u2066-\u2069]", value), value
    assert "::add-mask::the-log".replace("::", ":\u200b:", 1) in xml  # kept, as text
    # Annotations land on the kernel file (at its first static finding), not where the
    # failure text's "file.rs:9" would point a reporter.
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert cases["matmul[smoke_64]"].get("file") == "kernels/matmul.py"
    assert cases["matmul[smoke_64]"].get("line") == "12"
    assert cases["vector_add[smoke_1k]"].get("line") == "1"


def test_sarif_messages_hold_no_placeholder_or_link() -> None:
    finding = Finding(rule="FB001", severity=Severity.FALLBACK, layer=Layer.STATIC,
                      message=f"calls torch.mm via {CI_HOSTILE}", file="kernels/k.py", line=3,
                      snippet=f"x = 1  # {CI_HOSTILE}")
    log = to_sarif({"kernels/k.py": [finding]}, tool_version="0.1.0")
    [result] = log["runs"][0]["results"]
    text = result["message"]["text"]
    # SARIF 2.1.0 3.11.5: a lone brace opens a placeholder; 3.11.6: `[..](..)` is a link.
    assert not re.search(r"(?<!\{)\{\d+\}(?!\})", text) and "{{0}}" in text
    assert not re.search(r"(?<!\\)\[[^\]]*(?<!\\)\]\(", text) and "\\[see\\](1)" in text
    assert _runner_commands(text) == []
    assert _runner_commands(result["locations"][0]["physicalLocation"]["region"]
                            ["snippet"]["text"]) == []
    assert _runner_commands(json.dumps(log, indent=2)) == []


def test_inert_text_keeps_ordinary_text() -> None:
    ordinary = "aten::mm ran 3 times; see kernels/k.py:12 (C++ at::native::add)\n  x = a::b"
    assert inert_text(ordinary) == ordinary
    assert sarif_text("plain words") == "plain words"
    assert inert_text(HOSTILE) == inert_text(inert_text(HOSTILE))  # stable when repeated
