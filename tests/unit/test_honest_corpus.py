"""The corpus of honest public Triton code (tests/cases/honest_public*/, issue 17 "And no false
alarms on honest code"), without Docker: every case folder is well formed and credited in
NOTICE.md, the static analysis reports nothing that would decide a verdict on any of them, and
bench/honest_corpus.py finds the cases and prints its table. The grading itself runs in
tests/integration/test_cases.py (CPU group) and tests/gpu/test_honest_public.py (both)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from suite_checks import load_module

from grader.detect.findings import Finding, Layer, Severity
from grader.detect.policy import Policy, load_policy
from grader.detect.static import analyze
from grader.paths import REPO
from grader.report.model import ProblemResult, ShapeResult
from grader.verdicts import Verdict

CASES = REPO / "tests" / "cases"
GROUPS = ("honest_public", "honest_public_gpu")
DECISIVE = frozenset({Severity.FALLBACK, Severity.VIOLATION, Severity.TAMPERING})
ADAPTER = "corpus adapter (ours)"


def _bench() -> Any:
    return load_module(REPO / "bench" / "honest_corpus.py", "_test")


def _cases() -> list[Path]:
    return sorted(p for g in GROUPS for p in (CASES / g).iterdir() if (p / "case.toml").is_file())


def _spec(case: Path) -> dict[str, Any]:
    return tomllib.loads((case / "case.toml").read_text(encoding="utf-8"))


def _kernels(case: Path) -> dict[str, Path]:
    sub = tomllib.loads((case / "submission" / "submission.toml").read_text(encoding="utf-8"))
    return {pid: case / "submission" / t["file"] for pid, t in sub["problems"].items()}


def _params() -> list[Any]:
    """`xfail` in a case.toml: a known, open false alarm (strict, so a fix shows)."""
    out = []
    for case in _cases():
        why = _spec(case).get("xfail")
        marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
        out.append(pytest.param(case, id=f"{case.parent.name}/{case.name}", marks=marks))
    return out


@pytest.fixture(scope="module")
def policy() -> Policy:
    return load_policy("triton")


def test_the_corpus_has_the_cases_the_issue_asks_for() -> None:
    names = {p.name for p in _cases()}
    assert len(names) >= 8
    for source in ("liger_", "triton_tutorial_", "vllm_"):
        assert any(n.startswith(source) for n in names), source


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in _cases()])
def test_case_folder_is_well_formed_and_credited(case: Path) -> None:
    spec = _spec(case)
    assert spec["description"].startswith("honest, public: ")
    kernels = _kernels(case)
    assert spec["problems"] == sorted(kernels)
    assert spec["expect"] == {pid: "passed" for pid in kernels}
    notice = (CASES / "honest_public" / "NOTICE.md").read_text(encoding="utf-8")
    assert f"| `{case.name}` |" in notice
    for path in kernels.values():
        text = path.read_text(encoding="utf-8")
        # The header names the upstream commit; the adapter is the file's last block.
        assert "Upstream: https://github.com/" in text.splitlines()[1]
        assert text.count(ADAPTER) == 1
        assert "def kernel(" in text.split(ADAPTER)[1]


@pytest.mark.parametrize("case", _params())
def test_static_analysis_raises_no_false_alarm(case: Path, policy: Policy) -> None:
    for path in _kernels(case).values():
        findings = analyze(path.read_text(encoding="utf-8"), f"kernels/{path.name}", policy)
        decisive = [f"{f.rule} {f.severity} line {f.line}: {f.message}"
                    for f in findings if f.severity in DECISIVE]
        assert not decisive, "\n".join(decisive)


def test_discovery_by_device_and_by_name() -> None:
    bench = _bench()
    cpu = bench.discover(bench.groups_for("cpu"))
    both = bench.discover(bench.groups_for("cuda"))
    assert cpu and {p.parent.name for p in cpu} == {"honest_public"}
    assert sorted(both) == _cases()
    one = both[-1]
    assert bench.discover(GROUPS, [one.name]) == [one]
    assert bench.discover(GROUPS, [str(one)]) == [one]
    with pytest.raises(SystemExit, match="no case 'no_such_case'"):
        bench.discover(GROUPS, ["no_such_case"])


def _finding(rule: str, severity: Severity, line: int | None = None) -> Finding:
    return Finding(rule=rule, severity=severity, layer=Layer.STATIC, message="m", line=line)


def _problem(pid: str, verdict: Verdict, static: list[Finding],
             dynamic: list[Finding]) -> ProblemResult:
    shape = ShapeResult(id="smoke", phase="decode", smoke=True, params={}, verdict=verdict,
                        findings=dynamic)
    return ProblemResult(id=pid, operator=pid, verdict=verdict, shapes=[shape], findings=static)


def test_table_lists_verdicts_and_findings_and_counts_passes() -> None:
    bench = _bench()
    ok = _problem("softmax", Verdict.PASSED, [_finding("DK001", Severity.WARNING, 360),
                                              _finding("ST002", Severity.INFO)], [])
    bad = _problem("rms_norm", Verdict.POLICY_VIOLATION,
                   [_finding("DS003", Severity.VIOLATION, 287),
                    _finding("DS003", Severity.VIOLATION, 287)],
                   [_finding("DY001", Severity.FALLBACK)])
    rows = (bench.rows_from_problems("honest_public/a", [ok], None)
            + bench.rows_from_problems("honest_public_gpu/b", [bad], "getattr on torch"))
    assert [r.ok for r in rows] == [True, False]
    assert rows[0].findings == ("DK001 warning line 360",)  # info left out
    assert rows[1].findings == ("DS003 violation line 287", "DY001 fallback")  # once each
    table = bench.render(rows).splitlines()
    assert table[0].split() == ["case", "problem", "verdict", "findings"]
    assert table[1].split() == ["honest_public/a", "softmax", "passed", "DK001", "warning",
                                "line", "360"]
    assert table[2].split()[:3] == ["honest_public_gpu/b", "rms_norm", "policy_violation"]
    assert table[3].strip() == "known: getattr on torch"
    assert table[-1] == "1/2 passed"
