"""The reports of a run that failed before it graded anything (an option, the suite, the
bundle, the host): report.md, report.html and report.junit.xml that say the run failed and
why, so that a CI job publishes its summary and test results either way (issue 34: a suite
that was not found left no JUnit, HTML or summary, and the job showed nothing). Pure but for
`write_not_graded`; no report.json is written (there is no report to record).

The error's message and hint are the grader's words, which can quote a bundle's path or a
manifest's text: each goes through inert.py as entry text does.
"""

from __future__ import annotations

import html
import xml.etree.ElementTree as ET
from pathlib import Path

from grader.files import atomic_write
from grader.report.inert import clean_text, inert_text
from grader.report.markdown import md_text
from grader.report.render import FILENAMES
from grader.report.summaries import ErrorInfo

TEXT_LIMIT = 2000
FORMATS = ("md", "html", "junit")


def _lines(err: ErrorInfo) -> tuple[str, str]:
    head = f"not graded: {err.kind} (exit {err.exit_code})"
    return head, err.message + (f"\nhint: {err.hint}" if err.hint else "")


def not_graded_junit(err: ErrorInfo) -> str:
    head, body = _lines(err)
    root = ET.Element("testsuites", name="grader", tests="1", failures="0", errors="1",
                      skipped="0")
    suite = ET.SubElement(root, "testsuite", name="grader run", tests="1", failures="0",
                          errors="1", skipped="0")
    case = ET.SubElement(suite, "testcase", classname="grader", name="grading")
    node = ET.SubElement(case, "error", type=err.kind, message=inert_text(head, 300))
    node.text = inert_text(body, TEXT_LIMIT)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True)


def not_graded_markdown(err: ErrorInfo) -> str:
    head, _ = _lines(err)
    lines = ["## Grader: not graded", "", f"> ❌ {md_text(head)}: the run stopped before it "
             "graded anything; no verdict is given.", "",
             f"**Error:** {md_text(err.message, TEXT_LIMIT)}", ""]
    if err.hint:
        lines += [f"**Hint:** {md_text(err.hint, TEXT_LIMIT)}", ""]
    return "\n".join(lines)


def not_graded_html(err: ErrorInfo) -> str:
    head, _ = _lines(err)

    def esc(text: str) -> str:
        return html.escape(clean_text(text, TEXT_LIMIT))

    hint = f"<p><strong>Hint:</strong> {esc(err.hint)}</p>\n" if err.hint else ""
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
            "style-src 'unsafe-inline'\">\n<title>grader: not graded</title>\n</head>\n"
            f"<body>\n<h1>Not graded</h1>\n<p>{esc(head)}: the run stopped before it graded "
            "anything; no verdict is given.</p>\n"
            f"<p><strong>Error:</strong> {esc(err.message)}</p>\n{hint}</body>\n</html>\n")


RENDERERS = {"md": not_graded_markdown, "html": not_graded_html, "junit": not_graded_junit}


def write_not_graded(err: ErrorInfo, out_dir: Path, formats: tuple[str, ...]
                     ) -> dict[str, Path]:
    """The not-graded reports among `formats` into `out_dir`; nothing when `out_dir` holds
    a report already (another run's reports are never replaced by a failure's), or cannot be
    written (the error may be that very folder)."""
    wanted = [f for f in FORMATS if f in formats]
    if not wanted or (out_dir / FILENAMES["json"]).exists():
        return {}
    written = {}
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for fmt in wanted:
            path = out_dir / FILENAMES[fmt]
            # Whole or not at all: the failure may be a full disk (tests/integration/
            # test_faults.py), and a half-written report is worse than none.
            atomic_write(path, RENDERERS[fmt](err))
            written[fmt] = path
    except OSError:
        return written
    return written
