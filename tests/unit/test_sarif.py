"""SARIF 2.1.0 export: the shape code-scanning tools need, rules from the one rule table."""

from __future__ import annotations

import json

from grader.detect.policy import load_policy
from grader.detect.rules import RULES
from grader.detect.static import analyze
from grader.model.findings import Finding, Layer, Severity
from grader.report.sarif import SARIF_SCHEMA, to_sarif

SOURCE = """import torch
import subprocess

def kernel(a, b):
    subprocess.run(["ls"])
    return torch.matmul(a, b)
"""


def _log() -> dict:
    findings = analyze(SOURCE, "kernels/matmul.py", load_policy("triton"))
    dynamic = Finding(rule="DY002", severity=Severity.FALLBACK, layer=Layer.DYNAMIC,
                      message="no kernel in the target DSL ran")
    info = Finding(rule="ST000", severity=Severity.INFO, layer=Layer.STATIC, message="m",
                   file="kernels/odd name#1.py", line=3, column=0)
    return to_sarif({"kernels/matmul.py": [*findings, dynamic], "kernels/odd name#1.py": [info]},
                    tool_version="0.1.0")


def test_top_level_shape() -> None:
    log = _log()
    assert log["$schema"] == SARIF_SCHEMA and log["version"] == "2.1.0"
    [run] = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "grader" and driver["version"] == "0.1.0"
    assert [r["id"] for r in driver["rules"]] == list(RULES)
    for rule in driver["rules"]:
        assert rule["shortDescription"]["text"] == RULES[rule["id"]].title
        assert rule["defaultConfiguration"]["level"] in ("note", "warning", "error")
    json.dumps(log)  # serialisable as is


def test_results() -> None:
    run = _log()["runs"][0]
    by_rule = {r["ruleId"]: r for r in run["results"]}
    assert {"FB001", "SB001", "FB005", "DY002", "ST000"} <= set(by_rule)
    fb = by_rule["FB001"]
    assert fb["level"] == "error"
    assert run["tool"]["driver"]["rules"][fb["ruleIndex"]]["id"] == "FB001"
    loc = fb["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"] == "kernels/matmul.py"
    assert loc["region"]["startLine"] == 6 and loc["region"]["startColumn"] == 12
    assert loc["region"]["snippet"]["text"] == "return torch.matmul(a, b)"
    # a dynamic finding has the file it was grouped under and no region
    dyn = by_rule["DY002"]["locations"][0]["physicalLocation"]
    assert dyn["artifactLocation"]["uri"] == "kernels/matmul.py" and "region" not in dyn
    st = by_rule["ST000"]
    assert st["level"] == "note"
    assert st["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == (
        "kernels/odd%20name%231.py"
    )


def test_empty() -> None:
    log = to_sarif({}, tool_version="0")
    assert log["runs"][0]["results"] == [] and log["runs"][0]["tool"]["driver"]["rules"]


def test_a_graded_problem_not_passed_is_a_result_with_its_error() -> None:
    from grader.model.results import ProblemResult, ShapeResult
    from grader.verdicts import Verdict

    error = ('Traceback (most recent call last):\n  File "kernels/add.py", line 4, in <module>\n'
             '  File "kernels/add.py", line 9, in kernel\nZeroDivisionError: division by zero')
    shape = ShapeResult(id="s", phase="decode", smoke=True, params={},
                        verdict=Verdict.RUNTIME_ERROR, detail="case s.0: kernel() raised",
                        error_excerpt=error)
    problems = [ProblemResult(id="add", operator="add", verdict=Verdict.RUNTIME_ERROR,
                              kernel_file="kernels/add.py", shapes=[shape],
                              stderr_excerpt="printed by the entry"),
                ProblemResult(id="ok", operator="x", verdict=Verdict.PASSED)]
    run = to_sarif({}, tool_version="0", verdicts=problems)["runs"][0]
    [result] = run["results"]  # nothing for the problem that passed
    assert result["ruleId"] == "verdict/runtime_error" and result["level"] == "error"
    rule = run["tool"]["driver"]["rules"][result["ruleIndex"]]
    assert rule["id"] == "verdict/runtime_error"
    text = result["message"]["text"]
    assert "kernel() raised" in text and "ZeroDivisionError" in text
    assert "printed by the entry" in text
    loc = result["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"] == "kernels/add.py"
    assert loc["region"]["startLine"] == 9  # the deepest frame of the kernel file
