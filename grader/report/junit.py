"""`report.junit.xml`: one test case per (problem, shape) for any CI system's test tab.

Pure: a `Report` in, text out. Built with ElementTree so entry text can never open or close
an element; characters that XML 1.0 forbids (NUL and other controls) are stripped first,
since ElementTree would otherwise write a file no parser accepts.

Mapping: passed -> a plain test case; infra_error, reference_error and unverified -> <error>
(the grader or the suite failed, or this host cannot judge the shape: not the entry's
failure); every other verdict, `missing` included, -> <failure type="<verdict>">. A problem
without shapes (a missing kernel, say) still gets one test case named after the problem.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from grader.model.results import ProblemResult, Report, ShapeResult
from grader.report.inert import clean_text, inert_text
from grader.verdicts import NOT_JUDGED, Verdict

TEXT_LIMIT = 4000  # per failure body / system-err, like the HTML report's <pre> blocks


def _seconds(value: float | None) -> str:
    return f"{value:.3f}" if value is not None else "0"


def _outcome(
    case: ET.Element, verdict: Verdict, detail: str, excerpt: str | None
) -> str | None:
    """Attach the verdict to a test case; returns "failure", "error" or None (passed)."""
    if verdict is Verdict.PASSED:
        return None
    # The grader's or the suite's failure, or a shape this host cannot judge: not the entry's.
    tag = "error" if verdict in NOT_JUDGED else "failure"
    node = ET.SubElement(case, tag, type=verdict.value, message=verdict.message)
    # inert_text: a test's text reaches logs and check-run annotations (issue 24).
    body = [inert_text(detail, TEXT_LIMIT)] if detail else []
    if excerpt:
        body.append(inert_text(excerpt, TEXT_LIMIT, tail=True))
    node.text = "\n\n".join(body) or verdict.message
    return tag


def _shape_case(
    suite_el: ET.Element, classname: str, problem: ProblemResult, shape: ShapeResult
) -> str | None:
    case = ET.SubElement(
        suite_el,
        "testcase",
        name=clean_text(f"{problem.id}[{shape.id}]", 300),
        classname=classname,
    )
    _locate(case, problem)
    detail = shape.detail
    for finding in shape.findings:
        detail += f"\n{finding.rule} ({finding.severity.value}): {finding.message}"
    return _outcome(case, shape.verdict, detail, shape.error_excerpt)


def _locate(case: ET.Element, problem: ProblemResult) -> None:
    """Name the kernel file (and a static finding's line) on the test case: without them a
    reporter looks for a `file:line` in the failure text, which the entry writes, and puts
    its annotation wherever that points (issue 24)."""
    if problem.kernel_file is None:
        return
    case.set("file", inert_text(problem.kernel_file, 300))
    lines = [f.line for f in problem.findings
             if f.line is not None and f.file in (None, problem.kernel_file)]
    case.set("line", str(min(lines) if lines else 1))


def _problem_suite(root: ET.Element, report: Report, problem: ProblemResult) -> None:
    classname = clean_text(f"grader.{report.suite.id}.{problem.id}", 300)
    suite_el = ET.SubElement(root, "testsuite", name=clean_text(problem.id, 200))
    outcomes: list[str | None] = []
    if problem.shapes:
        outcomes = [_shape_case(suite_el, classname, problem, s) for s in problem.shapes]
    else:
        case = ET.SubElement(
            suite_el, "testcase", name=clean_text(problem.id, 200), classname=classname
        )
        _locate(case, problem)
        detail = problem.detail
        for finding in problem.findings:
            detail += f"\n{finding.rule} ({finding.severity.value}): {finding.message}"
        outcomes = [_outcome(case, problem.verdict, detail, None)]
    suite_el.set("tests", str(len(outcomes)))
    suite_el.set("failures", str(outcomes.count("failure")))
    suite_el.set("errors", str(outcomes.count("error")))
    suite_el.set("skipped", "0")
    suite_el.set("time", _seconds(problem.wall_s))
    suite_el.set("timestamp", report.created_at.replace(microsecond=0).isoformat())
    if problem.findings:
        out = ET.SubElement(suite_el, "system-out")
        out.text = inert_text(
            "\n".join(
                f"{f.rule} {f.severity.value} {f.file or '-'}:{f.line or '-'} {f.message}"
                for f in problem.findings
            ),
            TEXT_LIMIT,
        )
    if problem.stderr_excerpt:
        err = ET.SubElement(suite_el, "system-err")
        err.text = inert_text(problem.stderr_excerpt, TEXT_LIMIT, tail=True)


def render_junit(report: Report) -> str:
    """The report as JUnit XML: <testsuites> with one <testsuite> per problem."""
    root = ET.Element("testsuites", name=inert_text(f"grader {report.submission.name}", 200))
    for problem in report.problems:
        _problem_suite(root, report, problem)
    for key in ("tests", "failures", "errors", "skipped"):
        root.set(key, str(sum(int(s.get(key, "0")) for s in root)))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True)
