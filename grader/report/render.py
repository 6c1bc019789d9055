"""Write a report in the formats asked for, and read `report.json` back.

This is the I/O edge of the report package: the renderers (html.py, markdown.py, junit.py)
are pure functions from a `Report` to text, and every string they embed that came from the
entry goes through inert.py first.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from grader.errors import UsageError
from grader.model.findings import Finding
from grader.model.results import Report
from grader.report.html import render_html
from grader.report.junit import render_junit
from grader.report.markdown import render_markdown
from grader.report.public import public_view
from grader.report.sarif import to_sarif

FORMATS: tuple[str, ...] = ("json", "html", "md", "junit", "sarif")

FILENAMES: dict[str, str] = {
    "json": "report.json",
    "html": "report.html",
    "md": "report.md",
    "junit": "report.junit.xml",
    "sarif": "report.sarif",
}


def _renderers(public: bool = False) -> dict[str, Callable[[Report], str]]:

    return {
        "json": lambda report: report.model_dump_json(indent=2),
        "html": lambda report: render_html(report, public=public),
        "md": lambda report: render_markdown(report, public=public),
        "junit": render_junit,
        "sarif": render_sarif,
    }


def render_sarif(report: Report) -> str:
    """The run's findings as SARIF 2.1.0: static ones with their lines, each distinct
    dynamic one (per shape) against the kernel file, and a result per problem not passed
    (its verdict, error and output excerpt)."""
    by_file: dict[str, list[Finding]] = {}
    for p in report.problems:
        if p.kernel_file is None:
            continue
        found = list(p.findings)
        for s in p.shapes:
            found += [f for f in s.findings if f not in found]
        by_file[p.kernel_file] = found
    return json.dumps(to_sarif(by_file, tool_version=report.environment.grader_version,
                               verdicts=report.problems), indent=2)


def write_reports(report: Report, out_dir: Path, formats: list[str], *, public: bool = False
                  ) -> dict[str, Path]:
    """Render `report` in each of `formats` into `out_dir`; returns format -> file written.

    `public`: the renderings meant for publication (html, md, junit, sarif) leave the entry's
    output out (report/public.py); report.json stays the record."""
    unknown = [fmt for fmt in formats if fmt not in FORMATS]
    if unknown:
        raise UsageError(
            f"unknown report format(s): {', '.join(unknown)}",
            hint=f"choose from {', '.join(FORMATS)}",
        )
    renderers = _renderers(public)
    shown = public_view(report) if public else report
    # Render everything before writing anything, so a renderer bug leaves no partial set.
    texts = {fmt: renderers[fmt](report if fmt == "json" else shown)
             for fmt in dict.fromkeys(formats)}
    out_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for fmt, text in texts.items():
        path = out_dir / FILENAMES[fmt]
        path.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
        written[fmt] = path
    return written


def load_report(path: Path | str) -> Report:
    """Read a `report.json`; a missing, unreadable or invalid file is a UsageError."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(
            f"cannot read report file {path}: {exc.strerror or exc}",
            hint="pass the report.json written by `grader run`",
        ) from exc
    try:
        return Report.model_validate_json(data)
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(part) for part in err['loc']) or '(top level)'}: {err['msg']}"
            for err in exc.errors()[:5]
        ]
        more = exc.error_count() - len(problems)
        if more > 0:
            problems.append(f"... and {more} more")
        raise UsageError(
            f"{path} is not a valid grader report:\n    " + "\n    ".join(problems),
            hint="it must be a report.json written by `grader run` "
            "(schema version 1); re-run the grading if it was edited or truncated",
        ) from exc
