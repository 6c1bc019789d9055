"""SARIF 2.1.0 for code-scanning tools (GitHub code scanning, VS Code's SARIF viewer...).

Pure: findings in, a JSON-ready dict out. The rule metadata comes from the one rule table
(grader.detect.rules.RULES), so the docs, the CLI and code scanning agree.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote

from grader.detect.findings import Finding, Severity
from grader.detect.rules import RULES
from grader.report.inert import inert_text, sarif_text

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)

# SARIF has three result levels that matter; every verdict-changing severity is an error.
LEVELS: dict[Severity, str] = {
    Severity.INFO: "note",
    Severity.WARNING: "warning",
    Severity.FALLBACK: "error",
    Severity.VIOLATION: "error",
    Severity.TAMPERING: "error",
}


def _rule(rule_id: str) -> dict[str, Any]:
    info = RULES[rule_id]
    return {
        "id": rule_id,
        "name": "".join(w.capitalize() for w in info.title.replace("/", " ").split()),
        "shortDescription": {"text": info.title},
        "fullDescription": {"text": info.description},
        "defaultConfiguration": {"level": LEVELS[info.severity]},
        "help": {"text": f"{info.description} See docs/detection.md, rule {rule_id}."},
        "properties": {"severity": str(info.severity), "layer": info.layer},
    }


def _uri(path: str) -> str:
    # Entry file names are hostile input: percent-encode everything but the separators.
    return quote(PurePosixPath(path.replace("\\", "/")).as_posix(), safe="/")


def _result(finding: Finding, path: str, index: dict[str, int]) -> dict[str, Any]:
    location: dict[str, Any] = {"artifactLocation": {"uri": _uri(finding.file or path)}}
    if finding.line is not None:
        region: dict[str, Any] = {"startLine": finding.line}
        if finding.column is not None:
            region["startColumn"] = finding.column + 1  # ast columns are 0-based, SARIF's 1
        if finding.snippet:
            # Source text, shown as code: only made inert (issue 24), not escaped.
            region["snippet"] = {"text": inert_text(finding.snippet)}
        location["region"] = region
    result: dict[str, Any] = {
        "ruleId": finding.rule,
        "level": LEVELS[finding.severity],
        # The message quotes the entry's names: no placeholder or link of its making.
        "message": {"text": sarif_text(finding.message)},
        "locations": [{"physicalLocation": location}],
        "properties": {"severity": str(finding.severity), "layer": str(finding.layer)},
    }
    if finding.rule in index:
        result["ruleIndex"] = index[finding.rule]
    return result


def to_sarif(findings_by_file: dict[str, list[Finding]], *, tool_version: str) -> dict[str, Any]:
    """One SARIF log with one run: every rule of the table, every finding as a result."""
    rule_ids = list(RULES)
    index = {rule_id: i for i, rule_id in enumerate(rule_ids)}
    results = [
        _result(f, path, index)
        for path in sorted(findings_by_file)
        for f in findings_by_file[path]
    ]
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "grader",
                        "version": tool_version,
                        "rules": [_rule(r) for r in rule_ids],
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }
