"""Static analysis on the fallback case folders (tests/cases/fallback/, issue 3 "Tests").

Every folder under tests/cases/fallback/ is one entry: `case.toml` says which layer must
catch it (`[detect] caught_by`: static, dynamic, both, or none for honest entries) and which
rule ids the static analysis must report (`[detect] static`). Here only the static layer
runs (no Docker, no Triton); tests/integration/test_cases.py grades the same folders in the
sandbox and checks `[expect]`, which is where the dynamic layer shows what it caught.
"""

from __future__ import annotations

import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from grader.detect.policy import Policy, load_policy
from grader.detect.rules import RULES
from grader.detect.static import analyze
from grader.model.findings import Finding, Severity
from grader.verdicts import Verdict

CASES = Path(__file__).resolve().parents[1] / "cases" / "fallback"
DECISIVE = frozenset({Severity.FALLBACK, Severity.VIOLATION, Severity.TAMPERING})
LAYERS = ("static", "dynamic", "both", "none")

# Cases the static analysis gets wrong today (found while writing them; reported, not fixed
# here). strict: once the analysis is fixed the case passes, the xfail fails, and its line
# here must go.
KNOWN_GAPS: dict[str, str] = {}


def _case_dirs() -> list[Path]:
    return sorted(p for p in CASES.iterdir() if (p / "case.toml").is_file())


def _spec(case: Path) -> dict[str, Any]:
    return tomllib.loads((case / "case.toml").read_text(encoding="utf-8"))


def _kernel_files(case: Path, spec: dict[str, Any]) -> dict[str, str]:
    """Problem id -> kernel path inside the submission, for every problem the case grades."""
    sub = tomllib.loads((case / "submission" / "submission.toml").read_text(encoding="utf-8"))
    return {pid: sub["problems"][pid]["file"] for pid in spec["problems"]}


def _params() -> list[Any]:
    out = []
    for case in _case_dirs():
        gap = KNOWN_GAPS.get(case.name)
        marks = [pytest.mark.xfail(strict=True, reason=gap)] if gap else []
        out.append(pytest.param(case, id=case.name, marks=marks))
    return out


@pytest.fixture(scope="module")
def policy() -> Policy:
    return load_policy("triton")


def _describe(findings: list[Finding]) -> str:
    return "\n".join(f"  {f.rule} {f.severity} line {f.line}: {f.message}" for f in findings)


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in _case_dirs()])
def test_case_folder_is_well_formed(case: Path) -> None:
    spec = _spec(case)
    assert isinstance(spec.get("description"), str) and spec["description"].strip()
    problems = spec["problems"]
    assert problems and set(spec["expect"]) == set(problems)
    for verdict in spec["expect"].values():
        Verdict(verdict)  # raises on a misspelt verdict
    detect = spec["detect"]
    assert detect["caught_by"] in LAYERS
    for rule in detect["static"]:
        assert rule in RULES and RULES[rule].layer == "static", rule
    # The layers and the lists must tell the same story.
    assert bool(detect["static"]) == (detect["caught_by"] in ("static", "both"))
    honest = detect["caught_by"] == "none"
    assert honest == all(v == "passed" for v in spec["expect"].values())
    sub = tomllib.loads((case / "submission" / "submission.toml").read_text(encoding="utf-8"))
    assert sub["submission"]["suite"] == "demo" and sub["submission"]["dsl"] == "triton"
    for path in _kernel_files(case, spec).values():
        assert (case / "submission" / path).is_file(), path


@pytest.mark.parametrize("case", _params())
def test_static_analysis_catches_what_the_case_says(case: Path, policy: Policy) -> None:
    spec = _spec(case)
    detect = spec["detect"]
    for pid, path in _kernel_files(case, spec).items():
        source = (case / "submission" / path).read_text(encoding="utf-8")
        findings = analyze(source, path, policy)
        decisive = [f for f in findings if f.severity in DECISIVE]
        reported = {f.rule for f in decisive}
        missing = sorted(set(detect["static"]) - reported)
        assert not missing, (
            f"{case.name}/{pid}: static analysis did not report {missing} "
            f"(fallback/violation/tampering); it found:\n{_describe(findings)}"
        )
        if detect["caught_by"] in ("dynamic", "none"):
            assert not decisive, (
                f"{case.name}/{pid}: caught_by={detect['caught_by']!r}, but static analysis "
                f"reported findings that decide a verdict:\n{_describe(decisive)}"
            )


def test_the_cases_cover_both_layers_and_honest_entries() -> None:
    specs = [_spec(c) for c in _case_dirs()]
    layers = Counter(s["detect"]["caught_by"] for s in specs)
    assert len(specs) >= 30
    assert layers["static"] >= 3, "at least 3 cases only the static analysis can catch"
    assert layers["dynamic"] >= 3, "at least 3 cases only the dynamic analysis can catch"
    honest = [s for s in specs if s["detect"]["caught_by"] == "none"
              and all(v == "passed" for v in s["expect"].values())]
    assert len(honest) >= 6, "at least 6 honest entries that must not be flagged"
    every_problem = {p for s in specs for p in s["problems"]}
    assert every_problem == {"vector_add", "rmsnorm", "matmul"}


def test_known_gaps_name_existing_cases() -> None:
    names = {c.name for c in _case_dirs()}
    assert set(KNOWN_GAPS) <= names
