"""SARIF 2.1.0 for code-scanning tools (GitHub code scanning, VS Code's SARIF viewer...).

Pure: findings in, a JSON-ready dict out. The rule metadata comes from the one rule table
(grader.detect.rules.RULES), so the docs, the CLI and code scanning agree. A graded run adds
one result per problem whose verdict is not `passed` (`verdict_results`), under a rule per
verdict (`verdict/<name>`), carrying the verdict's detail, the entry's error and the end of its
output (issue 23: every report format shows what went wrong).
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from grader.detect.rules import RULES
from grader.model.findings import Finding, Severity
from grader.report.failures import entry_line
from grader.report.inert import inert_text, sarif_text
from grader.verdicts import NOT_JUDGED, Verdict

if TYPE_CHECKING:
    from grader.model.results import ProblemResult

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


EXCERPT_LIMIT = 4000  # per error or output excerpt, like the other formats


def verdict_rule(verdict: Verdict) -> dict[str, Any]:
    level = "warning" if verdict in NOT_JUDGED else "error"
    return {"id": f"verdict/{verdict.value}", "name": verdict.value.title().replace("_", ""),
            "shortDescription": {"text": f"verdict {verdict.value}"},
            "fullDescription": {"text": verdict.message},
            "defaultConfiguration": {"level": level},
            "help": {"text": f"{verdict.message}. See docs/formats.md, Verdicts."}}


def _error_line(problem: ProblemResult) -> int | None:
    """The deepest line of the kernel file in the problem's first error traceback (or the
    stack dump of a timeout: failures.entry_line)."""
    for s in problem.shapes:
        found = entry_line(s.error_excerpt, problem.kernel_file)
        if found is not None:
            return found[0]
    return None


def verdict_result(problem: ProblemResult, index: int) -> dict[str, Any]:
    """A problem whose verdict is not passed: the verdict, its detail, the first shape's
    error and the end of the entry's output, against its kernel file."""
    verdict = problem.verdict
    failing = [s for s in problem.shapes if s.verdict is verdict] or problem.shapes
    parts = [f"{problem.id}: {verdict.value}: "
             + (failing[0].detail if failing else problem.detail or verdict.message)]
    error = next((s.error_excerpt for s in failing if s.error_excerpt), None)
    if error:
        parts.append("error: " + inert_text(error, EXCERPT_LIMIT, tail=True))
    if problem.stderr_excerpt:
        parts.append("entry output (its end): "
                     + inert_text(problem.stderr_excerpt, EXCERPT_LIMIT, tail=True))
    location: dict[str, Any] = {"artifactLocation": {"uri": _uri(problem.kernel_file or
                                                                 f"kernels/{problem.id}.py")}}
    line = _error_line(problem)
    if line is not None:
        location["region"] = {"startLine": line}
    return {"ruleId": f"verdict/{verdict.value}", "ruleIndex": index,
            "level": "warning" if verdict in NOT_JUDGED else "error",
            "message": {"text": sarif_text("\n".join(parts))},
            "locations": [{"physicalLocation": location}],
            "properties": {"problem": problem.id, "verdict": verdict.value,
                           "shapes": [s.id for s in failing]}}


def to_sarif(findings_by_file: dict[str, list[Finding]], *, tool_version: str,
             verdicts: list[ProblemResult] | None = None) -> dict[str, Any]:
    """One SARIF log with one run: every rule of the table, every finding as a result; with
    `verdicts` (a graded run's problems), a result per problem not passed."""
    rule_ids = list(RULES)
    index = {rule_id: i for i, rule_id in enumerate(rule_ids)}
    results = [
        _result(f, path, index)
        for path in sorted(findings_by_file)
        for f in findings_by_file[path]
    ]
    rules = [_rule(r) for r in rule_ids]
    for problem in verdicts or []:
        if problem.verdict is Verdict.PASSED:
            continue
        rule_id = f"verdict/{problem.verdict.value}"
        if rule_id not in index:
            index[rule_id] = len(rules)
            rules.append(verdict_rule(problem.verdict))
        results.append(verdict_result(problem, index[rule_id]))
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "grader",
                        "version": tool_version,
                        "rules": rules,
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }
