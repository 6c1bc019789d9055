"""Issue 23: `grader run --practice` against the real engine: the public shapes only, full
diagnostics, and nothing hidden (hidden shape ids and params, `[hidden]` notes and provenance,
the FLOP and byte expressions, the weights) in stdout, stderr or any report format."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from grader import __version__
from grader.organiser.release_kit import hidden_values, leaks
from grader.paths import PROBLEM_BUNDLES, REPO
from grader.suite.load import load_suite

pytestmark = pytest.mark.docker
FORMATS = "json,html,md,junit,sarif"
HIDDEN_SHAPE = '''
[[shapes]]
id = "zz_hidden_shape_q7"
params = { n = 98765 }
phase = "decode"
'''


def _suite(tmp: Path) -> Path:
    root = tmp / "suites"
    shutil.copytree(PROBLEM_BUNDLES / "demo", root / "demo")
    toml = root / "demo" / "vector_add" / "problem.toml"
    text = toml.read_text().replace(
        'provenance = "demo:', 'provenance = "PROV-SECRET-4711 demo:').replace(
        'notes = "', 'notes = "NOTES-SECRET-4711 ')
    head, hidden = text.split("[hidden]")
    toml.write_text(head + HIDDEN_SHAPE + "\n[hidden]" + hidden)
    return root


def _without_clocks(log: str) -> str:
    """The JSON progress lines less their clock readings (elapsed_s, eta_s, ts): this run's
    own times, not the suite's content, which a hidden number can equal by chance (a CI run
    of 2026-12-03 read `"elapsed_s": 0.04` as the hidden weight 0.04)."""
    lines = []
    for line in log.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            lines.append(line)
            continue
        if isinstance(event, dict):
            event = {k: v for k, v in event.items() if k not in ("elapsed_s", "eta_s", "ts")}
        lines.append(json.dumps(event))
    return "\n".join(lines)


def test_practice_shows_public_shapes_and_nothing_hidden(engine, runtime, tmp_path: Path  # type: ignore[no-untyped-def]
                                                          ) -> None:
    roots = _suite(tmp_path)
    out = tmp_path / "out"
    res = subprocess.run(
        [sys.executable, "-m", "grader", "run", str(REPO / "examples" / "triton"),
         "--problem", "vector_add", "--suites", str(roots), "--practice", "--json",
         "--format", FORMATS, "--log-format", "json", "-o", str(out)],
        capture_output=True, text=True, cwd=REPO, check=False, timeout=900)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    jsonschema.validate(data, json.loads((REPO / "docs/schemas/run.schema.json").read_text()))
    [problem] = data["problems"]
    assert data["practice"] and problem["id"] == "vector_add"
    assert [s["id"] for s in problem["shapes"]] == ["smoke_4099"]
    assert problem["shapes"][0]["verdict"] == "passed"
    assert "vector_add/smoke_4099: passed (not timed)" in res.stderr  # the diagnostics line

    suite = load_suite(roots / "demo")
    hidden = hidden_values(suite)
    assert {"zz_hidden_shape_q7", "residual_prefill", "3*4*n"} <= hidden[0]
    assert any("NOTES-SECRET-4711" in s for s in hidden[0])
    outputs = {"stdout": res.stdout.encode(), "stderr": _without_clocks(res.stderr).encode()}
    outputs |= {p.name: p.read_bytes() for p in out.iterdir()
                if p.is_file() and p.name != "seed.secret"}
    assert {"report.json", "report.html", "report.md", "report.junit.xml",
            "report.sarif"} <= set(outputs)
    # The demo's weights version is the grader's own version number (0.1.0), which every
    # report names as such: not a leak of weights.toml.
    strings = hidden[0] - {__version__}
    assert leaks(outputs, (strings, hidden[1])) == []
    for text in outputs.values():
        assert b"SECRET-4711" not in text and b"98765" not in text


def test_run_json_when_a_gate_trips(engine, runtime, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "out"
    res = subprocess.run(
        [sys.executable, "-m", "grader", "run", str(REPO / "examples" / "triton"),
         "--problem", "vector_add", "--json", "--fail-on", "passed", "-o", str(out)],
        capture_output=True, text=True, cwd=REPO, check=False, timeout=900)
    assert res.returncode == 3, res.stderr
    data = json.loads(res.stdout)
    jsonschema.validate(data, json.loads((REPO / "docs/schemas/run.schema.json").read_text()))
    assert not data["ok"] and data["exit_code"] == 3 and data["error"]["kind"] == "VerdictGate"
    assert data["verdicts"] == {"passed": 1} and not data["practice"]
    assert data["reports"]["json"] == str(out / "report.json")
    assert "1 shape in 1 problem (" in res.stderr  # the summary line, on stderr
